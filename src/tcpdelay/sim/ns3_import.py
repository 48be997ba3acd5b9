"""Import ns-3's Python bindings with only the modules tcpdelay simulates with.

``from ns import ns`` (the PyPI package ``ns3``, ``ns3/ns/__init__.py``: ``load_modules``) has
cppyy parse the headers of every module the package ships — LTE, Wi-Fi, WiMAX, mesh and thirty
more — which is most of the ~12 s of CPU an import takes here. A simulation of tcpdelay needs five
(:data:`MODULES`, what ``cpp/tcpdelay_sim.h`` includes) and the modules they link to: this loads
those the way the package loads all of them (the same include paths, defines, smart-pointer
registration and helpers, in the libraries' dependency order), in about half the CPU.

Should the package's layout not be what this expects (another ns-3 release), the whole package is
imported as before: :func:`import_ns3` never fails where ``from ns import ns`` would not.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

#: The ns-3 modules a simulation uses (the headers ``cpp/tcpdelay_sim.h`` includes); the modules
#: they link to are loaded with them.
MODULES = ("core", "network", "internet", "point-to-point", "traffic-control")

#: Defines the package adds for a module of that name (``LIBRARY_AND_DEFINES`` there).
_MODULE_DEFINES = {"openflow": ("NS3_OPENFLOW", "ENABLE_OPENFLOW"), "click": ("NS3_CLICK",)}

_ns = None


def import_ns3():
    """The ``ns3`` C++ namespace (what ``from ns import ns`` gives) with :data:`MODULES` and their
    dependencies loaded; once per process."""
    global _ns
    if _ns is None:
        try:
            _ns = _load(MODULES)
        except (ImportError, OSError, LookupError, ValueError) as err:
            log.info("ns-3: loading the whole package (%s)", err)
            from ns import ns  # noqa: PLC0415 - the package's own import, every module

            _ns = ns
    return _ns


def _package_prefix() -> Path:
    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        raise LookupError("the ns3 package is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _libraries(lib_dir: Path) -> dict[str, Path]:
    """Module name -> its library (``libns3.44-point-to-point.so`` -> ``point-to-point``)."""
    out = {}
    for p in lib_dir.glob("libns3*-*.so"):
        m = re.fullmatch(r"libns3[\d.]*(?:-dev)?-(.+)\.so", p.name)
        if m and "test" not in m.group(1):
            out[m.group(1)] = p
    if not out:
        raise LookupError(f"no ns-3 libraries in {lib_dir}")
    return out


def _linked(library: Path) -> list[str]:
    """The shared libraries ``library`` names (read as the package reads them: the NUL-ended
    ``lib….so`` strings of the file)."""
    return [b.decode() for b in re.findall(rb"\x00(lib.*?\.so)", library.read_bytes())]


def _in_dependency_order(wanted: tuple[str, ...], libraries: dict[str, Path]) -> list[str]:
    """``wanted`` and every ns-3 module they link to, each after the modules it links to."""
    by_file = {p.name: m for m, p in libraries.items()}
    order: list[str] = []

    def visit(module: str) -> None:
        if module in order:
            return
        if module not in libraries:
            raise LookupError(f"ns-3 module {module!r} is not in the package")
        for name in _linked(libraries[module]):
            dep = by_file.get(name)
            if dep is not None and dep != module:
                visit(dep)
        order.append(module)

    for module in wanted:
        visit(module)
    return order


def _load(wanted: tuple[str, ...]):
    prefix = _package_prefix()
    lib_dir = next((prefix / d for d in ("lib64", "lib") if (prefix / d).is_dir()), None)
    if lib_dir is None or not (prefix / "include" / "ns3").is_dir():
        raise LookupError(f"{prefix} has no lib64/ (or lib/) and include/ns3/")
    libraries = _libraries(lib_dir)
    order = _in_dependency_order(wanted, libraries)
    for module in order:
        if not (prefix / "include" / "ns3" / f"{module}-module.h").is_file():
            raise LookupError(f"no header ns3/{module}-module.h")

    import cppyy  # noqa: PLC0415 - seconds; only here
    import libcppyy  # noqa: PLC0415

    libcppyy.AddSmartPtrType("Ptr")
    cppyy.add_library_path(str(lib_dir))
    cppyy.add_include_path(str(prefix / "include"))
    for module in order:
        for define in _MODULE_DEFINES.get(module, ()):
            cppyy.cppexec(f"#ifndef {define}\n#define {define} 1\n#endif\n")
    for module in order:
        cppyy.include(f"ns3/{module}-module.h")
    for module in order:
        cppyy.load_library(str(libraries[module]))
    ns = cppyy.gbl.ns3
    _as_the_package_does(cppyy, ns)
    return ns


def _as_the_package_does(cppyy, ns) -> None:
    """The package's additions after loading (``load_modules``): Time comparisons, a Node's
    proxy that does not delete the node (the simulation's NodeList owns it), and
    ``LookupByNameFailSafe``."""
    setattr(ns, "cppyy", cppyy)
    cppyy.cppdef("""
        using namespace ns3;
        bool Time_ge(Time& a, Time& b){ return a >= b;}
        bool Time_eq(Time& a, Time& b){ return a == b;}
        bool Time_ne(Time& a, Time& b){ return a != b;}
        bool Time_le(Time& a, Time& b){ return a <= b;}
        bool Time_gt(Time& a, Time& b){ return a > b;}
        bool Time_lt(Time& a, Time& b){ return a < b;}
    """)
    g = cppyy.gbl
    ns.Time.__ge__, ns.Time.__eq__, ns.Time.__ne__ = g.Time_ge, g.Time_eq, g.Time_ne
    ns.Time.__le__, ns.Time.__gt__, ns.Time.__lt__ = g.Time_le, g.Time_gt, g.Time_lt
    ns.__nodes_pending_deletion = []

    def node_del(self) -> None:
        ns.__nodes_pending_deletion.append(self)

    ns.Node.__del__ = node_del
    cppyy.cppdef("""
        using namespace ns3;
        std::tuple<bool, TypeId> LookupByNameFailSafe(std::string name)
        {
            TypeId id;
            bool ok = TypeId::LookupByNameFailSafe(name, &id);
            return std::make_tuple(ok, id);
        }
    """)
    setattr(ns, "LookupByNameFailSafe", g.LookupByNameFailSafe)


def loaded_modules() -> list[str]:
    """The ns-3 modules whose library this process has loaded (from /proc/self/maps)."""
    names = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            m = re.search(r"/libns3[\d.]*(?:-dev)?-([\w-]+)\.so", line)
            if m:
                names.add(m.group(1))
    return sorted(names)


"""ns-3 is imported with the modules a simulation uses, not the package's forty
(tcpdelay.sim.ns3_import): fewer headers for cppyy to parse, the same classes and helpers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tcpdelay.sim import ns3_import

pytestmark = pytest.mark.skipif(ns3_import.importlib.util.find_spec("ns3") is None, reason="ns-3 (PyPI ns3) is not installed")


def test_each_module_comes_after_the_modules_it_links_to():
    prefix = ns3_import._package_prefix()
    libraries = ns3_import._libraries(prefix / "lib64")
    order = ns3_import._in_dependency_order(ns3_import.MODULES, libraries)
    assert set(ns3_import.MODULES) <= set(order) and order[0] == "core"
    for i, module in enumerate(order):
        deps = {m for m, p in libraries.items() if p.name in ns3_import._linked(libraries[module]) and m != module}
        assert deps <= set(order[:i]), (module, deps - set(order[:i]))
    assert not {"wifi", "lte", "wimax", "mesh"} & set(order)
    with pytest.raises(LookupError, match="'no-such' is not in the package"):
        ns3_import._in_dependency_order(("no-such",), libraries)


_PROBE = """
import json
from tcpdelay.sim.ns3_import import import_ns3, loaded_modules
ns = import_ns3()
t = ns.Seconds(1.5)
ok, tid = ns.LookupByNameFailSafe("ns3::TcpNewReno")
missing, _ = ns.LookupByNameFailSafe("ns3::WifiNetDevice")
print(json.dumps({"modules": loaded_modules(), "seconds": t.GetSeconds(), "ge": bool(t >= ns.Seconds(1.0)),
                  "lt": bool(t < ns.Seconds(1.0)), "newreno": bool(ok), "wifi": bool(missing),
                  "codel": bool(ns.LookupByNameFailSafe("ns3::CoDelQueueDisc")[0])}))
"""


def test_a_process_loads_only_what_a_simulation_uses_with_the_packages_helpers(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(ns3_import.MODULES) <= set(got["modules"]) and "wifi" not in got["modules"] and "lte" not in got["modules"]
    assert got["seconds"] == 1.5 and got["ge"] and not got["lt"]
    assert got["newreno"] and got["codel"] and not got["wifi"]

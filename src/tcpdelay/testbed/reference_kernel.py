"""Reference kernels: another Linux, fetched from the Debian registry, booted by a testbed guest.

A reference kernel is a named Debian kernel package (:data:`KERNELS`, ``debian-6.1`` = Debian 12's
``linux-image-6.1.0-N-cloud-amd64-unsigned``) whose ``vmlinuz`` and modules run the guest of
:mod:`tcpdelay.testbed.guest`. It is fetched with ``apt-get download`` into
``~/.cache/tcpdelay/kernels`` (never part of the repository) and unpacked there once; the guest's
base initramfs (:func:`base_initramfs`) is built from it beside:

- ``/bin/busybox`` from Debian's ``busybox-static`` package (also fetched into the cache) and its
  applets as links;
- the modules the guest needs, each after those it depends on (``depends=`` of its ``.modinfo``):
  virtio-net over PCI for the network and every ``tcp_*`` congestion control of the package
  (``tcp_vegas``, ``tcp_westwood`` = Westwood+ (Mascolo et al.; net/ipv4/tcp_westwood.c), ...);
- ``iperf3`` and iproute2's ``ip`` (busybox's cannot set ``initcwnd``) with the shared libraries
  they load (from this machine, ``ldd``), as ``/usr/bin/iperf3`` and ``/usr/sbin/ip``;
- ``/init`` (:data:`INIT_SCRIPT`): loads the modules, applies ``/etc/tdguest.conf`` (address,
  gateway, sysctls, written per guest into a second cpio archive appended to the first: the kernel
  unpacks both) and serves commands on TCP port :data:`CONTROL_PORT` (``busybox nc -ll -e``) for
  ``tcpdelay testbed exec``, and starts ``/bin/tdclock`` (:mod:`tcpdelay.testbed.guest_clock`,
  compiled statically here), which answers clock probes on UDP port ``CLOCK_PORT``.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import os
import re
import shutil
import stat
import subprocess

from tcpdelay.errors import EnvironmentNotSupported, ParameterError
from tcpdelay.testbed.guest_clock import CLOCK_PORT, build_tdclock

CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "tcpdelay", "kernels")

#: The guest's command server (``/bin/tdcmd`` behind ``nc -ll``): one connection per command.
CONTROL_PORT = 7070
#: Markers the command server writes after a command's standard output (see :mod:`guest`).
STDERR_MARK = "\n@@tdcmd-stderr@@\n"
EXIT_MARK = "\n@@tdcmd-exit "


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """A kernel by name: the Debian package it comes from (``package_re`` picks the newest ABI)."""

    name: str
    package_re: str
    search: str
    description: str


KERNELS: dict[str, KernelSource] = {
    "debian-6.1": KernelSource(
        name="debian-6.1",
        package_re=r"^linux-image-6\.1\.0-(\d+)-cloud-amd64-unsigned$",
        search=r"^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$",
        description="Debian 12 (bookworm) Linux 6.1, cloud-amd64 flavour (HZ 250, virtio, tcp_* as modules)",
    ),
}

#: Modules the guest loads at boot, in this order, each after its dependencies: the network, then
#: the congestion controls the papers' variants need as the kernel's own code.
BOOT_MODULES = ("virtio_pci", "virtio_net", "tcp_vegas", "tcp_westwood", "tcp_veno", "tcp_hybla",
                "tcp_htcp", "tcp_bic", "tcp_highspeed", "tcp_scalable", "tcp_illinois", "tcp_yeah",
                "tcp_lp", "tcp_bbr", "fuse", "virtiofs")

INIT_SCRIPT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /tmp /run
for m in $(cat /etc/modules.order); do insmod /lib/modules/$m.ko || echo "tdguest: insmod $m failed"; done
. /etc/tdguest.conf
# iproute2's ip by path: busybox's shell runs its own applets ahead of PATH.
IP=/usr/sbin/ip
$IP link set lo up
$IP link set eth0 mtu "$MTU" up
$IP addr add "$ADDRESS/32" dev eth0
$IP route add "$GATEWAY/32" dev eth0
$IP route add default via "$GATEWAY" dev eth0 $ROUTE_METRICS || echo "tdguest: route metrics $ROUTE_METRICS failed"
while read -r key value; do
  [ -n "$key" ] && sysctl -q -w "$key=$value" || { [ -n "$key" ] && echo "tdguest: sysctl $key=$value failed"; }
done < /etc/tdguest.sysctl
echo "tdguest: up $(uname -r) $ADDRESS"
nc -ll -p PORT -e /bin/tdcmd &
/bin/tdclock CLOCKPORT &
# This machine's file system, when QEMU shares it (virtiofs tag "hostroot"), read-only at /host,
# with the guest's own /proc, /sys and /dev inside it: `chroot /host CMD` runs this machine's
# programs (tcpdelay's Python) on the guest's kernel. Nothing is mounted over its /tmp: a
# checkout or a virtualenv may live there (a fresh clone in /tmp was hidden by a tmpfs).
mkdir -p /host
if mount -t virtiofs -o ro hostroot /host 2>/dev/null; then
  mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
  echo "tdguest: host file system at /host"
fi
while true; do sleep 3600; done
""".replace("CLOCKPORT", str(CLOCK_PORT)).replace("PORT", str(CONTROL_PORT))

#: One command per connection: the first line is the command for ``sh -c``; the reply is its
#: standard output, STDERR_MARK, its standard error, EXIT_MARK and its exit status.
COMMAND_SERVER = r"""#!/bin/busybox sh
read -r cmd
e=/tmp/tdcmd.$$
sh -c "$cmd" </dev/null 2>$e
rc=$?
printf '\n@@tdcmd-stderr@@\n'
cat $e
rm -f $e
printf '\n@@tdcmd-exit %d\n' "$rc"
"""


def get_kernel(name: str) -> KernelSource:
    try:
        return KERNELS[name]
    except KeyError:
        raise ParameterError(f"host kernel {name!r} is unknown; allowed: {', '.join(KERNELS)}") from None


def _run(argv: list[str], cwd: str | None = None) -> str:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise EnvironmentNotSupported(f"reference kernels need {argv[0]!r} (Debian's apt and dpkg)") from None
    if proc.returncode != 0:
        raise EnvironmentNotSupported(f"{' '.join(argv)}: {proc.stderr.strip()[-300:] or f'exit {proc.returncode}'}")
    return proc.stdout


@functools.lru_cache(maxsize=None)
def package_name(kernel: KernelSource) -> str:
    """The newest package of ``kernel`` the configured Debian archive offers (asked once per
    process: ``apt-cache search`` reads the whole package list, ~0.5 s here, and a test run's
    collection asked it twice in each of its five processes)."""
    out = _run(["apt-cache", "search", "--names-only", kernel.search])
    found = []
    for line in out.splitlines():
        pkg = line.split(" ", 1)[0]
        m = re.match(kernel.package_re, pkg)
        if m:
            found.append((int(m[1]), pkg))
    if not found:
        raise EnvironmentNotSupported(f"no package matching {kernel.package_re} in this machine's apt sources")
    return max(found)[1]


def _download(package: str, dest: str) -> str:
    """``package``'s .deb in ``dest`` (``apt-get download`` when missing); its path."""
    os.makedirs(dest, exist_ok=True)
    have = glob.glob(os.path.join(dest, f"{package}_*.deb"))
    if not have:
        _run(["apt-get", "download", "-q", package], cwd=dest)
        have = glob.glob(os.path.join(dest, f"{package}_*.deb"))
        if not have:
            raise EnvironmentNotSupported(f"apt-get download {package} left no .deb in {dest}")
    return sorted(have)[-1]


def _unpack(deb: str, into: str) -> str:
    done = os.path.join(into, ".unpacked")
    if not os.path.exists(done):
        tmp = into + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        _run(["dpkg-deb", "-x", deb, tmp])
        shutil.rmtree(into, ignore_errors=True)
        os.rename(tmp, into)
        open(done, "w").close()
    return into


@dataclasses.dataclass(frozen=True)
class FetchedKernel:
    """A kernel package unpacked in the cache."""

    name: str
    package: str
    release: str          # uname -r of the guest, e.g. 6.1.0-50-cloud-amd64
    root: str             # the unpacked package
    vmlinuz: str

    @property
    def modules_dir(self) -> str:
        return os.path.join(self.root, "lib", "modules", self.release)


def fetch(name: str, cache_dir: str = CACHE_DIR) -> FetchedKernel:
    """Kernel ``name`` fetched and unpacked under ``cache_dir`` (reused when already there)."""
    kernel = get_kernel(name)
    package = package_name(kernel)
    deb = _download(package, cache_dir)
    root = _unpack(deb, os.path.join(cache_dir, os.path.basename(deb)[:-4]))
    vmlinuz = sorted(glob.glob(os.path.join(root, "boot", "vmlinuz-*")))
    if not vmlinuz:
        raise EnvironmentNotSupported(f"{deb} holds no boot/vmlinuz-*")
    release = os.path.basename(vmlinuz[-1])[len("vmlinuz-"):]
    return FetchedKernel(name, package, release, root, vmlinuz[-1])


def busybox_static(cache_dir: str = CACHE_DIR) -> str:
    """Debian's statically linked busybox (package ``busybox-static``, fetched into the cache)."""
    deb = _download("busybox-static", cache_dir)
    root = _unpack(deb, os.path.join(cache_dir, os.path.basename(deb)[:-4]))
    path = os.path.join(root, "bin", "busybox")
    if not os.path.exists(path):
        raise EnvironmentNotSupported(f"{deb} holds no bin/busybox")
    return path


def module_index(modules_dir: str) -> dict[str, str]:
    """Every module of a kernel by name (``tcp_vegas``) -> its .ko path."""
    out = {}
    for path in glob.glob(os.path.join(modules_dir, "kernel", "**", "*.ko"), recursive=True):
        out[os.path.basename(path)[:-3].replace("-", "_")] = path
    return out


def module_depends(path: str) -> list[str]:
    """The modules ``path`` needs loaded first (``depends=`` of its ``.modinfo`` section)."""
    with open(path, "rb") as f:
        data = f.read()
    m = re.search(rb"\x00depends=([^\x00]*)\x00", data)
    if not m or not m[1]:
        return []
    return [d.decode().replace("-", "_") for d in m[1].split(b",") if d]


def load_order(wanted: tuple[str, ...], index: dict[str, str]) -> list[str]:
    """``wanted`` with their dependencies, each after what it depends on (built-ins skipped)."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order or name not in index:
            return
        if name in path:
            raise EnvironmentNotSupported(f"module dependency cycle: {' -> '.join(path + (name,))}")
        for dep in module_depends(index[name]):
            visit(dep, path + (name,))
        order.append(name)

    for name in wanted:
        visit(name, ())
    return order


def _shared_libraries(binary: str) -> list[str]:
    """The files ``binary`` loads (``ldd``), the dynamic loader included."""
    out = _run(["ldd", binary])
    libs = []
    for line in out.splitlines():
        m = re.search(r"(/\S+)\s+\(0x", line)
        if m and os.path.exists(m[1]):
            libs.append(m[1])
    return libs


# --------------------------------------------------------------------------- cpio (newc)


class CpioWriter:
    """A cpio archive in the "newc" format the kernel unpacks as its initramfs."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._ino = 1
        self._dirs: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes = b"") -> None:
        name_b = name.encode() + b"\x00"
        fields = [self._ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0]
        header = b"070701" + b"".join(b"%08X" % v for v in fields)
        self._ino += 1
        blob = header + name_b
        blob += b"\x00" * (-len(blob) % 4)
        blob += data + b"\x00" * (-len(data) % 4)
        self._parts.append(blob)

    def directory(self, name: str) -> None:
        parts = name.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in self._dirs:
                self._dirs.add(d)
                self._entry(d, stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        name = name.strip("/")
        if "/" in name:
            self.directory(name.rsplit("/", 1)[0])
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name: str, target: str) -> None:
        name = name.strip("/")
        if "/" in name:
            self.directory(name.rsplit("/", 1)[0])
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def bytes(self) -> bytes:
        trailer = CpioWriter()
        trailer._entry("TRAILER!!!", 0)
        out = b"".join(self._parts) + trailer._parts[0]
        return out + b"\x00" * (-len(out) % 512)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def base_initramfs(kernel: FetchedKernel, cache_dir: str = CACHE_DIR) -> str:
    """The guest's base initramfs for ``kernel`` (built once, kept in the cache); its path."""
    iperf3, iproute = shutil.which("iperf3"), shutil.which("ip")
    if iperf3 is None or iproute is None:
        raise EnvironmentNotSupported("reference-kernel guests need iperf3 and iproute2's ip on this machine "
                                      "(apt-get install iperf3 iproute2)")
    busybox = busybox_static(cache_dir)
    index = module_index(kernel.modules_dir)
    order = load_order(BOOT_MODULES, index)
    for need in ("virtio_net", "virtio_pci"):
        if need not in order:
            raise EnvironmentNotSupported(f"kernel {kernel.package} has no {need} module")
    libs = sorted(set(_shared_libraries(iperf3)) | set(_shared_libraries(iproute)))
    tdclock = build_tdclock(cache_dir)
    key = hashlib.sha256("\n".join([INIT_SCRIPT, COMMAND_SERVER, busybox, tdclock, iperf3, iproute, *libs,
                                    *order]).encode()).hexdigest()[:12]
    path = os.path.join(cache_dir, f"initramfs-{kernel.release}-{key}.cpio")
    if os.path.exists(path):
        return path
    cpio = CpioWriter()
    for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "run", "etc", "lib/modules", "usr"):
        cpio.directory(d)
    cpio.file("bin/busybox", _read(busybox), 0o755)
    cpio.symlink("bin/sh", "busybox")
    cpio.file("init", INIT_SCRIPT.encode(), 0o755)
    cpio.file("bin/tdcmd", COMMAND_SERVER.encode(), 0o755)
    cpio.file("bin/tdclock", _read(tdclock), 0o755)
    cpio.file("usr/bin/iperf3", _read(iperf3), 0o755)
    cpio.file("usr/sbin/ip", _read(iproute), 0o755)
    for lib in libs:
        cpio.file(lib, _read(os.path.realpath(lib)), 0o755)
    for name in order:
        cpio.file(f"lib/modules/{name}.ko", _read(index[name]))
    cpio.file("etc/modules.order", ("\n".join(order) + "\n").encode())
    tmp = path + f".tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(cpio.bytes())
    os.rename(tmp, path)
    return path


def guest_config_archive(*, address: str, gateway: str, mtu_bytes: int, sysctls: list[tuple[str, str]],
                         route_metrics: list[str]) -> bytes:
    """The per-guest cpio archive (appended to the base one): ``/etc/tdguest.conf`` and
    ``/etc/tdguest.sysctl`` (one ``key value`` a line)."""
    conf = (f"ADDRESS={address}\nGATEWAY={gateway}\nMTU={int(mtu_bytes)}\n"
            f"ROUTE_METRICS='{' '.join(route_metrics)}'\n")
    cpio = CpioWriter()
    cpio.file("etc/tdguest.conf", conf.encode())
    cpio.file("etc/tdguest.sysctl", "".join(f"{k} {v}\n" for k, v in sysctls).encode())
    return cpio.bytes()

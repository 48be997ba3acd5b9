"""A testbed host whose endpoint is a QEMU guest booting a reference kernel.

:func:`attach_guest` turns a host of a running :class:`~tcpdelay.testbed.testbed.Testbed` into a
guest: the host's namespace keeps its TUN device (its end of the emulated link: nothing else of the
testbed changes) but gives up its address to the guest and becomes a one-hop router::

    guest eth0 10.N.s.i  --virtio-net/TAP--  [namespace td-<run>-<host>: TAP 10.N.s.253, ip_forward,
                                              TUN (emulator)]  <-> tcpdelay-link <-> ...

so every packet to and from the host's address crosses the emulator exactly as before, plus one
forwarding hop (no emulation) inside the namespace. The guest is ``qemu-system-x86_64`` started
inside the namespace (at niceness 0; TCG, or KVM when asked and it works) by the testbed's own
:meth:`Host.popen`: it is recorded in the run's state and killed when the testbed closes, when its
owner dies (``PR_SET_PDEATHSIG``) and by ``tcpdelay testbed clean`` (a process inside the run's
namespaces); its TAP device goes with the namespace.

Commands run in the guest through its command server (:data:`reference_kernel.CONTROL_PORT`, a
TCP connection from a socket made in the host's namespace): :func:`guest_exec`. What a run's guests
are is written to ``guests.json`` in the run's state directory (:func:`read_guests`), so
``tcpdelay testbed exec`` finds them from another process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time

from tcpdelay.errors import EnvironmentNotSupported, ParameterError, TestbedError
from tcpdelay.testbed import netns as nsutil
from tcpdelay.testbed import reference_kernel as rk
from tcpdelay.testbed.guest_clock import MAX_ERROR_S, ClockOffset, build_tdclock, measure_offset
from tcpdelay.testbed.spec import TcpSettings

ACCELERATORS = ("tcg", "kvm")
GUESTS_FILE = "guests.json"


@dataclasses.dataclass
class GuestResult:
    """What a command in a guest did (the shape of :class:`subprocess.CompletedProcess`)."""

    argv: str
    returncode: int
    stdout: str
    stderr: str


def guest_congestion_control(name: str) -> str:
    """The guest kernel's name for congestion control ``name`` (``westwood+`` -> ``westwood``,
    the kernel's tcp_westwood.c being Westwood+); a name tcpdelay does not know is taken as the
    kernel's own (``highspeed``)."""
    from tcpdelay.testbed.congestion import VARIANTS

    v = VARIANTS.get(name)
    if v is None:
        return name
    if not v.builtin:
        kin = [o.name for o in VARIANTS.values() if o.builtin and o.name != name and o.name.startswith(name)]
        raise ParameterError(f"congestion control {name!r} exists only as tcpdelay's BPF port, not in a reference "
                             f"kernel{'; the kernel has ' + ', '.join(kin) if kin else ''}")
    return v.builtin


def guest_sysctls(tcp: TcpSettings) -> tuple[list[tuple[str, str]], list[str]]:
    """``tcp`` as the guest's sysctl writes and route attributes (as :mod:`tcp_settings` does
    for a namespace; the guest's ``tcp_recovery`` starts at 1, RACK on)."""
    from tcpdelay.testbed.tcp_settings import _sysctl_writes

    writes = list(_sysctl_writes(tcp, 1))
    if tcp.congestion_control is not None:
        writes.append(("net.ipv4.tcp_congestion_control", guest_congestion_control(tcp.congestion_control)))
    metrics: list[str] = []
    if tcp.initcwnd_segments is not None:
        metrics += ["initcwnd", str(tcp.initcwnd_segments)]
    if tcp.initrwnd_segments is not None:
        metrics += ["initrwnd", str(tcp.initrwnd_segments)]
    return writes, metrics


def guest_exec(netns: str, address: str, command: str, timeout_s: float | None = 60.0) -> GuestResult:
    """Run ``command`` (``sh -c``) in the guest at ``address`` reached from namespace ``netns``."""
    if "\n" in command:
        raise ParameterError("a guest command must be one line")
    with nsutil.entered(netns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect((address, rk.CONTROL_PORT))
        sock.sendall(command.encode() + b"\n")
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except socket.timeout:
        raise TestbedError(f"guest {address}: {command!r} did not finish within {timeout_s:g} s") from None
    except OSError as err:
        raise TestbedError(f"guest {address}: command server unreachable ({err.strerror or err})") from None
    finally:
        sock.close()
    text = b"".join(chunks).decode(errors="replace")
    body, sep, tail = text.rpartition(rk.EXIT_MARK)
    if not sep:
        raise TestbedError(f"guest {address}: the command server's reply has no exit status: {text[-200:]!r}")
    out, sep, err = body.rpartition(rk.STDERR_MARK)
    return GuestResult(command, int(tail.split()[0]), out, err.removesuffix("\n") if sep else "")


def kvm_usable() -> bool:
    """Whether /dev/kvm opens (a guest may still fail under it: see :func:`attach_guest`)."""
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
        return True
    except OSError:
        return False


class Guest:
    """A running guest of host ``host`` (built by :func:`attach_guest`)."""

    def __init__(self, host, kernel: rk.FetchedKernel, accel: str, proc: subprocess.Popen, log_path: str,
                 boot_s: float, tap: str):
        self.host, self.kernel, self.accel, self.proc = host, kernel, accel, proc
        self.log_path, self.boot_s, self.tap = log_path, boot_s, tap
        self.tcp_applied: dict = {}
        self.clock: ClockOffset | None = None   # measured when it booted (measure_clock)
        self.has_host_fs = False                # this machine's / mounted at /host (found at boot)
        self.rw_dir: str | None = None          # a directory of this machine it may write (same path)

    @property
    def address(self) -> str:
        return self.host.address

    def exec(self, command: str, *, check: bool = True, timeout_s: float | None = 60.0) -> GuestResult:
        if self.proc.poll() is not None:
            raise TestbedError(f"guest of {self.host.name} has exited ({nsutil.describe_wait_status(self.proc.returncode)}); "
                               f"console: {self.log_path}")
        res = guest_exec(self.host.netns, self.address, command, timeout_s)
        if check and res.returncode != 0:
            raise TestbedError(f"guest {self.host.name}: {command} exited {res.returncode}: {res.stderr.strip()[-500:]}")
        return res

    def measure_clock(self, probes: int = 64) -> ClockOffset:
        """The guest's CLOCK_MONOTONIC minus this machine's, now, and its error
        (:func:`guest_clock.measure_offset`)."""
        return measure_offset(self.host.netns, self.address, probes=probes)

    def exec_host(self, command: str, *, check: bool = True, timeout_s: float | None = 120.0) -> GuestResult:
        """Run ``command`` (``sh -c``) with this machine's file system as its root (``chroot
        /host``): this machine's programs, on the guest's kernel. ``tcpdelay``'s Python starts in
        ~6 s under TCG."""
        self._need_host_fs()
        return self.exec(f"chroot /host /bin/sh -c {shlex.quote(command)}", check=check, timeout_s=timeout_s)

    def _need_host_fs(self) -> None:
        if not self.has_host_fs:
            raise TestbedError(f"guest {self.host.name} has no /host (virtiofsd missing: Debian's qemu-system-common)")

    def sysctl(self, key: str) -> str:
        return " ".join(self.exec(f"cat /proc/sys/{key.replace('.', '/')}").stdout.split())

    def register_bpf_port(self, variant: str, kernel_name: str, *, wait_s: float = 30.0) -> dict:
        """Register tcpdelay's BPF port of ``variant`` (``vegas``, ``westwood+``, ...) in the
        guest's kernel under ``kernel_name``, so the port and the kernel's own module run on the
        same kernel and the same emulated CPU. ``tcpdelay-cc-load`` runs in ``chroot /host``; 6.1
        has no struct_ops links, so the map update itself registers it and it stays until the
        guest goes. Returns the loader's answer (``{"name", "map_id", "link_id": 0, ...}``)."""
        from tcpdelay.testbed import bpf_cc
        from tcpdelay.testbed.congestion import NAME_MAX, VARIANTS

        v = VARIANTS.get(variant)
        if v is None or v.bpf_object is None:
            raise ParameterError(f"{variant!r}: tcpdelay has no BPF port of it (ports: "
                                 f"{', '.join(sorted(n for n, x in VARIANTS.items() if x.bpf_object))})")
        if not re.fullmatch(f"[a-z0-9_]{{1,{NAME_MAX}}}", kernel_name):
            raise ParameterError(f"kernel_name: {kernel_name!r} is not 1 to {NAME_MAX} characters of a-z, 0-9 and _")
        self._need_host_fs()
        loader, obj = bpf_cc.bpf_dir() / bpf_cc.LOADER, bpf_cc.object_path(v.bpf_object)
        out = f"/tmp/cc-load-{kernel_name}.json"      # the guest's own /tmp (/host is read-only)
        self.exec(f"(sleep 2147483647 | chroot /host {shlex.quote(str(loader))} {shlex.quote(str(obj))} "
                  f"{kernel_name} > {out} 2>&1 &)")
        deadline = time.monotonic() + wait_s
        while True:
            answer = self.exec(f"cat {out}", check=False).stdout.strip()
            if answer.startswith("{") or "tcpdelay-cc-load:" in answer or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if not answer.startswith("{"):
            raise TestbedError(f"guest {self.host.name}: the BPF port of {variant} did not register: "
                               f"{answer or 'no answer in ' + format(wait_s, 'g') + ' s'}")
        return json.loads(answer.splitlines()[0])

    def read_back(self) -> dict:
        """The guest kernel's TCP settings now (the keys of :func:`tcp_settings.read_back`)."""
        keys = ["net.ipv4.tcp_congestion_control", "net.ipv4.tcp_available_congestion_control",
                "net.ipv4.tcp_sack", "net.ipv4.tcp_recovery", "net.ipv4.tcp_early_retrans",
                "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_ecn"]
        out = self.exec("for f in " + " ".join("/proc/sys/" + k.replace(".", "/") for k in keys)
                        + "; do echo $(cat $f); done").stdout.splitlines()
        v = dict(zip(keys, out))
        recovery = int(v["net.ipv4.tcp_recovery"])
        route = self.exec("/usr/sbin/ip route show default").stdout
        metric = lambda name: int(route.split(name + " ")[1].split()[0]) if f"{name} " in route else None  # noqa: E731
        return {
            "congestion_control": v["net.ipv4.tcp_congestion_control"],
            "available_congestion_controls": v["net.ipv4.tcp_available_congestion_control"].split(),
            "sack": v["net.ipv4.tcp_sack"] == "1",
            "rack": bool(recovery & 1),
            # Linux 6.1 still has RFC 6675 loss detection: the bit is what SACK connections do.
            "rack_in_effect": bool(recovery & 1),
            "tlp": v["net.ipv4.tcp_early_retrans"] != "0",
            "slow_start_after_idle": v["net.ipv4.tcp_slow_start_after_idle"] == "1",
            "no_metrics_save": v["net.ipv4.tcp_no_metrics_save"] == "1",
            "ecn": int(v["net.ipv4.tcp_ecn"]),
            "initcwnd_segments": metric("initcwnd"),
            "initrwnd_segments": metric("initrwnd"),
        }

    def describe(self) -> dict:
        return {"host": self.host.name, "netns": self.host.netns, "address": self.address,
                "kernel": self.kernel.name, "package": self.kernel.package, "release": self.kernel.release,
                "accelerator": self.accel, "qemu_pid": self.proc.pid, "tap": self.tap, "boot_s": self.boot_s,
                "console_log": self.log_path, "control_port": rk.CONTROL_PORT, "tcp": self.tcp_applied,
                "host_fs": self.has_host_fs,
                "clock": None if self.clock is None else {
                    **self.clock.to_dict(), "clock": "CLOCK_MONOTONIC",
                    "usable_for_delays": self.clock.usable_for_delays(), "max_error_s": MAX_ERROR_S}}


def _route_via_tun(host) -> tuple[str, str]:
    """The host's own TUN device and the route it carries to the other side."""
    routes = nsutil.ip("route", "show", netns=host.netns, json_out=True)
    for rt in routes:
        if rt.get("dev") == host.ifname and rt.get("dst") not in (None, "default") and "/" in rt["dst"]:
            return host.ifname, rt["dst"]
    raise TestbedError(f"host {host.name} has no route through its TUN device {host.ifname}: a guest needs a host "
                       "with its own end of the emulated link (one host per side, or a host with an access link)")


def attach_guest(tb, host_name: str, kernel: str = "debian-6.1", *, tcp: TcpSettings | None = None,
                 accel: str = "tcg", memory_mib: int = 1024, boot_timeout_s: float = 300.0,
                 rw_dir: str | None = None) -> Guest:
    """Boot a guest running reference kernel ``kernel`` as the endpoint of host ``host_name`` of
    open testbed ``tb``, with TCP settings ``tcp`` (default: the host's own), and return it once its
    command server answers. ``accel``: ``tcg`` (emulated CPU, works everywhere) or ``kvm``.
    ``rw_dir``: a directory of this machine the guest may write, at the same path under /host (a
    run directory: what the guest's programs record lands there)."""
    if accel not in ACCELERATORS:
        raise ParameterError(f"accelerator {accel!r} is unknown; allowed: {', '.join(ACCELERATORS)}")
    if host_name not in tb.hosts:
        raise ParameterError(f"host {host_name!r} is not in this testbed; hosts: {', '.join(tb.hosts)}")
    host = tb.hosts[host_name]
    tcp = tcp if tcp is not None else host.spec.tcp
    sysctls, metrics = guest_sysctls(tcp)
    qemu = _which("qemu-system-x86_64")
    fetched = rk.fetch(kernel)
    base = rk.base_initramfs(fetched)

    tun, dst = _route_via_tun(host)
    prefix = host.address.rsplit(".", 1)[0]
    gateway, tap = f"{prefix}.253", f"td{tb.run_id}g{len(guests_of(tb))}"
    mtu = str(tb.spec.mtu_bytes)
    # The namespace gives its address to the guest and forwards between the TAP and its TUN.
    nsutil.ip_batch([
        f"addr del {host.address}/32 dev {tun}",
        f"route replace {dst} dev {tun}",
        f"tuntap add dev {tap} mode tap",
        f"link set dev {tap} mtu {mtu} txqueuelen {tb.spec.txqueuelen_packets} up",
        f"addr add {gateway}/32 dev {tap}",
        f"route add {host.address}/32 dev {tap}",
    ], netns=host.netns)
    with nsutil.entered(host.netns):
        nsutil.write_sysctl("net.ipv4.ip_forward", "1")
        for key in ("net.ipv4.conf.all.rp_filter", f"net.ipv4.conf.{tap}.rp_filter", f"net.ipv4.conf.{tun}.rp_filter"):
            nsutil.write_sysctl(key, "0")

    initrd = os.path.join(tb.state_dir, f"guest-{host.name}.cpio")
    with open(initrd, "wb") as f, open(base, "rb") as b:
        f.write(b.read())
        f.write(rk.guest_config_archive(address=host.address, gateway=gateway, mtu_bytes=tb.spec.mtu_bytes,
                                        sysctls=sysctls, route_metrics=metrics))
    log_path = os.path.join(tb.state_dir, f"guest-{host.name}.console")
    mac = "52:54:00:%02x:%02x:%02x" % tuple(int(x) for x in host.address.split(".")[1:])
    # At the ordinary niceness (0), above the cross-traffic programs (10): the guest runs the
    # measured sender or receiver. At niceness 19 it once starved beside two busy loops and four
    # test workers on two cores (no answer in 300 s, the guest kernel's RCU stalled).
    # This machine's file system shared read-only (virtiofs): the guest runs tcpdelay's own Python
    # from it (Guest.exec_host). virtiofsd is one of the testbed's processes, as QEMU is.
    rw_dir = os.path.abspath(rw_dir) if rw_dir is not None else None
    share = _share_host_fs(tb, host, memory_mib, rw_dir)
    # TCG's default CPU (qemu64) lacks instructions this machine's Python was built with
    # ("Illegal instruction"): `max` emulates every feature TCG has.
    argv = [qemu, "-name", f"tdguest-{tb.run_id}-{host.name}", "-nodefaults",
            "-machine", "q35", "-accel", accel, "-cpu", "host" if accel == "kvm" else "max", *share,
            "-smp", "1", "-m", str(memory_mib), "-display", "none", "-monitor", "none", "-no-reboot",
            "-kernel", fetched.vmlinuz, "-initrd", initrd,
            "-append", "console=ttyS0 panic=-1 quiet loglevel=4 net.ifnames=0",
            "-netdev", f"tap,id=n0,ifname={tap},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac={mac}",
            "-serial", f"file:{log_path}"]
    t0 = time.monotonic()
    with open(log_path + ".stderr", "wb") as err:
        proc = host.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    guest = Guest(host, fetched, accel, proc, log_path, 0.0, tap)
    deadline = t0 + boot_timeout_s
    while True:
        if proc.poll() is not None:
            raise TestbedError(f"the {kernel} guest of {host.name} exited while booting "
                               f"({nsutil.describe_wait_status(proc.returncode)}): {_tail(log_path + '.stderr')} "
                               f"{_tail(log_path)}")
        try:
            if guest_exec(host.netns, host.address, "echo ok", timeout_s=5.0).stdout.strip() == "ok":
                break
        except TestbedError:
            pass
        if time.monotonic() > deadline:
            raise TestbedError(f"the {kernel} guest of {host.name} did not answer within {boot_timeout_s:g} s; "
                               f"console: {_tail(log_path)}")
        time.sleep(0.2)
    guest.boot_s = round(time.monotonic() - t0, 2)
    failed = [line for line in open(log_path, errors="replace") if "tdguest:" in line and "failed" in line]
    if failed:
        raise TestbedError(f"the {kernel} guest of {host.name}: {failed[0].strip()}")
    guest.tcp_applied = guest.read_back()
    guest.has_host_fs = bool(share) and guest.exec("test -d /host/proc/self", check=False).returncode == 0
    if rw_dir is not None and guest.has_host_fs:
        guest.exec(f"mount -t virtiofs rundir {shlex.quote('/host' + rw_dir)}")
        guest.rw_dir = rw_dir
    guest.clock = guest.measure_clock()
    wanted = {k: v for k, v in tcp.model_dump().items() if v is not None and k != "congestion_params"}
    if "congestion_control" in wanted:
        wanted["congestion_control"] = guest_congestion_control(wanted["congestion_control"])
    bad = [f"{k} reads back {guest.tcp_applied.get(k)!r}, set {v!r}" for k, v in wanted.items()
           if k in guest.tcp_applied and guest.tcp_applied[k] != v]
    if bad:
        raise TestbedError(f"guest {host.name}: TCP settings not applied: " + "; ".join(bad))
    _guests(tb)[host.name] = guest
    write_guests(tb.state_dir, {name: g.describe() for name, g in _guests(tb).items()})
    return guest


def virtiofsd_path() -> str | None:
    """QEMU's virtiofsd (Debian: qemu-system-common), or None."""
    for path in (shutil.which("virtiofsd"), "/usr/lib/qemu/virtiofsd", "/usr/libexec/virtiofsd"):
        if path and os.access(path, os.X_OK):
            return path
    return None


def _share_host_fs(tb, host, memory_mib: int, rw_dir: str | None = None) -> list[str]:
    """Start virtiofsd serving ``/`` (tag ``hostroot``, mounted read-only at the guest's /host)
    and, with ``rw_dir``, a second one serving that directory writable (tag ``rundir``, mounted
    over its own path under /host: :func:`attach_guest`) for the guest of ``host``; return QEMU's
    arguments for them (the guest's ``memory_mib`` MiB of memory shared with the daemons, a
    vhost-user-fs device per share). No arguments where virtiofsd is missing (the guest then has
    no /host)."""
    daemon = virtiofsd_path()
    if daemon is None:
        return []
    shares = [("hostroot", "/", "cache=auto")]
    if rw_dir is not None:
        # cache=none: the guest sees at once what this machine writes there, and the reverse
        shares.append(("rundir", rw_dir, "cache=none"))
    args = ["-object", f"memory-backend-memfd,id=mem,size={memory_mib}M,share=on", "-numa", "node,memdev=mem"]
    for tag, source, cache in shares:
        sock = os.path.join(tb.state_dir, f"virtiofs-{host.name}-{tag}.sock")
        log_path = os.path.join(tb.state_dir, f"virtiofs-{host.name}-{tag}.log")
        with open(log_path, "wb") as log:   # the daemon keeps its own descriptor
            host.popen([daemon, f"--socket-path={sock}", "-o", f"source={source}", "-o", cache,
                        "-o", "sandbox=chroot"],
                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10.0
        while not os.path.exists(sock):
            if time.monotonic() > deadline:
                raise TestbedError(f"virtiofsd for the guest of {host.name} made no socket in 10 s: {_tail(log_path)}")
            time.sleep(0.05)
        args += ["-chardev", f"socket,id={tag},path={sock}", "-device", f"vhost-user-fs-pci,chardev={tag},tag={tag}"]
    return args


def _guests(tb) -> dict:
    """The guests of ``tb``, kept on it as ``tb.guests`` (the testbed itself knows nothing of them:
    each guest's QEMU is one of its processes)."""
    if not hasattr(tb, "guests"):
        tb.guests = {}
    return tb.guests


def guests_of(tb) -> dict:
    """The guests attached to testbed ``tb`` by host name."""
    return dict(_guests(tb))


def write_guests(state_dir: str, guests: dict) -> None:
    tmp = os.path.join(state_dir, GUESTS_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(guests, f, indent=1)
    os.rename(tmp, os.path.join(state_dir, GUESTS_FILE))


def read_guests(state_dir: str) -> dict:
    """A run's guests (``describe()`` of each, by host name); empty when it has none."""
    try:
        with open(os.path.join(state_dir, GUESTS_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _which(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise EnvironmentNotSupported(f"reference-kernel hosts need {name} (Debian: apt-get install qemu-system-x86)")
    return path


def _tail(path: str, n: int = 400) -> str:
    try:
        with open(path, errors="replace") as f:
            return " ".join(f.read()[-n:].split())
    except OSError:
        return ""


#: The sides ``--host-kernel-side`` takes and the hosts each names.
KERNEL_SIDES = ("left", "right", "both")


def guest_request(kernel: str, side: str = "left", accel: str = "tcg") -> dict:
    """What ``testbed up --host-kernel`` asks the supervisor for (validated here, plain data)."""
    rk.get_kernel(kernel)
    if side not in KERNEL_SIDES:
        raise ParameterError(f"host-kernel side {side!r} is unknown; allowed: {', '.join(KERNEL_SIDES)}")
    if accel not in ACCELERATORS:
        raise ParameterError(f"accelerator {accel!r} is unknown; allowed: {', '.join(ACCELERATORS)}")
    return {"kernel": kernel, "side": side, "accel": accel}


def attach_guests(tb, request: dict, *, rw_dir: str | None = None) -> dict[str, Guest]:
    """Guests for every host on ``request['side']`` (``left``, ``right`` or ``both``) of open
    testbed ``tb`` (see :func:`guest_request`), each given ``rw_dir`` (:func:`attach_guest`)."""
    req = guest_request(request["kernel"], request.get("side", "left"), request.get("accel", "tcg"))
    return {name: attach_guest(tb, name, req["kernel"], accel=req["accel"], rw_dir=rw_dir)
            for name in guest_hosts([(h.name, h.side) for h in tb.hosts.values()], req["side"])}


def guest_hosts(hosts, side: str) -> list[str]:
    """The names of ``hosts`` (``(name, side)`` pairs) that ``side`` makes guests."""
    sides = ("left", "right") if side == "both" else (side,)
    return [name for name, host_side in hosts if host_side in sides]


def unavailable_reason(kernel: str = "debian-6.1") -> str | None:
    """Why a reference-kernel guest cannot run here (one line), or ``None`` when it can: the
    testbed's needs, QEMU, iperf3, apt/dpkg, a package of ``kernel`` in the apt sources and a C
    compiler that links statically (the guest's clock server)."""
    reason = nsutil.unavailable_reason()
    if reason:
        return reason
    missing = [t for t in ("qemu-system-x86_64", "iperf3", "apt-get", "apt-cache", "dpkg-deb", "ldd", "cc")
               if shutil.which(t) is None] + ([] if virtiofsd_path() else ["virtiofsd"])
    if missing:
        return f"reference-kernel guests need {', '.join(missing)} (Debian: apt-get install qemu-system-x86 iperf3; virtiofsd comes with qemu-system-common)"
    try:
        rk.package_name(rk.get_kernel(kernel))
    except Exception as err:  # noqa: BLE001 - any failure is the reason, in one line
        return f"kernel {kernel} cannot be had: {err}"
    try:
        build_tdclock(rk.CACHE_DIR)   # the guest's clock server, static: needs libc's static archive
    except EnvironmentNotSupported as err:
        return str(err)
    return None

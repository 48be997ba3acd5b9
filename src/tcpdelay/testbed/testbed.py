"""The orchestrator: a :class:`Testbed` builds a :class:`TestbedSpec` and removes it again.

::

    with Testbed(TestbedSpec.dumbbell(link=LinkSpec.symmetric(delay_s=0.02))) as tb:
        server = tb.hosts["right0"]
        proc = server.popen(["python3", "-m", "http.server", "8000"])
        tb.hosts["left0"].run(["curl", f"http://{server.address}:8000/"])

Layout (addresses from one 10.N.0.0/16 per run, N unique among live runs):

- pair (one host per side): ``left0`` [TUN td<id>a 10.N.1.1] <-> tcpdelay-link <-> [TUN td<id>b
  10.N.2.1] ``right0``;
- dumbbell: left hosts 10.N.1.i --veth-- bridge 10.N.1.254 in router ``td-<id>-lr`` [TUN] <->
  tcpdelay-link <-> [TUN] router ``td-<id>-rr`` bridge 10.N.2.254 --veth-- right hosts 10.N.2.i.

Everything is removed on exit, on an exception, on SIGINT and on SIGTERM (turned into
``SystemExit`` while the testbed is open in the main thread). If the orchestrator is killed
outright, ``tcpdelay testbed clean`` removes the leftovers (:func:`tcpdelay.testbed.runs.clean`).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import pickle
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Callable, Sequence

from tcpdelay import timing
from tcpdelay.errors import TestbedError
from tcpdelay.testbed import netns as nsutil
from tcpdelay.testbed import runs
from tcpdelay.testbed import tcp_settings as tcps
from tcpdelay.testbed.emulator import BOTTLENECK, LinkProcess, access_link_name, find_binary, link_view, testbed_config
from tcpdelay.testbed.spec import HostSpec, TestbedSpec

#: The real-time priority (``SCHED_RR``) of the programs under measurement (:func:`become_realtime`);
#: the emulator's ``SCHED_FIFO`` priority is above it (``EMULATOR_PRIORITY``, emulator/src/main.rs).
REALTIME_PRIORITY = 10
EMULATOR_PRIORITY = 20


def become_realtime() -> bool:
    """Run the calling thread (and the threads it starts) ``SCHED_RR`` at ``REALTIME_PRIORITY``, just
    below the emulator's; False where the kernel refuses (the caller keeps its priority, as the
    emulator does).

    The testbed's hosts share this machine's cores with the emulator, which runs real time and is
    charged with the kernel's processing of the packets it writes into a namespace (it used to be
    2N + 1 processes, which with ~100 Mb/s through 40 access links and a bottleneck took the whole
    real-time share of the CPU, leaving programs of the normal class 5 %). A program under
    measurement (a media sender or receiver) calls this once it is set up — not before: twenty
    programs starting up in the real-time class would starve the testbed's own set-up.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(REALTIME_PRIORITY))
        return True
    except OSError:
        return False


PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:  # preexec_fn: runs in the child between fork and exec
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _interrupt_again(unraisable) -> None:
    """``sys.unraisablehook`` of a :meth:`Host.spawn` child. The run stops its programs with SIGINT
    (Ctrl-C's KeyboardInterrupt); one that lands in a callback which cannot raise (a weakref's
    callback, as ``importlib``'s module locks have, or a ``__del__``) is swallowed there and
    Python prints it as an ignored exception on the run's terminal, while the program goes on as
    if never asked to stop. Such an interrupt is delivered to the main thread again, a moment
    later (once this hook has returned, so it is not raised inside the hook), and not printed;
    every other unraisable exception is printed as Python would."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        # a real signal, to the main thread: it also ends a wait the thread is blocked in
        again = threading.Timer(0.01, signal.pthread_kill, args=(threading.main_thread().ident, signal.SIGINT))
        again.daemon = True
        again.start()
        return
    sys.__unraisablehook__(unraisable)


class RemoteError(TestbedError):
    """A function run by :meth:`Host.call` raised; the message carries its traceback."""


class CallHandle:
    """A function running in a forked child inside a host (see :meth:`Host.spawn`)."""

    def __init__(self, pid: int, fd: int, what: str):
        self.pid, self._fd, self._what = pid, fd, what
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._chunks: list[bytes] = []  # what arrived so far (kept across timed-out waits)
        self.wait_status: int | None = None

    def result(self, timeout_s: float | None = None) -> Any:
        """Wait for the function and return its value (or raise its exception)."""
        if not self._done:
            self._collect(timeout_s)
        if self._error is not None:
            raise self._error
        return self._value

    def _collect(self, timeout_s: float | None) -> None:
        import select

        chunks, deadline = self._chunks, None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd], [], [], wait)
            if not ready:
                raise TimeoutError(f"{self._what} did not finish within {timeout_s:g} s")
            chunk = os.read(self._fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(self._fd)
        _, status = os.waitpid(self.pid, 0)
        self._done = True
        self.wait_status = status
        data = b"".join(chunks)
        if not data or status != 0:
            self._error = RemoteError(f"{self._what} died without a result ({nsutil.describe_wait_status(status)})")
            return
        ok, payload = pickle.loads(data)
        if ok:
            self._value = payload
        else:
            self._error = RemoteError(f"{self._what} raised: {payload}")

    @property
    def done(self) -> bool:
        """Whether the result (or the error) has been collected."""
        return self._done

    def died(self) -> str | None:
        """How the process ended if it ended abnormally (killed by a signal, or a non-zero exit
        status: it never sent its result), without collecting it; ``None`` while it runs or
        when it exited normally. A function that raised exits normally (its error comes back
        through :meth:`result`)."""
        if self._done:
            return nsutil.describe_wait_status(self.wait_status) if self.wait_status else None
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        if info is None or (info.si_code == os.CLD_EXITED and info.si_status == 0):
            return None
        if info.si_code == os.CLD_EXITED:
            return f"exited with status {info.si_status}"
        return nsutil.describe_wait_status(-info.si_status)

    def kill(self) -> None:
        if not self._done:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.close(self._fd)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self._done = True
            self._error = RemoteError(f"{self._what} was killed")


class Host:
    """One host of a running testbed: a network namespace with one address."""

    def __init__(self, testbed: "Testbed", spec: HostSpec, netns: str, address: str, ifname: str):
        self._tb = testbed
        self.spec = spec
        self.name = spec.name
        self.side = spec.side
        self.netns = netns
        self.address = address
        self.ifname = ifname
        self.tcp_applied: dict = {}
        self.routes: list[str] = []

    def __repr__(self) -> str:
        return f"Host({self.name!r}, {self.side}, {self.address}, netns={self.netns!r})"

    # -- programs ---------------------------------------------------------------------------

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped to run in this host (``ip netns exec``)."""
        return ["ip", "netns", "exec", self.netns, *map(str, argv)]

    def popen(self, argv: Sequence[str], **kw) -> subprocess.Popen:
        """Start ``argv`` in this host. It is killed when the testbed closes (or its owner dies)."""
        kw.setdefault("preexec_fn", _die_with_parent)
        proc = subprocess.Popen(self.argv(argv), **kw)
        self._tb._procs.append(proc)
        self._tb._record_process(proc.pid)
        return proc

    def run(self, argv: Sequence[str], *, check: bool = True, timeout_s: float | None = 60.0,
            **kw) -> subprocess.CompletedProcess:
        """Run ``argv`` in this host to completion; output captured as text unless redirected."""
        if "stdout" not in kw and "stderr" not in kw:
            kw["capture_output"] = True
        kw.setdefault("text", True)
        proc = subprocess.run(self.argv(argv), timeout=timeout_s, **kw)
        if check and proc.returncode != 0:
            err = (proc.stderr or "").strip() if isinstance(proc.stderr, str) else ""
            raise TestbedError(f"{self.name}: {' '.join(map(str, argv))} exited {proc.returncode}: {err[-500:]}")
        return proc

    def spawn(self, fn: Callable, *args, niceness: int = 0, **kwargs) -> CallHandle:
        """Run ``fn(*args, **kwargs)`` in a forked child inside this host; don't wait.

        The result (and any exception) comes back pickled through a pipe. ``niceness`` (0-19,
        ``nice(2)``) lowers the child below the other programs of the normal class: for programs
        that only load the network (cross traffic); see :func:`become_realtime` for the programs
        under measurement.
        """
        if not 0 <= niceness <= 19:
            raise ValueError(f"niceness: {niceness} is outside 0-19")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            code = 0
            try:
                os.close(r)
                _die_with_parent()
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                nsutil.enter_for_good(self.netns)
                if niceness:
                    os.nice(niceness)
                sys.unraisablehook = _interrupt_again
                try:
                    out = (True, fn(*args, **kwargs))
                except BaseException as err:  # noqa: BLE001 - everything goes back to the parent
                    out = (False, f"{type(err).__name__}: {err}\n{traceback.format_exc()}")
                # Stopping already: a SIGINT from here on would only cut the result short.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                try:
                    data = pickle.dumps(out)
                except Exception as err:  # noqa: BLE001
                    data = pickle.dumps((False, f"result is not picklable: {err}"))
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        handle = CallHandle(pid, r, f"{getattr(fn, '__name__', 'function')} in {self.name}")
        self._tb._calls.append(handle)
        self._tb._record_process(pid)
        return handle

    def call(self, fn: Callable, *args, timeout_s: float | None = None, **kwargs) -> Any:
        """Run ``fn(*args, **kwargs)`` inside this host (forked child) and return its result."""
        return self.spawn(fn, *args, **kwargs).result(timeout_s)

    # -- in-process access ------------------------------------------------------------------

    def netns_entered(self):
        """Context manager: the calling thread is inside this host for the body."""
        return nsutil.entered(self.netns)

    def socket(self, family: int = socket.AF_INET, type: int = socket.SOCK_STREAM, proto: int = 0) -> socket.socket:
        """A socket that lives in this host (created with the thread briefly inside it)."""
        with nsutil.entered(self.netns):
            return socket.socket(family, type, proto)

    def sysctl(self, key: str) -> str:
        with nsutil.entered(self.netns):
            return nsutil.read_sysctl(key)


class Testbed:
    """Context manager that builds the hosts, the link and the emulator of ``spec``.

    ``start_link=False`` builds the namespaces, devices and settings without starting the
    emulator (packets then go nowhere); useful for checking settings.
    """

    __test__ = False

    def __init__(self, spec: TestbedSpec | None = None, *, start_link: bool = True,
                 ready_timeout_s: float = 15.0):
        self.spec = spec or TestbedSpec()
        self.start_link = start_link
        self.ready_timeout_s = ready_timeout_s
        self.run_id: str | None = None
        self.state_dir: str | None = None
        self.hosts: dict[str, Host] = {}
        self.routers: dict[str, str] = {}
        #: The one emulator process: the bottleneck and every access link.
        self.link: LinkProcess | None = None
        #: Its last counters, as it wrote them (the bottleneck's shape, or ``links`` by name).
        self.final_counters: dict | None = None
        #: Each access link's name in the emulator, by host name (hosts with ``access``).
        self.access_links: dict[str, str] = {}
        self._access_ends: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {}
        self.subnet: str | None = None
        self._procs: list[subprocess.Popen] = []
        self._calls: list[CallHandle] = []
        self._namespaces: list[str] = []
        self._processes: list[dict] = []
        self._old_sigterm = None
        self._owner_pid = os.getpid()
        self._pm_qos_fd: int | None = None
        #: Every congestion control this testbed runs, by choice (congestion.choice_key).
        self.congestion: dict[str, Any] = {}
        self._cc_loader = None
        self._closed = True

    # -- context manager --------------------------------------------------------------------

    def __enter__(self) -> "Testbed":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> "Testbed":
        nsutil.require_testbed_environment()
        binary = find_binary() if self.start_link else None  # fail before creating anything
        self._install_sigterm()
        self._owner_pid = os.getpid()
        self._closed = False
        self._hold_pm_qos()
        timing.drop_timer_slack()  # for this process and every program the testbed starts
        try:
            self._build(binary)
        except BaseException as err:
            self.close()
            if isinstance(err, nsutil.CommandFailed):
                raise TestbedError(str(err)) from None
            raise
        return self

    def _hold_pm_qos(self) -> None:
        """Ask the kernel for low wake-up latency while open (released when the fd closes)."""
        value = self.spec.cpu_dma_latency_us
        if value is None:
            return
        try:
            fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return  # not offered here: timing is then what the machine's idle policy gives
        os.write(fd, int(value).to_bytes(4, sys.byteorder))  # a native s32
        self._pm_qos_fd = fd

    # -- public queries ---------------------------------------------------------------------

    @property
    def left(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.side == "left"]

    @property
    def right(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.side == "right"]

    @property
    def emulator_pid(self) -> int | None:
        return self.link.pid if self.link else None

    def _emulator_counters(self) -> dict:
        """The emulator's counters now (SIGUSR1); after :meth:`close`, its last."""
        if self.link is None:
            if self.final_counters is not None:
                return self.final_counters
            raise TestbedError("the testbed has no running link emulator")
        try:
            return self.link.counters()
        except nsutil.CommandFailed as err:
            raise TestbedError(str(err)) from None

    def link_counters(self) -> dict:
        """The bottleneck's counters now (per direction ``a_to_b``/``b_to_a``; see docs/emulator.md)."""
        return link_view(self._emulator_counters(), BOTTLENECK) or {}

    def access_counters(self) -> dict[str, dict]:
        """Each access link's counters now, by host (``a_to_b`` = host -> router, ``b_to_a`` =
        router -> host), in the bottleneck's shape; after :meth:`close`, their last counters."""
        if not self.access_links or (self.link is None and self.final_counters is None):
            return {}
        counters = self._emulator_counters()
        views = {host: link_view(counters, name) for host, name in self.access_links.items()}
        return {host: v for host, v in views.items() if v is not None}

    def emulator_died(self) -> str | None:
        """How the link emulator ended if it ended on its own while the testbed is open (it
        should live until :meth:`close`), with the links it served, else ``None``."""
        how = self.link.died() if self.link else None
        if how and self.access_links:
            return f"{how} (it served the bottleneck and {len(self.access_links)} access links)"
        return how

    def emulator_cpu_s(self) -> float | None:
        return self.link.cpu_s() if self.link else None

    def describe(self) -> dict:
        cc = {"congestion_controls": [
            {"choice": key, "variant": a.variant, "kernel_name": a.kernel_name, "source": a.source,
             "params": a.params} for key, a in self.congestion.items()]} if self.congestion else {}
        return {
            "run_id": self.run_id,
            "topology": self.spec.topology,
            "subnet": self.subnet,
            "state_dir": self.state_dir,
            "emulator_pid": self.emulator_pid,
            "cpu_dma_latency_us": self.spec.cpu_dma_latency_us if self._pm_qos_fd is not None else None,
            "routers": self.routers,
            "hosts": {h.name: {"side": h.side, "netns": h.netns, "address": h.address,
                               "ifname": h.ifname, "tcp": h.tcp_applied} for h in self.hosts.values()},
            **({"access_links": {host: {"emulator_pid": self.emulator_pid, "link": name,
                                        "host_tun": self._access_ends[host][0][1],
                                        "router_tun": self._access_ends[host][1][1]}
                                 for host, name in self.access_links.items()}} if self.access_links else {}),
            **cc,
        }

    # -- building ---------------------------------------------------------------------------

    def _record_process(self, pid: int) -> None:
        """Note a process the run started in state.json, so that `clean` ends it even if it
        left the run's namespaces or outlived them."""
        self._processes.append(runs.process_record(pid))
        self._save_state()

    def _save_state(self) -> None:
        runs.write_state(self.run_id, {
            "run_id": self.run_id, **runs.owner_record(), "created_unix": self._created,
            "topology": self.spec.topology, "subnet": self.subnet, "namespaces": self._namespaces,
            "emulator_pid": self.emulator_pid, "processes": self._processes,
            "hosts": {h.name: {"side": h.side, "netns": h.netns, "address": h.address} for h in self.hosts.values()},
        })

    def _pick_subnet(self) -> int:
        used = set()
        for info in runs.find_runs().values():
            sub = (info.state or {}).get("subnet")
            if sub:
                with contextlib.suppress(ValueError, IndexError):
                    used.add(int(sub.split(".")[1]))
        free = [n for n in range(100, 255) if n not in used]
        if not free:
            raise TestbedError("no free 10.N.0.0/16 subnet for another run (155 runs are up); run `tcpdelay testbed clean`")
        return random.choice(free)

    def _add_ns(self, suffix: str) -> str:
        name = f"{runs.NETNS_PREFIX}{self.run_id}-{suffix}"
        self._namespaces.append(name)
        self._save_state()  # recorded before it exists: `clean` finds it either way
        nsutil.add_netns(name)
        with nsutil.entered(name):
            for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
                with contextlib.suppress(nsutil.CommandFailed, FileNotFoundError):
                    nsutil.write_sysctl(key, "1")  # no IPv6 chatter (DAD, MLD) through the link
        return name

    def _build(self, binary: str | None) -> None:
        self.run_id = runs.new_run_id()
        self.state_dir = runs.state_dir(self.run_id)
        self._created = time.time()
        self._save_state()  # owner recorded first: a concurrent `clean` leaves this run alone
        # what the testbed is made from, once: state.json is written again at every namespace
        # and process, and the spec made most of it (a 40-flow run spent 1.5 s of CPU on it)
        runs.write_state_file(self.run_id, runs.SPEC_FILE, self.spec.model_dump(mode="json"))
        n = self._pick_subnet()
        self.subnet = f"10.{n}.0.0/16"
        rid, spec = self.run_id, self.spec
        mtu, qlen = str(spec.mtu_bytes), str(spec.txqueuelen_packets)
        side_net = {"left": f"10.{n}.1", "right": f"10.{n}.2"}
        other = {"left": "right", "right": "left"}
        tun = {"left": f"td{rid}a", "right": f"td{rid}b"}

        self._load_congestion_controls()

        # Hosts and their sysctls first (the congestion-control method decides the routes).
        host_specs = {"left": [h for h in spec.hosts if h.side == "left"],
                      "right": [h for h in spec.hosts if h.side == "right"]}
        cc_via: dict[str, str | None] = {}
        for side in ("left", "right"):
            for i, hs in enumerate(host_specs[side]):
                ns = self._add_ns(hs.name)
                ifname = tun[side] if spec.topology == "pair" else f"td{rid}h{i}"
                self.hosts[hs.name] = Host(self, hs, ns, f"{side_net[side]}.{i + 1}", ifname)
                cc_via[hs.name] = tcps.apply_sysctls(ns, self.kernel_tcp(hs.tcp))

        tun_ns: dict[str, str] = {}
        if spec.topology == "pair":
            for side in ("left", "right"):
                h = self.hosts[host_specs[side][0].name]
                tun_ns[side] = h.netns
                self._host_tun(h, f"{side_net[other[side]]}.0/24", cc_via[h.name])
        else:
            for side in ("left", "right"):
                r = self._add_ns("lr" if side == "left" else "rr")
                self.routers[side] = r
                tun_ns[side] = r
                gw = f"{side_net[side]}.254"
                with nsutil.entered(r):
                    nsutil.write_sysctl("net.ipv4.ip_forward", "1")
                nsutil.ip_batch([
                    f"link add td{rid}br type bridge forward_delay 0 stp_state 0",
                    f"link set dev td{rid}br mtu {mtu} up",
                    f"addr add {gw}/24 dev td{rid}br",
                    f"tuntap add dev {tun[side]} mode tun",
                    f"link set dev {tun[side]} mtu {mtu} txqueuelen {qlen} up",
                    f"route add {side_net[other[side]]}.0/24 dev {tun[side]}",
                ], netns=r)
                for i, hs in enumerate(host_specs[side]):
                    h = self.hosts[hs.name]
                    if hs.access is not None:
                        self._access_tuns(r, h, side, i, f"{side_net[other[side]]}.0/24", cc_via[h.name])
                        continue
                    port = f"td{rid}p{i}"
                    nsutil.ip("link", "add", port, "netns", r, "mtu", mtu, "type", "veth",
                              "peer", "name", h.ifname, "netns", h.netns, "mtu", mtu)
                    nsutil.ip_batch([f"link set dev {port} master td{rid}br up"], netns=r)
                    dst = f"{side_net[other[side]]}.0/24"
                    metrics = tcps.route_metrics(self.kernel_tcp(hs.tcp), cc_via[h.name])
                    nsutil.ip_batch([
                        f"link set dev {h.ifname} up",
                        f"addr add {h.address}/24 dev {h.ifname}",
                        " ".join(["route add", dst, "via", gw, "dev", h.ifname, *metrics]),
                    ], netns=h.netns)
                    h.routes = [dst]

        for h in self.hosts.values():
            got = tcps.read_back(h.netns, h.routes)
            tcps.verify(h.name, self.kernel_tcp(h.spec.tcp), got)
            got["congestion_control_via"] = cc_via[h.name]
            h.tcp_applied = got
        self._save_state()

        if self.start_link:   # one process: the bottleneck and every access link
            cfg = testbed_config(spec, (tun_ns["left"], tun["left"]), (tun_ns["right"], tun["right"]),
                                 self._access_ends, self.state_dir)
            self.link = LinkProcess(cfg, self.state_dir, binary, self.ready_timeout_s, wait=False)
            self._record_process(self.link.pid)
            self.link.wait_ready()
            self.access_links = {host: access_link_name(host) for host in self._access_ends}

    def _host_tun(self, h: Host, dst: str, cc_via: str | None) -> None:
        """A TUN device in host ``h`` holding its address, and its route to ``dst`` (the other
        side) through it, with the host's route metrics (initcwnd, congestion control ...)."""
        mtu, qlen = str(self.spec.mtu_bytes), str(self.spec.txqueuelen_packets)
        metrics = tcps.route_metrics(self.kernel_tcp(h.spec.tcp), cc_via)
        nsutil.ip_batch([
            f"tuntap add dev {h.ifname} mode tun",
            f"link set dev {h.ifname} mtu {mtu} txqueuelen {qlen} up",
            f"addr add {h.address}/32 dev {h.ifname}",
            " ".join(["route add", dst, "dev", h.ifname, "src", h.address, *metrics]),
        ], netns=h.netns)
        h.routes = [dst]

    def _access_tuns(self, router: str, h: Host, side: str, i: int, dst: str, cc_via: str | None) -> None:
        """A host's access link: a TUN in the host (:meth:`_host_tun`) and one in its side's router
        (a route to the host), joined later by the emulator (a link of its own)."""
        self._host_tun(h, dst, cc_via)
        rtun = f"td{self.run_id}{side[0]}{i}"
        mtu, qlen = str(self.spec.mtu_bytes), str(self.spec.txqueuelen_packets)
        nsutil.ip_batch([
            f"tuntap add dev {rtun} mode tun",
            f"link set dev {rtun} mtu {mtu} txqueuelen {qlen} up",
            f"route add {h.address}/32 dev {rtun}",
        ], netns=router)
        self._access_ends[h.name] = ((h.netns, h.ifname), (router, rtun))

    # -- congestion controls ------------------------------------------------------------------

    def _load_congestion_controls(self) -> None:
        """Resolve every congestion control the hosts name (and ``spec.congestion_controls``)
        to what runs on this kernel, and load the BPF ones for the testbed's life: the kernel
        unregisters them when this process ends, however it ends (:mod:`tcpdelay.testbed.bpf_cc`)."""
        from tcpdelay.testbed import congestion

        choices = [(h.tcp.congestion_control, h.tcp.congestion_params) for h in self.spec.hosts
                   if h.tcp.congestion_control is not None]
        choices += [(name, None) for name in self.spec.congestion_controls]
        if not choices:
            return
        available = tcps.available_congestion_controls()
        loaded: set[str] = set()
        for name, params in choices:
            key = congestion.choice_key(name, params)
            if key in self.congestion:
                continue
            alg = congestion.resolve(name, params, available=available)
            if alg.source == "bpf" and alg.kernel_name not in loaded:
                if self._cc_loader is None:
                    from tcpdelay.testbed.bpf_cc import Loader

                    self._cc_loader = Loader().__enter__()
                try:
                    self._cc_loader.load(alg.bpf_object, alg.kernel_name, alg.values)
                except TestbedError as err:
                    if "registered already" not in str(err):
                        raise
                    # another testbed on this machine runs the same instance (a sweep with --jobs
                    # > 1): this one registers its own, named after the run
                    alg = dataclasses.replace(alg, kernel_name=congestion.run_instance_name(alg.kernel_name, self.run_id))
                    self._cc_loader.load(alg.bpf_object, alg.kernel_name, alg.values)
                loaded.add(alg.kernel_name)
            self.congestion[key] = alg

    def kernel_name(self, name: str, params: dict | None = None) -> str:
        """The name ``TCP_CONGESTION`` takes for congestion control ``name`` (with ``params``)
        on this testbed: the kernel's own, or the BPF instance loaded for it."""
        from tcpdelay.testbed import congestion

        alg = self.congestion.get(congestion.choice_key(name, params))
        if alg is None:
            alg = congestion.resolve(name, params, available=tcps.available_congestion_controls())
            if alg.source == "bpf":
                raise TestbedError(f"congestion control {congestion.choice_key(name, params)!r} is not "
                                   "loaded on this testbed (name it in a host's TCP settings or in congestion_controls)")
        return alg.kernel_name

    def state_map_id(self, name: str, params: dict | None = None) -> int | None:
        """The id of the ``tdcc_state`` map of the BPF instance running congestion control
        ``name`` here (what its connections publish), or None (a kernel algorithm)."""
        kernel = self.kernel_name(name, params)
        for cc in (self._cc_loader.loaded if self._cc_loader is not None else []):
            if cc.kernel_name == kernel:
                return cc.state_map_id
        return None

    def kernel_tcp(self, tcp):
        """``tcp`` with its congestion control as the kernel name that runs it (no parameters)."""
        if tcp.congestion_control is None:
            return tcp
        name = self.kernel_name(tcp.congestion_control, tcp.congestion_params)
        return tcp.model_copy(update={"congestion_control": name, "congestion_params": None})

    # -- teardown ---------------------------------------------------------------------------

    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            def on_term(signum, frame):
                raise SystemExit(128 + signum)
            self._old_sigterm = signal.signal(signal.SIGTERM, on_term)

    def close(self) -> None:
        """Remove everything this run created; safe to call twice. Signals wait until done."""
        if self._closed or os.getpid() != self._owner_pid:
            return  # a forked child leaving the `with` block must not tear down its parent's run
        main = threading.current_thread() is threading.main_thread()
        blocked = {signal.SIGINT, signal.SIGTERM}
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked) if main else None
        try:
            for handle in self._calls:
                handle.kill()
            procs = [p for p in self._procs if p.poll() is None]
            nsutil.terminate_pids([p.pid for p in procs], grace_s=1.0)
            for p in procs:
                with contextlib.suppress(Exception):
                    p.wait(0.5)
            if self.link is not None:
                with contextlib.suppress(Exception):
                    self.final_counters = self.link.stop()
                self.link = None
            if self.run_id is not None:
                runs.remove_run(self.run_id, list(self._namespaces))
            if self._cc_loader is not None:  # after the namespaces: no socket still uses them
                with contextlib.suppress(Exception):
                    self._cc_loader.__exit__(None, None, None)
                self._cc_loader = None
        finally:
            self._closed = True
            if self._old_sigterm is not None:
                signal.signal(signal.SIGTERM, self._old_sigterm)
                self._old_sigterm = None
            if self._pm_qos_fd is not None:
                os.close(self._pm_qos_fd)
                self._pm_qos_fd = None
            if old_mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)

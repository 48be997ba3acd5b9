"""Apply a host's :class:`~tcpdelay.testbed.spec.TcpSettings` in its namespace and read them back.

Namespaced sysctls carry most settings (``tcp_sack``, ``tcp_recovery``, ``tcp_early_retrans``,
``tcp_slow_start_after_idle``, ``tcp_no_metrics_save``, ``tcp_ecn``, ``tcp_rmem``/``tcp_wmem``).
Route attributes carry the initial windows (``initcwnd``/``initrwnd``, RFC 6928 §2) and, when the
namespace may not select the congestion control itself, ``congctl``: a namespace's
``tcp_congestion_control`` only accepts algorithms listed in the root namespace's
``tcp_allowed_congestion_control``. A route's ``congctl`` is applied when a connection is set up
(connect or accept), so a per-socket ``TCP_CONGESTION`` must then be set after connect() (see
:func:`tcpdelay.transport.tcp_state.set_congestion_control`).
"""

from __future__ import annotations

import platform
import re

from tcpdelay.errors import ParameterError
from tcpdelay.testbed import netns as nsutil
from tcpdelay.testbed.spec import TcpSettings


def available_congestion_controls() -> list[str]:
    """Algorithms the kernel offers (root namespace's ``tcp_available_congestion_control``)."""
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


def allowed_congestion_controls() -> list[str]:
    """Algorithms a namespace may make its default (root's ``tcp_allowed_congestion_control``)."""
    with open("/proc/sys/net/ipv4/tcp_allowed_congestion_control") as f:
        return f.read().split()


def check_congestion_control(name: str) -> None:
    avail = available_congestion_controls()
    if name not in avail:
        raise ParameterError(
            f"congestion_control {name!r} is not offered by this kernel; allowed: {', '.join(avail)}")


#: The first kernel whose SACK connections always detect losses with RACK (RFC 8985): Linux 6.17
#: removed the RFC 6675 (dupthresh) loss detection that ``tcp_recovery``'s bit 0 = 0 selected
#: (Neal Cardwell, "tcp: remove obsolete and unused RFC3517/RFC6675 loss recovery code",
#: net-next, June 2025). The bit is still writable and reads back as written, but "has no
#: effect" (Documentation/networking/ip-sysctl.rst); ``benchmarks/testbed_rack_off.py``
#: measures it. A connection without SACK uses NewReno's duplicate-ACK counting either way.
RACK_ALWAYS_ON_SINCE = (6, 17)


def rack_always_on(release: str | None = None) -> bool:
    """Whether the kernel (``release``, default this one's ``uname -r``) ignores ``rack = false``
    for SACK connections: true from Linux 6.17 (:data:`RACK_ALWAYS_ON_SINCE`)."""
    m = re.match(r"(\d+)\.(\d+)", release if release is not None else platform.release())
    if not m:
        raise ParameterError(f"kernel release {release!r} does not start with MAJOR.MINOR")
    return (int(m[1]), int(m[2])) >= RACK_ALWAYS_ON_SINCE


def _sysctl_writes(s: TcpSettings, current_recovery: int) -> list[tuple[str, str]]:
    w: list[tuple[str, str]] = []
    if s.sack is not None:
        w.append(("net.ipv4.tcp_sack", str(int(s.sack))))
    if s.rack is not None:
        w.append(("net.ipv4.tcp_recovery", str(current_recovery | 1 if s.rack else current_recovery & ~1)))
    if s.tlp is not None:
        w.append(("net.ipv4.tcp_early_retrans", "3" if s.tlp else "0"))
    if s.slow_start_after_idle is not None:
        w.append(("net.ipv4.tcp_slow_start_after_idle", str(int(s.slow_start_after_idle))))
    if s.no_metrics_save is not None:
        w.append(("net.ipv4.tcp_no_metrics_save", str(int(s.no_metrics_save))))
    if s.ecn is not None:
        w.append(("net.ipv4.tcp_ecn", str(s.ecn)))
    if s.rmem_bytes is not None:
        w.append(("net.ipv4.tcp_rmem", " ".join(map(str, s.rmem_bytes))))
    if s.wmem_bytes is not None:
        w.append(("net.ipv4.tcp_wmem", " ".join(map(str, s.wmem_bytes))))
    return w


def apply_sysctls(netns: str, s: TcpSettings) -> str | None:
    """Write the sysctl part of ``s`` in ``netns``.

    Returns how the congestion control must be applied: ``"sysctl"`` (done here), ``"route"``
    (the caller adds ``congctl`` to the host's routes), or ``None`` (not requested).
    """
    via = None
    if s.congestion_control is not None:
        check_congestion_control(s.congestion_control)
    with nsutil.entered(netns):
        recovery = int(nsutil.read_sysctl("net.ipv4.tcp_recovery"))
        for key, value in _sysctl_writes(s, recovery):
            nsutil.write_sysctl(key, value)
        if s.congestion_control is not None:
            via = "route"
            # Only try an allowed one: a refused write of a BPF algorithm's name leaks a kernel
            # reference to it (it could never be unloaded).
            if s.congestion_control in allowed_congestion_controls():
                try:
                    nsutil.write_sysctl("net.ipv4.tcp_congestion_control", s.congestion_control)
                    via = "sysctl"
                except nsutil.CommandFailed:
                    pass
    return via


def route_metrics(s: TcpSettings, cc_via: str | None) -> list[str]:
    """The ``ip route`` attributes for ``s`` (appended to each of the host's routes)."""
    out: list[str] = []
    if s.initcwnd_segments is not None:
        out += ["initcwnd", str(s.initcwnd_segments)]
    if s.initrwnd_segments is not None:
        out += ["initrwnd", str(s.initrwnd_segments)]
    if cc_via == "route":
        out += ["congctl", str(s.congestion_control)]
    return out


def read_back(netns: str, route_dsts: list[str]) -> dict:
    """The settings as the kernel reports them now in ``netns``.

    ``route_dsts``: the host's routes to the other side; each must carry the same metrics.
    """
    with nsutil.entered(netns):
        r = lambda k: nsutil.read_sysctl(k)  # noqa: E731
        recovery = int(r("net.ipv4.tcp_recovery"))
        got = {
            "sysctl_congestion_control": r("net.ipv4.tcp_congestion_control"),
            "sack": r("net.ipv4.tcp_sack") == "1",
            "rack": bool(recovery & 1),   # the sysctl as written; see rack_in_effect below
            "tlp": r("net.ipv4.tcp_early_retrans") != "0",
            "slow_start_after_idle": r("net.ipv4.tcp_slow_start_after_idle") == "1",
            "no_metrics_save": r("net.ipv4.tcp_no_metrics_save") == "1",
            "ecn": int(r("net.ipv4.tcp_ecn")),
            "rmem_bytes": tuple(int(x) for x in r("net.ipv4.tcp_rmem").split()),
            "wmem_bytes": tuple(int(x) for x in r("net.ipv4.tcp_wmem").split()),
        }
    # What SACK connections do: RACK also with the bit cleared from Linux 6.17 (rack_always_on).
    got["rack_in_effect"] = got["rack"] or (got["sack"] and rack_always_on())
    routes = {rt["dst"]: (rt.get("metrics") or [{}])[0] for rt in nsutil.ip("route", "show", netns=netns, json_out=True)}
    metrics = []
    for dst in route_dsts:
        if dst not in routes:
            raise nsutil.CommandFailed(f"{netns}: route to {dst} is missing")
        metrics.append(routes[dst])
    first = metrics[0] if metrics else {}
    if any(m != first for m in metrics):
        raise nsutil.CommandFailed(f"{netns}: routes {route_dsts} carry different metrics: {metrics}")
    got["route_congestion_control"] = first.get("congestion")
    got["initcwnd_segments"] = first.get("initcwnd")
    got["initrwnd_segments"] = first.get("initrwnd")
    # What a new connection over these routes uses.
    got["congestion_control"] = got["route_congestion_control"] or got["sysctl_congestion_control"]
    return got


def verify(host: str, wanted: TcpSettings, got: dict) -> None:
    """Raise unless every requested setting reads back as requested."""
    bad = []
    for field, want in wanted.model_dump().items():
        if want is None:
            continue
        have = got.get(field)
        if isinstance(want, (list, tuple)):
            want, have = tuple(want), tuple(have) if have is not None else None
        if have != want:
            bad.append(f"{field} reads back {have!r}, set {want!r}")
    if bad:
        raise nsutil.CommandFailed(f"host {host}: TCP settings not applied: " + "; ".join(bad))

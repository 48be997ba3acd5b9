"""The network namespace's TCP loss-recovery counters (``/proc/net/netstat``, ``/proc/net/snmp``).

``TCP_INFO`` counts a connection's retransmissions and RTOs but not how its losses were
repaired. Linux counts that per network namespace in its SNMP MIB (``include/uapi/linux/snmp.h``,
incremented in ``net/ipv4/tcp_input.c``, ``tcp_recovery.c``, ``tcp_timer.c``, ``tcp_output.c``):

- ``TCPLossProbes`` — tail loss probes sent (RFC 8985 §7, ``tcp_send_loss_probe``);
  ``TCPLossProbeRecovery`` — losses a probe repaired;
- ``TCPSackRecovery`` / ``TCPRenoRecovery`` — fast recoveries entered with / without SACK
  (``tcp_enter_recovery``);
- ``TCPTimeouts`` — retransmission timeouts (``tcp_retransmit_timer``), ``TCPLossUndo``,
  ``TCPSpuriousRTOs`` — undone recoveries and spurious RTOs;
- ``TCPFastRetrans``, ``TCPSlowStartRetrans``, ``TCPLostRetransmit`` — segments retransmitted in
  recovery, after an RTO, and retransmissions found lost again (RACK, ``tcp_rack_detect_loss``);
- ``TCPSACKReorder``, ``TCPDSACKRecv`` — reordering seen, duplicate SACKs received;
- ``RetransSegs`` (``Tcp:`` in ``/proc/net/snmp``) — segments retransmitted.

The counters are the namespace's, so they describe one connection only where the namespace holds
one (the testbed gives each media sender its own). :func:`tcp_counters` reads them from the
calling thread's namespace (``/proc/thread-self/net``: a thread may have entered one of its own);
:func:`counter_delta` subtracts two readings.
"""

from __future__ import annotations

from pathlib import Path

#: The counters kept (``TcpExt:`` fields of /proc/net/netstat, ``Tcp:`` of /proc/net/snmp).
TCPEXT_COUNTERS = (
    "TCPLossProbes", "TCPLossProbeRecovery", "TCPSackRecovery", "TCPRenoRecovery",
    "TCPTimeouts", "TCPLossUndo", "TCPSpuriousRTOs", "TCPFastRetrans", "TCPSlowStartRetrans",
    "TCPLostRetransmit", "TCPSACKReorder", "TCPDSACKRecv",
)
TCP_COUNTERS = ("RetransSegs",)


def _table(path: Path, prefix: str) -> dict[str, int]:
    """The ``prefix:`` header/value line pair of a /proc/net MIB file as a dict."""
    try:
        lines = [ln.split() for ln in path.read_text().splitlines()]
    except OSError:
        return {}
    rows = [ln for ln in lines if ln and ln[0] == prefix + ":"]
    if len(rows) < 2:
        return {}
    names, values = rows[0][1:], rows[1][1:]
    out = {}
    for n, v in zip(names, values):
        try:
            out[n] = int(v)
        except ValueError:
            continue
    return out


def tcp_counters(proc_net: str | Path = "/proc/thread-self/net") -> dict[str, int]:
    """The calling thread's namespace's recovery counters (names above; missing ones omitted,
    an empty dict where /proc is unreadable)."""
    base = Path(proc_net)
    ext = _table(base / "netstat", "TcpExt")
    tcp = _table(base / "snmp", "Tcp")
    out = {k: ext[k] for k in TCPEXT_COUNTERS if k in ext}
    out.update({k: tcp[k] for k in TCP_COUNTERS if k in tcp})
    return out


def counter_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """``after − before`` for every counter present in both."""
    return {k: after[k] - before[k] for k in after if k in before}

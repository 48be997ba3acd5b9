"""The native endpoint: the media flows' per-packet loop in ``tcpdelay-endpoint`` (Rust, a second
program of the emulator crate; docs/native-endpoint.md).

Python keeps each flow's control exchange (:mod:`tcpdelay.transport.control`: hello, accept, the
media connections opened, end, summary, abort) and its run.json; once a flow's media sockets are
connected they are handed (SCM_RIGHTS) to one ``tcpdelay-endpoint`` process of the group, which
sends the flow's precomputed schedule (:mod:`.rawrecords`) on time, reads, checks and records
what arrives, and answers each flow's result. :func:`supports` says which flows it serves.
"""

from __future__ import annotations


def supports(transport: str, connections: int, scheduler: str, proactive_drop_delay_s, delivery: str = "read") -> str | None:
    """None if the native endpoint serves a media flow of these settings, else why not (the
    flow then runs on the Python endpoints)."""
    if transport not in ("udp", "tcp"):
        return f"transport {transport} (tcp and udp only)"
    if connections > 1 and scheduler != "blind":
        return f"the {scheduler} scheduler over parallel connections (blind only)"
    if proactive_drop_delay_s is not None:
        return "proactive drop"
    if delivery != "read":
        return f"delivery {delivery!r} (read only)"
    return None

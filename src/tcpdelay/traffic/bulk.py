"""Bulk TCP cross traffic (FTP-like): one long download per flow, of a fixed size or unlimited.

The long-lived FTP flows of Brosh et al. §5.3 (unlimited, for the whole run) and the 28 MB
software-update download of the HSPA audio study ("Audio+Bulk", starting 10-12 s into the call) are both
:func:`client` calls against a :func:`server` on the sending side. The congestion control is
any the kernel offers (reno, cubic, bbr here), set on the server's socket for this response.
(A measured transfer that probes a path, for tests and benchmarks: :mod:`.bulk_transfer`.)
"""

from __future__ import annotations

import time

from tcpdelay.errors import ParameterError
from tcpdelay.start_gate import Instant, start_instant
from tcpdelay.traffic import response_server
from tcpdelay.traffic.response_server import MAX_WRITE_BYTES

#: The server of every TCP cross-traffic generator (see :mod:`.response_server`).
server = response_server.serve


def client(server_address: str, port: int, *, duration_s: float, size_bytes: int | None = None,
           congestion_control: str | None = None, start_at: Instant = None,
           drain_s: float = 5.0) -> dict:
    """Download ``size_bytes`` (``None``: unlimited) from ``server_address:port``, starting at
    ``start_at`` (a ``time.monotonic()`` instant, shared by every namespace of the machine;
    default now). A sized download is abandoned at ``start_at + duration_s``; an unlimited one
    is sent until then and read to its end (``drain_s`` later at the latest).

    Returns ``{"start_s" (the monotonic start), "bytes", "duration_s", "goodput_bps",
    "complete", "size_bytes", "congestion_control"}``; ``complete`` is true when a sized download
    finished (or an unlimited one ran its full duration).
    """
    if not duration_s > 0:
        raise ParameterError(f"duration_s: {duration_s} must be > 0")
    start = start_instant(start_at)   # a run's gate: ready, then its start (tcpdelay.start_gate)
    _sleep_until(start)
    end = start + duration_s
    # An unlimited download asks the server to send until ``end``; the client then reads what
    # is still queued on the path (a deep buffer drains for seconds), for ``drain_s`` at most.
    res = response_server.fetch(
        server_address, port, size_bytes=size_bytes,
        duration_s=None if size_bytes is not None else max(0.001, end - time.monotonic()),
        write_bytes=MAX_WRITE_BYTES, congestion_control=congestion_control,
        deadline=end if size_bytes is not None else end + drain_s)
    span = (res["done_s"] - res["first_byte_s"]) if res["first_byte_s"] is not None else 0.0
    return {"start_s": start, "bytes": res["bytes"], "duration_s": res["done_s"],
            "goodput_bps": res["bytes"] * 8 / span if span > 0 else 0.0,
            "complete": res["complete"], "size_bytes": size_bytes,
            "congestion_control": congestion_control, **({"error": res["error"]} if "error" in res else {})}


def _sleep_until(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))

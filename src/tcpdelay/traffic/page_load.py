"""Page loads of the HSPA audio study (interactive audio vs. concurrent TCP on a cellular access link) ("Audio+n"): n parallel short TCP connections, 372 kB in total.

"The n short TCP flows start at the same time. The start time is distributed uniformly between
10 to 12 seconds after the start of the audio flow. [...] one TCP flow, two TCP flows or six TCP
flows. The total size of the short TCP flows is 372 kB." The initial window (IW3 or IW10) is the
server host's route ``initcwnd`` (the testbed's per-host ``initcwnd_segments``); nothing here
sets it. The start instant is drawn by the caller (the run draws it from the run's seed) and
given as ``start_at``; :func:`draw_start` is that draw.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.start_gate import Instant, start_instant
from tcpdelay.traffic import response_server
from tcpdelay.traffic.response_server import MAX_WRITE_BYTES

server = response_server.serve

TOTAL_BYTES = 372_000


def draw_start(seed: int, start_s: float = 10.0, spread_s: float = 2.0) -> float:
    """Seconds after the media start: uniform on [start_s, start_s + spread_s]."""
    return float(start_s + np.random.default_rng(seed).uniform(0.0, spread_s))


def split_bytes(total_bytes: int, connections: int) -> list[int]:
    """``total_bytes`` over ``connections`` as evenly as whole bytes allow (the first ones get
    the remainder)."""
    if connections < 1 or total_bytes < connections:
        raise ParameterError(f"cannot split {total_bytes} bytes over {connections} connections "
                             "(need connections >= 1 and at least one byte each)")
    q, r = divmod(total_bytes, connections)
    return [q + (i < r) for i in range(connections)]


def client(server_address: str, port: int, *, connections: int = 1, total_bytes: int = TOTAL_BYTES,
           duration_s: float = 60.0, congestion_control: str | None = None,
           start_at: Instant = None) -> dict:
    """Open ``connections`` connections at once at ``start_at`` (``time.monotonic()`` instant,
    default now) and fetch ``total_bytes`` over them; give up at ``start_at + duration_s``.

    Returns ``{"start_s" (monotonic), "connections": [{"bytes", "size_bytes", "connect_s",
    "first_byte_s", "done_s", "complete"}...], "page_load_time_s" (last byte of the last
    connection, null if any did not finish), "bytes", "complete"}``.
    """
    sizes = split_bytes(total_bytes, connections)
    if not duration_s > 0:
        raise ParameterError(f"duration_s: {duration_s} must be > 0")
    start = start_instant(start_at)   # a run's gate: ready, then its start (tcpdelay.start_gate)
    while (left := start - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
    deadline = start + duration_s
    results: list[dict | None] = [None] * connections

    def one(i: int) -> None:
        t = time.monotonic()
        r = response_server.fetch(server_address, port, size_bytes=sizes[i], write_bytes=MAX_WRITE_BYTES,
                                  congestion_control=congestion_control, deadline=deadline)
        shift = t - start  # times relative to the common start
        for k in ("connect_s", "first_byte_s", "done_s"):
            if r[k] is not None:
                r[k] += shift
        results[i] = {**r, "size_bytes": sizes[i]}

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 5.0)
    conns = [r or {"bytes": 0, "size_bytes": sizes[i], "complete": False, "done_s": None}
             for i, r in enumerate(results)]
    complete = all(c["complete"] for c in conns)
    return {"start_s": start, "connections": conns, "bytes": sum(c["bytes"] for c in conns),
            "complete": complete,
            "page_load_time_s": max(c["done_s"] for c in conns) if complete else None}

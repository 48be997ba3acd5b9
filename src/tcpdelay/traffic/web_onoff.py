"""Web cross traffic, after Brosh et al. §5.3 (the SRI/ISI traffic generator setting).

Brosh et al. "used the SRI and ISI traffic generator to generate exponentially distributed web
traffic with a mean duration of 50 ms and a constant packet size of 512 bytes". The sentence
admits two readings, both offered (``mode``):

``"poisson"`` — how the SRI/ISI generator (tg) itself describes a flow: one TCP connection that
carries a message of constant length (512 bytes) at each arrival of a process whose
inter-arrival times are exponentially distributed (``arrival exponential 0.05 length constant
512`` in tg's terms), so 50 ms is the mean gap between packets: 81.9 kb/s offered per flow,
2 Mb/s for 25 flows on the paper's 3 Mb/s link. Messages that TCP cannot take yet wait in the
application (the socket buffer) and go when it can. Used by the §5.3 reproductions: it is the
reading under which Table 3's loss climbs steeply from 20 to 25 web flows.

``"connections"`` — request/response exchanges over short TCP connections: a web flow alternates

- an *on* period: a new TCP connection over which the server sends 512-byte segments as fast
  as TCP lets it for a duration drawn from an exponential distribution (mean ``on_mean_s``,
  50 ms), then closes; and
- an *off* period: idle for a duration drawn from an exponential distribution (mean
  ``off_mean_s``; the paper gives one mean, we use 50 ms for both by default),

until the flow's time is up. Each on period pays a handshake and slow start, so a flow offers
well under 100 kb/s (25 flows took 1–1.4 Mb/s of the 3 in our runs).

In both, the segment size is set by the client's advertised MSS
(``TCP_MAXSEG``), so every data segment carries at most ``packet_size_bytes`` of payload.
The server is the common :func:`tcpdelay.traffic.response_server.serve`.
"""

from __future__ import annotations

import time

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.start_gate import Instant, start_instant
from tcpdelay.traffic import response_server

server = response_server.serve


MODES = ("connections", "poisson")


def client(server_address: str, port: int, *, duration_s: float, on_mean_s: float = 0.05,
           off_mean_s: float = 0.05, packet_size_bytes: int = 512, seed: int = 1,
           congestion_control: str | None = None, start_at: Instant = None,
           mode: str = "connections", gap_mean_s: float = 0.05) -> dict:
    """One web flow from ``start_at`` (``time.monotonic()`` instant, default now) for
    ``duration_s``. Random draws come from ``numpy.random.default_rng(seed)``.

    ``mode="connections"`` uses ``on_mean_s``/``off_mean_s``; ``mode="poisson"`` uses
    ``gap_mean_s`` (mean time between 512-byte messages on one connection).

    Returns ``{"mode", "exchanges" (connections made), "bytes", "on_s" (the drawn on durations;
    connections mode), "off_s", "failed", "duration_s"}``.
    """
    if mode not in MODES:
        raise ParameterError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    for name, v in (("duration_s", duration_s), ("on_mean_s", on_mean_s), ("off_mean_s", off_mean_s),
                    ("gap_mean_s", gap_mean_s)):
        if not v > 0:
            raise ParameterError(f"{name}: {v} must be > 0")
    if mode == "poisson" and gap_mean_s < response_server.MIN_GAP_S:
        raise ParameterError(f"gap_mean_s: {gap_mean_s} must be >= {response_server.MIN_GAP_S}")
    if not 64 <= packet_size_bytes <= 1448:
        raise ParameterError(f"packet_size_bytes: {packet_size_bytes} must be in 64..1448")
    rng = np.random.default_rng(seed)
    start = start_instant(start_at)   # a run's gate: ready, then its start (tcpdelay.start_gate)
    while (left := start - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
    end = start + duration_s
    out = {"mode": mode, "exchanges": 0, "bytes": 0, "on_s": [], "off_s": [], "failed": 0}
    while mode == "poisson" and (left := end - time.monotonic()) > 0.01:
        # One connection for the whole flow; a new one only if it broke (the seed moves on so a
        # reconnection does not replay the same gaps).
        res = response_server.fetch(
            server_address, port, duration_s=left, write_bytes=packet_size_bytes,
            segment_bytes=packet_size_bytes, congestion_control=congestion_control, deadline=end + 1.0,
            gap_mean_s=gap_mean_s, seed=int(rng.integers(2**63)))
        out["exchanges"] += 1
        out["bytes"] += res["bytes"]
        out["failed"] += int("error" in res)
        if "error" in res:
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))
    while mode == "connections" and time.monotonic() < end:
        on = float(rng.exponential(on_mean_s))
        res = response_server.fetch(
            server_address, port, duration_s=max(on, 1e-6), write_bytes=packet_size_bytes,
            segment_bytes=packet_size_bytes, congestion_control=congestion_control, deadline=end)
        out["exchanges"] += 1
        out["bytes"] += res["bytes"]
        out["on_s"].append(on)
        out["failed"] += int("error" in res)
        off = float(rng.exponential(off_mean_s))
        out["off_s"].append(off)
        pause_end = min(end, time.monotonic() + off)
        while (left := pause_end - time.monotonic()) > 0:
            time.sleep(left)
    out["duration_s"] = time.monotonic() - start
    return out

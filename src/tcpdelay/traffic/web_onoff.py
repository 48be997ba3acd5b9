"""On/off web cross traffic, after Brosh et al. §5.3 (the SRI/ISI traffic generator setting).

Brosh et al. "used the SRI and ISI traffic generator to generate exponentially distributed web
traffic with a mean duration of 50 ms and a constant packet size of 512 bytes". Our reading,
as request/response exchanges over short TCP connections: a web flow alternates

- an *on* period: a new TCP connection over which the server sends 512-byte segments as fast
  as TCP lets it for a duration drawn from an exponential distribution (mean ``on_mean_s``,
  50 ms), then closes; and
- an *off* period: idle for a duration drawn from an exponential distribution (mean
  ``off_mean_s``; the paper gives one mean, we use 50 ms for both by default),

until the flow's time is up. The segment size is set by the client's advertised MSS
(``TCP_MAXSEG``), so every data segment carries at most ``packet_size_bytes`` of payload.
The server is the common :func:`tcpdelay.traffic.response_server.serve`.
"""

from __future__ import annotations

import time

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.traffic import response_server

server = response_server.serve


def client(server_address: str, port: int, *, duration_s: float, on_mean_s: float = 0.05,
           off_mean_s: float = 0.05, packet_size_bytes: int = 512, seed: int = 1,
           congestion_control: str | None = None, start_at: float | None = None) -> dict:
    """One web flow from ``start_at`` (``time.monotonic()`` instant, default now) for
    ``duration_s``. Durations are drawn from ``numpy.random.default_rng(seed)``.

    Returns ``{"exchanges", "bytes", "on_s" (the drawn on durations), "off_s", "failed",
    "duration_s"}``.
    """
    for name, v in (("duration_s", duration_s), ("on_mean_s", on_mean_s), ("off_mean_s", off_mean_s)):
        if not v > 0:
            raise ParameterError(f"{name}: {v} must be > 0")
    if not 64 <= packet_size_bytes <= 1448:
        raise ParameterError(f"packet_size_bytes: {packet_size_bytes} must be in 64..1448")
    rng = np.random.default_rng(seed)
    start = time.monotonic() if start_at is None else start_at
    while (left := start - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
    end = start + duration_s
    out = {"exchanges": 0, "bytes": 0, "on_s": [], "off_s": [], "failed": 0}
    while time.monotonic() < end:
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

"""Constant-rate UDP background traffic: a paced sender and a counting sink.

Each datagram carries ``packet_size_bytes`` of UDP payload (the rate counts payload, as iperf
does; add 28 bytes of IP and UDP header per packet for the rate on the wire), beginning with a
sequence number (u64) and the ``time.monotonic()`` send instant (f64), so the sink measures loss
and, on one machine (testbed namespaces share one clock), one-way delay.

The sender keeps an absolute schedule (packet ``i`` at ``start + i * size * 8 / rate``): a late
wake-up sends the packets that are due at once rather than drifting below the rate.
"""

from __future__ import annotations

import socket
import struct
import time

from tcpdelay.errors import ParameterError
from tcpdelay.start_gate import Deadline, Instant, start_instant

HEADER = struct.Struct("!Qd")
MAX_PAYLOAD_BYTES = 65_507


def send(dst: str, port: int, *, rate_bps: float, duration_s: float, packet_size_bytes: int = 1200,
         start_at: Instant = None) -> dict:
    """Send ``rate_bps`` of ``packet_size_bytes`` datagrams to ``dst:port`` from ``start_at``
    (``time.monotonic()`` instant, default now) for ``duration_s``.

    Returns ``{"packets", "bytes", "send_errors", "duration_s", "rate_bps" (achieved)}``.
    """
    if not rate_bps > 0:
        raise ParameterError(f"rate_bps: {rate_bps} must be > 0")
    if not duration_s > 0:
        raise ParameterError(f"duration_s: {duration_s} must be > 0")
    if not HEADER.size <= packet_size_bytes <= MAX_PAYLOAD_BYTES:
        raise ParameterError(f"packet_size_bytes: {packet_size_bytes} must be in {HEADER.size}..{MAX_PAYLOAD_BYTES}")
    interval = packet_size_bytes * 8 / rate_bps
    pad = b"\0" * (packet_size_bytes - HEADER.size)
    # Unconnected: an ICMP port-unreachable (a sink not bound yet) does not fail later sends.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    addr = (dst, port)
    start = start_instant(start_at)   # a run's gate: ready, then its start (tcpdelay.start_gate)
    end = start + duration_s
    seq = errors = 0
    try:
        while True:
            due = start + seq * interval
            if due >= end:
                break
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            try:
                s.sendto(HEADER.pack(seq, time.monotonic()) + pad, addr)
            except OSError:  # e.g. ENOBUFS: counted, and as lost
                errors += 1
            seq += 1
    finally:
        s.close()
    span = max(time.monotonic() - start, 1e-9)
    sent = seq - errors
    return {"packets": sent, "bytes": sent * packet_size_bytes, "send_errors": errors,
            "duration_s": span, "rate_bps": sent * packet_size_bytes * 8 / span}


def sink(port: int, *, duration_s: float, host: str = "0.0.0.0", ready=None,
         start_at: Instant = None) -> dict:
    """Count datagrams on ``host:port`` for ``duration_s`` from ``start_at`` (now; or a run's
    start, fixed later: :class:`tcpdelay.start_gate.Deadline`).

    Returns ``{"packets", "bytes", "highest_seq", "lost" (sequence numbers up to the highest
    never received), "duplicates", "reordered", "delay_mean_s", "delay_max_s"}``.
    """
    if not duration_s > 0:
        raise ParameterError(f"duration_s: {duration_s} must be > 0")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((host, port))
    if ready is not None:  # a threading.Event, set once bound
        ready.set()
    end = Deadline(start_at, duration_s)
    seen: set[int] = set()
    packets = nbytes = dup = reordered = 0
    highest = -1
    delay_sum, delay_max = 0.0, 0.0
    buf = bytearray(MAX_PAYLOAD_BYTES)
    try:
        while (left := end.value() - time.monotonic()) > 0:
            s.settimeout(min(left, 0.2))
            try:
                n = s.recv_into(buf)
            except socket.timeout:
                continue
            now = time.monotonic()
            if n < HEADER.size:
                continue
            seq, sent_at = HEADER.unpack_from(buf)
            if seq in seen:
                dup += 1
                continue
            seen.add(seq)
            packets += 1
            nbytes += n
            if seq < highest:
                reordered += 1
            highest = max(highest, seq)
            d = now - sent_at
            delay_sum += d
            delay_max = max(delay_max, d)
    finally:
        s.close()
    return {"packets": packets, "bytes": nbytes, "highest_seq": highest,
            "lost": (highest + 1) - packets, "duplicates": dup, "reordered": reordered,
            "delay_mean_s": delay_sum / packets if packets else None,
            "delay_max_s": delay_max if packets else None}

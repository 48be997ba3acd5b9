"""Request/response exchanges over TCP: the server and fetch of the TCP cross-traffic generators.

Bulk transfers (:mod:`.bulk`), on/off web flows (:mod:`.web_onoff`) and page loads
(:mod:`.page_load`) are all one shape: a client connects, sends a fixed-size request saying how
much it wants, and the server sends that much (or for that long) and closes. The data flows
server -> client, as a download does, so the server's host is the *sending* side: its congestion
control, initial window (route ``initcwnd``) and send buffer shape the cross traffic.

Request (network byte order, 54 bytes)::

    magic   4 bytes  b"TDX3"
    size    u64      bytes wanted; 0 = until the duration ends
    dur     f64      seconds to send for; 0 = until size is sent
    write   u16      bytes per send() call (the web generator's 512-byte packets)
    cc      16 bytes congestion control for the response, NUL-padded ("" = the host's default;
                     up to 15 characters, the kernel's TCP_CA_NAME_MAX of 16 with its NUL)
    gap     f64      0 = send as fast as TCP allows; > 0 = a *paced* response: one write at
                     each instant of a Poisson process with mean gap ``gap`` seconds (the
                     SRI/ISI traffic generator's "arrival exponential", see :mod:`.web_onoff`)
    seed    u64      seed of the paced response's gaps

Every response is bounded: by ``size``, by ``dur`` and by the server's deadline, whichever
comes first. A request with ``size`` 0 is *unlimited*: it is sent until its duration ends,
however fast the path. The server takes no cap of its own unless it is given one
(``max_response_bytes``); a cap that cuts a response short is counted (``capped_responses``),
named in the server's result (``max_response_bytes``, ``warnings``) and logged, and the client
sees the response as incomplete (it ended before its duration). A timed response (``dur``) is time on the
wire: the server keeps at most :data:`NOTSENT_WRITES` writes unsent in the kernel
(``TCP_NOTSENT_LOWAT``), so it does not fill a socket buffer ahead of what TCP can send and
then keep sending it after the duration ended. Segment sizes are set by the client: it
sets ``TCP_MAXSEG`` before connecting, so its SYN advertises that MSS and the server's segments
are no larger (how the web generator gets its small packets).

Both ends are plain functions returning JSON-able dicts, for
:meth:`tcpdelay.testbed.Host.spawn` (or loopback in tests).
"""

from __future__ import annotations

import errno
import logging
import math
import socket
import struct
import threading
import time
from typing import NamedTuple

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.start_gate import Deadline, Instant
from tcpdelay.transport import tcp_state

log = logging.getLogger(__name__)

MAGIC = b"TDX3"
REQUEST = struct.Struct("!4sQdH16sdQ")
assert REQUEST.size == 54
#: The longest congestion control name the kernel takes (TCP_CA_NAME_MAX - 1, include/net/tcp.h).
CC_NAME_MAX = 15
MAX_WRITE_BYTES = 65_535
MAX_CONNECTIONS = 1024
CHUNK_BYTES = 256 * 1024
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)
#: Writes a timed response may keep unsent in the kernel (TCP_NOTSENT_LOWAT).
NOTSENT_WRITES = 4
#: The smallest mean gap of a paced response (bounds the write rate a request can ask for).
MIN_GAP_S = 1e-4
#: Linux subtracts the 12-byte timestamp option from the advertised MSS (tcp_timestamps = 1).
TIMESTAMP_OPTION_BYTES = 12


class Request(NamedTuple):
    size_bytes: int | None
    duration_s: float | None
    write_bytes: int
    congestion_control: str | None
    gap_mean_s: float | None = None
    seed: int = 0


def encode_request(size_bytes: int | None, duration_s: float | None, write_bytes: int,
                   congestion_control: str | None = None, gap_mean_s: float | None = None,
                   seed: int = 0) -> bytes:
    if size_bytes is not None and size_bytes < 1:
        raise ParameterError(f"size_bytes: {size_bytes} must be >= 1 (or None for unlimited)")
    if duration_s is not None and not duration_s > 0:
        raise ParameterError(f"duration_s: {duration_s} must be > 0 (or None for unlimited)")
    if size_bytes is None and duration_s is None:
        raise ParameterError("a request needs size_bytes or duration_s: responses are bounded")
    if not 1 <= write_bytes <= MAX_WRITE_BYTES:
        raise ParameterError(f"write_bytes: {write_bytes} must be in 1..{MAX_WRITE_BYTES}")
    cc = (congestion_control or "").encode()
    if len(cc) > CC_NAME_MAX:
        raise ParameterError(f"congestion_control: {congestion_control!r} is longer than {CC_NAME_MAX} characters "
                             "(the kernel's limit)")
    if gap_mean_s is not None and not MIN_GAP_S <= gap_mean_s < 1e7:
        raise ParameterError(f"gap_mean_s: {gap_mean_s} must be >= {MIN_GAP_S} (or None for as fast as TCP allows)")
    if not 0 <= seed < 2**64:
        raise ParameterError(f"seed: {seed} must be in 0..2**64-1")
    return REQUEST.pack(MAGIC, size_bytes or 0, duration_s or 0.0, write_bytes, cc, gap_mean_s or 0.0, seed)


def decode_request(data: bytes) -> Request:
    """The :class:`Request` in ``data``; ValueError if malformed."""
    if len(data) != REQUEST.size:
        raise ValueError(f"request of {len(data)} bytes, expected {REQUEST.size}")
    magic, size, dur, write, cc, gap, seed = REQUEST.unpack(data)
    if magic != MAGIC:
        raise ValueError("bad magic")
    if not (0 <= dur < 1e7) or not 1 <= write <= MAX_WRITE_BYTES:
        raise ValueError("bad duration or write size")
    if not (gap == 0 or MIN_GAP_S <= gap < 1e7):
        raise ValueError("bad gap")
    name = cc.rstrip(b"\0").decode("ascii", "replace") or None
    return Request(size or None, dur or None, write, name, gap or None, seed)


def response_limit(size_bytes: int | None, max_response_bytes: int | None) -> float:
    """The bytes a response may send: its ``size_bytes`` (``None``: unlimited, ``inf``), no more
    than the server's ``max_response_bytes`` (``None``: no cap)."""
    limit = math.inf if size_bytes is None else size_bytes
    return limit if max_response_bytes is None else min(limit, max_response_bytes)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def _paced(conn: socket.socket, payload: memoryview, write: int, limit: int, stop: float,
           gap_mean_s: float, seed: int) -> int:
    """A paced response: one ``write``-byte message at each arrival of a Poisson process (gaps
    exponential with mean ``gap_mean_s``, from ``numpy.random.default_rng(seed)``) until
    ``stop``. Arrivals follow their own schedule: while TCP cannot take a message (the socket
    buffer is full), the ones due meanwhile wait in the application and go as soon as it can.
    Returns the bytes sent."""
    rng = np.random.default_rng(seed)
    sent, due, pending = 0, time.monotonic() + float(rng.exponential(gap_mean_s)), 0
    while sent < limit:
        now = time.monotonic()
        while due <= now and due < stop:
            pending += write
            due += float(rng.exponential(gap_mean_s))
        if pending == 0:
            if due >= stop:
                break
            time.sleep(min(due, stop) - now)
            continue
        if now >= stop:
            break
        try:
            n = conn.send(payload[: min(pending, limit - sent, len(payload))])
        except (socket.timeout, BlockingIOError):
            continue
        sent += n
        pending -= n
    return sent


def _accept_waiting(srv: socket.socket) -> list[socket.socket]:
    """Every connection already waiting in ``srv``'s accept queue, taken without blocking: the
    server empties the queue at each wake-up. A connection still in the queue at the deadline is
    reset when the listening socket closes (the client's "Connection reset by peer" for a flow
    never served); beside two busy loops the niced server's CPU share, not this loop, decides how
    soon a burst of a hundred is served (first bytes after 0.6-1.4 s either way)."""
    waiting: list[socket.socket] = []
    timeout = srv.gettimeout()
    srv.setblocking(False)
    try:
        while True:
            try:
                waiting.append(srv.accept()[0])
            except (BlockingIOError, InterruptedError):
                return waiting
    finally:
        srv.settimeout(timeout)


def serve(port: int, *, duration_s: float, host: str = "0.0.0.0", max_response_bytes: int | None = None,
          sndbuf_bytes: int | None = None, ready: threading.Event | None = None,
          tcp_state_dir: str | None = None, tcp_state_period_s: float = 0.0,
          flow_ids: dict[str, int] | None = None, start_at: Instant = None) -> dict:
    """Answer requests on ``host:port`` for ``duration_s`` seconds from ``start_at`` (now; or a
    run's start, fixed later: :class:`tcpdelay.start_gate.Deadline`), then close everything.

    ``max_response_bytes`` (default ``None``: no cap) bounds every response, the unlimited ones
    too; a response it cuts short is counted in ``capped_responses`` and warned about.

    TCP state over time: with ``tcp_state_dir`` and ``tcp_state_period_s`` > 0 the accepting
    loop samples every response connection's ``TCP_INFO`` at that period into ``tcp_state``
    records there (:mod:`tcpdelay.transport.tcp_state_sampler`; one loop for all connections,
    no thread of its own). A record's ``flow_id`` is ``flow_ids[client address]`` (-1 when the
    client is not in it) and its ``connection`` the server's count of the connection (0, 1, ...).

    Returns ``{"connections", "bytes_sent", "responses_completed", "rejected", "mss_bytes"
    (the distinct send MSS seen), "congestion_controls", "max_response_bytes",
    "capped_responses", "warnings", "errors"}``.
    """
    if not duration_s > 0:
        raise ParameterError(f"duration_s: {duration_s} must be > 0")
    if max_response_bytes is not None and not (isinstance(max_response_bytes, int) and max_response_bytes >= 1):
        raise ParameterError(f"max_response_bytes: {max_response_bytes!r} must be an integer >= 1 (or None: no cap)")
    end = Deadline(start_at, duration_s)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if sndbuf_bytes:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf_bytes)
    srv.bind((host, port))
    srv.listen(256)
    srv.settimeout(0.1)
    if ready is not None:
        ready.set()
    lock = threading.Lock()
    stats = {"connections": 0, "bytes_sent": 0, "responses_completed": 0, "rejected": 0,
             "mss_bytes": set(), "congestion_controls": set(), "max_response_bytes": max_response_bytes,
             "capped_responses": 0, "warnings": [], "errors": []}
    threads: list[threading.Thread] = []
    payload = memoryview(b"\x5a" * CHUNK_BYTES)
    live: dict[int, tuple[int, int, socket.socket]] = {}    # sampled: connection -> (flow, conn, sock)
    sampler = state_writer = None
    if tcp_state_dir is not None and tcp_state_period_s > 0:
        from tcpdelay.records import RecordWriter
        from tcpdelay.transport.tcp_state_sampler import TcpStateSampler

        state_writer = RecordWriter(tcp_state_dir, "tcp_state", writer_id=f"server-{host}-{port}")
        sampler = TcpStateSampler(state_writer, tcp_state_period_s)
        srv.settimeout(min(0.1, tcp_state_period_s))

    def respond(conn: socket.socket, index: int = -1) -> None:
        sent, complete, limit = 0, False, None
        try:
            if sampler is not None:
                peer = conn.getpeername()[0]
                with lock:
                    live[index] = ((flow_ids or {}).get(peer, -1), index, conn)
            conn.settimeout(max(0.01, min(5.0, end.value() - time.monotonic())))
            try:
                size, dur, write, cc, gap, seed = decode_request(_recv_exact(conn, REQUEST.size))
            except (ValueError, OSError):
                with lock:
                    stats["rejected"] += 1
                return
            if cc:
                tcp_state.set_congestion_control(conn, cc)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if dur and not gap:
                # A timed response means time on the wire: keep at most a few writes unsent in
                # the kernel, so sending stops close to when the duration ends (not a socket
                # buffer later).
                conn.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, NOTSENT_WRITES * write)
            limit = response_limit(size, max_response_bytes)
            stop = min(end.value(), time.monotonic() + dur) if dur else end.value()
            conn.settimeout(0.05)  # bounded sends: the deadline is checked between them
            if gap:
                sent = _paced(conn, payload, write, limit, stop, gap, seed)
            while sent < limit and not gap:
                if time.monotonic() >= stop:
                    break
                try:
                    sent += conn.send(payload[: min(write, limit - sent)])
                except (socket.timeout, BlockingIOError):
                    continue
            complete = sent >= limit or (dur is not None and time.monotonic() >= stop and stop < end.value())
            if max_response_bytes is not None and sent >= max_response_bytes and (size is None or size > max_response_bytes):
                complete = False  # the server's cap, not the request, ended it
                note = (f"a response was cut at the server's cap of {max_response_bytes} bytes "
                        f"(max_response_bytes) before its {'size' if size else 'duration'} ended")
                log.warning(note)
                with lock:
                    stats["capped_responses"] += 1
                    if note not in stats["warnings"]:
                        stats["warnings"].append(note)
            mss = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
            with lock:
                stats["mss_bytes"].add(mss)
                stats["congestion_controls"].add(tcp_state.congestion_control(conn))
            conn.shutdown(socket.SHUT_WR)
            # Wait (bounded) for the client to read everything and close.
            conn.settimeout(max(0.01, min(2.0, end.value() - time.monotonic())))
            while conn.recv(4096):
                pass
        except (OSError, ParameterError) as err:
            if not isinstance(err, OSError) or err.errno not in (errno.EPIPE, errno.ECONNRESET, None):
                with lock:
                    if len(stats["errors"]) < 20:
                        stats["errors"].append(f"{type(err).__name__}: {err}")
        finally:
            with lock:              # out of the sampled set before its fd can be reused
                live.pop(index, None)
            conn.close()
            with lock:
                stats["bytes_sent"] += sent
                stats["responses_completed"] += int(complete)

    try:
        while time.monotonic() < end.value():
            if sampler is not None and (now := time.monotonic_ns()) >= sampler.due_ns():
                with lock:
                    sampler.sample(list(live.values()), now)
                srv.settimeout(max(0.0005, min(0.1, (sampler.due_ns() - time.monotonic_ns()) / 1e9)))
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            threads = [t for t in threads if t.is_alive()]
            for conn in [conn, *_accept_waiting(srv)]:
                if len(threads) >= MAX_CONNECTIONS:
                    conn.close()
                    stats["rejected"] += 1
                    continue
                t = threading.Thread(target=respond, args=(conn, stats["connections"]), daemon=True)
                stats["connections"] += 1
                t.start()
                threads.append(t)
    finally:
        srv.close()
        for t in threads:
            t.join(timeout=max(0.0, end.value() - time.monotonic()) + 3.0)
        if state_writer is not None:
            state_writer.close()
    stats["mss_bytes"] = sorted(stats["mss_bytes"])
    stats["congestion_controls"] = sorted(stats["congestion_controls"])
    return stats


def connect(server: str, port: int, *, deadline: float, segment_bytes: int | None = None,
            rcvbuf_bytes: int | None = None, window_clamp_bytes: int | None = None) -> socket.socket:
    """Connect, retrying while the server is not listening yet, until ``deadline`` (monotonic).
    ``segment_bytes`` caps the payload of the segments the server sends (``TCP_MAXSEG``);
    ``window_clamp_bytes`` the window this end advertises (``TCP_WINDOW_CLAMP``, set before the
    SYN so its window respects it too)."""
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if segment_bytes:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, segment_bytes + TIMESTAMP_OPTION_BYTES)
        if window_clamp_bytes:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, window_clamp_bytes)
        if rcvbuf_bytes:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            s.connect((server, port))
            return s
        except OSError as err:
            s.close()
            retry = err.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)
            if not retry or time.monotonic() + 0.02 >= deadline:
                raise
            time.sleep(0.02)


def fetch(server: str, port: int, *, size_bytes: int | None = None, duration_s: float | None = None,
          write_bytes: int = MAX_WRITE_BYTES, congestion_control: str | None = None,
          segment_bytes: int | None = None, deadline: float | None = None,
          gap_mean_s: float | None = None, seed: int = 0) -> dict:
    """One exchange: connect, request, read until the server closes (or ``deadline``, a
    ``time.monotonic()`` instant). Times are seconds from the call. ``gap_mean_s`` asks for a
    paced response (see the request format).

    Returns ``{"bytes", "connect_s", "first_byte_s", "done_s", "complete"}``; ``complete`` is
    false when the deadline cut the response short, the connection failed, or a timed response
    ended before its ``duration_s`` (e.g. at a server's ``max_response_bytes``).
    """
    t0 = time.monotonic()
    if deadline is None:
        deadline = t0 + (duration_s or 0) + 60.0
    request = encode_request(size_bytes, duration_s, write_bytes, congestion_control, gap_mean_s, seed)
    out = {"bytes": 0, "connect_s": None, "first_byte_s": None, "done_s": None, "complete": False}
    try:
        s = connect(server, port, deadline=deadline, segment_bytes=segment_bytes)
    except OSError as err:
        out["error"] = f"connect: {err}"
        return out
    out["connect_s"] = time.monotonic() - t0
    buf = bytearray(CHUNK_BYTES)
    view = memoryview(buf)
    try:
        t_request = time.monotonic()
        s.sendall(request)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            n = s.recv_into(view)
            if n == 0:
                # A timed response ends when its duration has passed on the server, which began
                # counting after the request left here: one that ends sooner was cut short.
                out["complete"] = (out["bytes"] >= size_bytes if size_bytes is not None
                                   else time.monotonic() - t_request >= duration_s)
                break
            if out["first_byte_s"] is None:
                out["first_byte_s"] = time.monotonic() - t0
            out["bytes"] += n
    except socket.timeout:
        pass
    except OSError as err:
        out["error"] = str(err)
    finally:
        s.close()
    out["done_s"] = time.monotonic() - t0
    return out

"""A video player that pulls an MP4 file over HTTP as papers/003 describes its client (Watanabe,
Kumazoe, Cavendish, Nobayashi, Ikenaga and Oie, *Performance Characterization of Streaming
Video over TCP Variants*, INTERNET 2013, Sec. III), and logs when each frame arrives.

- One HTTP/1.1 GET of the whole file over one TCP connection.
- "At the client application layer, a video player extracts data from TCP receiver buffer into a
  playout buffer" of ``playout_buffer_bytes`` (the paper's 656 kB): the player reads from the
  socket only while the playout buffer has room, so the rest waits in TCP's receive buffer (up
  to the host's ``tcp_rmem`` maximum: 256 MB in the paper), and TCP's flow control is what a
  full receive buffer does to the sender. "Playout buffer overflow does not occur, since the
  player will not pull more data into the playout buffer than it can handle."
- Playback starts when the playout buffer is first full (or the whole file has arrived), at
  ``start``; frame ``k`` is due at ``start + shift + pts_k - pts_min`` and leaves the buffer then
  ("extracted by the video playout client at the video nominal playout rate"), shown if it has
  arrived, skipped if not while later frames have. When nothing due then or later has arrived
  the picture freezes, and ``catch_up`` says what follows (:mod:`tcpdelay.metrics.playout` reads
  the log by the same rules): ``rebuffer`` waits until the frames arrived and not shown hold
  ``rebuffer_bytes`` (default half the playout buffer) or all that is left has arrived, then goes
  on, ``shift`` grown by the freeze; ``skip`` never moves the clock and skips what is late.
- A frame *arrives* when its last byte enters the playout buffer. The bytes before the first
  frame (the MP4 header: ftyp, moov) leave the buffer when playback starts.

The log (records of kind ``playout``, :data:`tcpdelay.records.PLAYOUT_SCHEMA`) holds each frame's
arrival as it happens, the playback start, and the frames that never arrived; discards and
underflows are computed from it afterwards (:mod:`tcpdelay.metrics.playout`). Times are
``time.monotonic()`` seconds (the run's clock).
"""

from __future__ import annotations

import select
import socket
import time
from dataclasses import dataclass

import numpy as np

from tcpdelay.errors import ParameterError

#: papers/003 Sec. V: "playout buffer size: 656Kbytes".
PLAYOUT_BUFFER_BYTES = 656_000
RECV_CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True)
class PlayerFrames:
    """What the player needs of the file, per video frame in decode (file) order."""

    pts_s: np.ndarray
    """Presentation time from the stream's start (s)."""
    size_bytes: np.ndarray
    end_bytes: np.ndarray
    """Offset in the file just past the frame's last byte (frames are whole once this many
    bytes of the file have arrived)."""

    def __post_init__(self):
        n = len(self.pts_s)
        if not (len(self.size_bytes) == len(self.end_bytes) == n) or n == 0:
            raise ParameterError("player frames: pts_s, size_bytes and end_bytes must be non-empty and of one length")
        if np.any(np.diff(self.end_bytes) <= 0):
            raise ParameterError("player frames: end_bytes must increase (frames in file order)")


@dataclass
class PullResult:
    """What one pull did (seconds on the run's clock)."""

    status: int
    content_length_bytes: int | None
    body_bytes: int
    connect_s: float
    first_byte_s: float | None
    start_s: float | None
    """Playback start (the playout buffer first full, or the whole file in)."""
    end_s: float
    frames_arrived: int
    frames: int
    complete: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _request(host: str, port: int, path: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: tcpdelay-player\r\n"
            "Accept: */*\r\nConnection: close\r\n\r\n").encode()


def _read_head(sock: socket.socket, deadline: float) -> tuple[int, int | None, bytes]:
    """Read the response head; (status, Content-Length or None, the body bytes read with it)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no HTTP response head in time")
        sock.settimeout(left)
        chunk = sock.recv(8192)
        if not chunk:
            raise ConnectionError("the server closed before a response head")
        buf += chunk
        if len(buf) > 65536:
            raise ConnectionError("HTTP response head over 64 kB")
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP response: {lines[0]!r}")
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length" and value.strip().isdigit():
            length = int(value.strip())
    return int(parts[1]), length, body


def pull(host: str, port: int, path: str, frames: PlayerFrames, writer=None, *, flow_id: int = 0,
         playout_buffer_bytes: int = PLAYOUT_BUFFER_BYTES, stop_at_s: float | None = None,
         connect_timeout_s: float = 10.0, catch_up: str = "rebuffer", rebuffer_bytes: int | None = None) -> PullResult:
    """GET ``http://host:port/path`` and play it out as the module doc says; log into ``writer``
    (a :class:`tcpdelay.records.RecordWriter` of kind ``playout``, or None). Stops when every
    frame is due, or at ``stop_at_s`` (monotonic seconds), whichever is first."""
    if playout_buffer_bytes < 1:
        raise ParameterError(f"playout_buffer_bytes: {playout_buffer_bytes!r} must be >= 1")
    if catch_up not in ("rebuffer", "skip"):
        raise ParameterError(f"catch_up: {catch_up!r} is not one of rebuffer, skip")
    biggest = int(np.max(frames.size_bytes))
    if rebuffer_bytes is None:
        rebuffer_bytes = playout_buffer_bytes // 2
    if not 0 < rebuffer_bytes <= playout_buffer_bytes - biggest:
        # a partly arrived frame also takes room: the refill must fit beside the largest one
        raise ParameterError(f"rebuffer_bytes: {rebuffer_bytes!r} must be in (0, playout_buffer_bytes - "
                             f"the largest frame = {playout_buffer_bytes - biggest}]")
    pts = np.asarray(frames.pts_s, dtype=float)
    due_rel = pts - pts.min()
    order = np.argsort(due_rel, kind="stable")      # frames by deadline (display order)
    size = np.asarray(frames.size_bytes, dtype=np.int64)
    end = np.asarray(frames.end_bytes, dtype=np.int64)
    header_bytes = int(end[0] - size[0])
    n = len(pts)
    arrival = np.full(n, np.nan)
    position = np.empty(n, np.int64)          # each frame's place in display order
    position[order] = np.arange(n)

    t_connect = time.monotonic()
    sock = socket.create_connection((host, port), timeout=connect_timeout_s)
    try:
        sock.sendall(_request(host, port, path))
        status, length, body = _read_head(sock, t_connect + connect_timeout_s)
        if status != 200:
            raise ConnectionError(f"HTTP {status} for {path}")
        first_byte = time.monotonic()
        sock.setblocking(False)
        received = 0            # body bytes read into the playout buffer
        consumed = 0            # bytes that left it (played or skipped frames, the header)
        next_frame = 0          # frames arrived so far (file order)
        next_due = 0            # index into order: the next frame to fall due
        start = None
        eof = False
        rows: list[tuple] = []
        shift = 0.0             # how far the schedule moved (rebuffering)
        frozen_at = None        # the deadline the picture froze at
        arrived_before = 0      # frames arrived whose display place is before next_due
        waiting = 0             # bytes of frames arrived and not yet due

        def take(data_len: int, now: float) -> None:
            nonlocal received, next_frame, arrived_before, waiting
            received += data_len
            while next_frame < n and end[next_frame] <= received:
                arrival[next_frame] = now
                rows.append((flow_id, "arrival", next_frame, float(pts[next_frame]), int(size[next_frame]),
                             int(end[next_frame]), now))
                if position[next_frame] < next_due:
                    arrived_before += 1
                else:
                    waiting += int(size[next_frame])
                next_frame += 1

        if body:
            take(len(body), first_byte)
        while True:
            now = time.monotonic()
            if start is None and (received - consumed >= playout_buffer_bytes or eof):
                start = now
                consumed += header_bytes
                rows.append((flow_id, "start", -1, float("nan"), 0, 0, start))
            if start is not None:
                if frozen_at is not None and (waiting >= rebuffer_bytes or next_frame == n):
                    shift += now - frozen_at          # rebuffered: go on from where it froze
                    frozen_at = None
                while frozen_at is None and next_due < n and start + shift + due_rel[order[next_due]] <= now:
                    f = order[next_due]
                    if (np.isnan(arrival[f]) and next_frame - arrived_before == 0 and catch_up == "rebuffer"
                            and not (eof and next_frame == n)):
                        frozen_at = start + shift + due_rel[f]     # nothing due now or later is in
                        break
                    consumed += int(size[f])
                    if not np.isnan(arrival[f]):
                        arrived_before += 1
                        waiting -= int(size[f])
                    next_due += 1
                if next_due >= n:
                    break
            if stop_at_s is not None and now >= stop_at_s:
                break
            if rows and writer is not None:
                writer.extend(rows)
            rows.clear()
            room = playout_buffer_bytes - (received - consumed)
            wake = stop_at_s
            if start is not None and frozen_at is None:
                t_due = start + shift + due_rel[order[next_due]]
                wake = t_due if wake is None else min(wake, t_due)
            timeout = None if wake is None else max(0.0, wake - now)
            if eof or room <= 0:
                time.sleep(min(timeout, 0.05) if timeout is not None else 0.05)
                continue
            ready, _, _ = select.select([sock], [], [], timeout if timeout is not None else 0.05)
            if not ready:
                continue
            try:
                data = sock.recv(min(room, RECV_CHUNK_BYTES))
            except BlockingIOError:
                continue
            if not data:
                eof = True
                continue
            take(len(data), time.monotonic())
        t_end = time.monotonic()
        for k in range(next_frame, n):
            rows.append((flow_id, "never", k, float(pts[k]), int(size[k]), int(end[k]), float("nan")))
        if writer is not None and rows:
            writer.extend(rows)
        return PullResult(status=status, content_length_bytes=length, body_bytes=received, connect_s=t_connect,
                          first_byte_s=first_byte, start_s=start, end_s=t_end, frames_arrived=next_frame,
                          frames=n, complete=next_frame == n)
    finally:
        sock.close()

"""The control exchange between ``tcpdelay send`` and ``tcpdelay recv`` (protocol version 2).

Everything a receiver needs to know about a run travels here, on one TCP connection to the
receiver's HOST:PORT, before any media. Messages are JSON objects, each preceded by its length
as an unsigned 16-bit integer (like RFC 4571) and at most :data:`MAX_CONTROL_BYTES` long.

Sequence (S = sender, R = receiver)::

    S -> R  hello   {"type": "hello", "protocol": "tcpdelay-media", "version": 2,
                     "run_id": str, "params": {...}, "pad": "..."}
    R -> S  accept  {"type": "accept", "version": 2, "token": hex}   or
            reject  {"type": "reject", "reason": str}
    S -> R  (TCP media) one new TCP connection per media connection, to the same HOST:PORT,
            opening with  {"type": "data", "token": hex, "connection": i}  and then RFC 4571
            (UDP media) datagrams to the same port number, from the control peer's address
    S -> R  end     {"type": "end", "sent_packets": n, ..., "pad": "..."}
    R -> S  summary {"type": "summary", "received_packets": n, ...}
    R -> S  abort   {"type": "abort", "status": "corrupted", "reason": str}   at any time after
            the accept, instead of the summary: the receiver failed the run (a media stream
            that is not what the sender sent) and closes everything.

The version is that of the whole wire format, media framing included
(:mod:`tcpdelay.transport.framing`): version 2 added the header check of the media packets and
the abort; a receiver refuses a hello of another version.

No amplification: the receiver answers only these two requests (the abort spends what their
answers leave), and everything it sends is no longer than the requests it answers (the sender
pads its requests to :data:`REQUEST_PAD_BYTES` so that the answers fit, as QUIC pads its first
packet, RFC 9000 §8.1). The receiver never sends on
the media connections nor over UDP.
"""

from __future__ import annotations

import json
import socket
import struct
import time

from tcpdelay.errors import TcpdelayError

PROTOCOL = "tcpdelay-media"
VERSION = 2
MAX_CONTROL_BYTES = 4096
REQUEST_PAD_BYTES = 512
TOKEN_BYTES = 16
_LEN = struct.Struct("!H")


class ControlError(TcpdelayError):
    """The control exchange failed: malformed, oversized, refused, timed out or disconnected."""


def encode(msg: dict, *, pad_to: int = 0) -> bytes:
    """One control message; with ``pad_to``, a "pad" field makes it at least that long."""
    body = json.dumps(msg, separators=(",", ":")).encode()
    if pad_to and 2 + len(body) < pad_to:
        padded = dict(msg, pad="")
        base = len(json.dumps(padded, separators=(",", ":")).encode())
        padded["pad"] = "-" * max(0, pad_to - 2 - base)
        body = json.dumps(padded, separators=(",", ":")).encode()
    if len(body) > MAX_CONTROL_BYTES:
        raise ControlError(f"control message of {len(body)} B exceeds {MAX_CONTROL_BYTES} B")
    return _LEN.pack(len(body)) + body


def decode_body(body: bytes) -> dict:
    try:
        msg = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ControlError("control message is not UTF-8 JSON") from None
    except RecursionError:      # 4096 bytes hold ~2,000 nested arrays: deeper than Python's stack
        raise ControlError("control message is nested too deeply") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ControlError("control message is not a JSON object with a string 'type'")
    return msg


class ControlReader:
    """Incremental reader of control messages; holds at most one message (bounded)."""

    def __init__(self):
        self._buf = bytearray()

    def feed(self, data: bytes, *, limit: int | None = None) -> list[tuple[dict, int]]:
        """Messages completed by ``data``, each with its size on the wire; with ``limit``, stop
        after that many (what follows stays for :meth:`take_rest`)."""
        self._buf += data
        out = []
        while len(self._buf) >= 2 and (limit is None or len(out) < limit):
            (n,) = _LEN.unpack_from(self._buf, 0)
            if n == 0 or n > MAX_CONTROL_BYTES:
                raise ControlError(f"control message length {n} is outside [1, {MAX_CONTROL_BYTES}]")
            if len(self._buf) < 2 + n:
                break
            out.append((decode_body(bytes(self._buf[2:2 + n])), 2 + n))
            del self._buf[:2 + n]
        return out

    def take_rest(self) -> bytes:
        """Bytes after the last complete message (the start of RFC 4571 media on a data link)."""
        rest, self._buf = bytes(self._buf), bytearray()
        return rest


def send(sock: socket.socket, msg: dict, *, pad_to: int = 0) -> int:
    data = encode(msg, pad_to=pad_to)
    sock.sendall(data)
    return len(data)


def read_ready(sock: socket.socket) -> bytes | None:
    """What a non-blocking control socket has for us: ``None`` when nothing is there yet,
    ``b""`` when the peer closed it (or it failed), else up to 4096 bytes."""
    try:
        return sock.recv(4096)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


def recv(sock: socket.socket, timeout_s: float) -> tuple[dict, int]:
    """Read exactly one control message from a blocking socket, within ``timeout_s``.

    Reads no further than that message, so what follows stays in the socket."""
    deadline = time.monotonic() + timeout_s

    def read(n: int) -> bytes:
        got = bytearray()
        while len(got) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ControlError(f"no control message within {timeout_s:g} s")
            sock.settimeout(left)
            try:
                chunk = sock.recv(n - len(got))
            except socket.timeout:
                raise ControlError(f"no control message within {timeout_s:g} s") from None
            except OSError as err:
                raise ControlError(f"control connection failed: {err.strerror or err}") from None
            if not chunk:
                raise ControlError("the peer closed the control connection")
            got += chunk
        return bytes(got)

    (n,) = _LEN.unpack(read(2))
    if n == 0 or n > MAX_CONTROL_BYTES:
        raise ControlError(f"control message length {n} is outside [1, {MAX_CONTROL_BYTES}]")
    return decode_body(read(n)), 2 + n


def answer(msg: dict, request_bytes: int) -> bytes:
    """The receiver's answer to a request of ``request_bytes``: never longer than it.

    String fields are shortened to fit; if the answer still does not fit, a bare
    ``{"type": "reject"}`` is sent instead, or nothing when even that does not fit."""
    data = encode(msg)
    if len(data) <= request_bytes:
        return data
    trimmed = dict(msg)
    for key, value in msg.items():
        if isinstance(value, str) and key != "type":
            over = len(encode(trimmed)) - request_bytes
            if over > 0:
                trimmed[key] = value[:max(0, len(value) - over)]
    data = encode(trimmed)
    if len(data) <= request_bytes:
        return data
    data = encode({"type": "reject"})
    return data if len(data) <= request_bytes else b""

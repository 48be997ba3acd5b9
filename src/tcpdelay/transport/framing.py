"""Media packets on the wire: RTP (RFC 3550 §5.1) framed for TCP by RFC 4571.

One *media packet* of the source becomes one RTP packet, or N of them with split-N. Every RTP
packet is self-describing, so the receiver needs no state from the sender beyond this format:

RTP fixed header (RFC 3550 §5.1, 12 bytes, network byte order)::

    V=2 | P=0 | X=0 | CC=0 | M | PT | sequence number (16) | timestamp (32) | SSRC (32)

- ``PT`` is :data:`PT_MEDIA` (96, dynamic) for media and :data:`PT_KEEPALIVE` (127) for the
  keep-alive packets sent during silences (an RTP packet of a payload type the receiver does
  not play out, as RFC 6263 §4.3 describes; it has no payload).
- ``sequence number`` counts RTP packets of the flow (pieces and keep-alives included) modulo
  2**16, as RFC 3550 asks; the *media* sequence number is in the tcpdelay header below.
- ``timestamp`` is the media time of the source packet on a :data:`RTP_CLOCK_HZ` clock.
- ``SSRC`` is the flow id. ``M`` is set on the last piece of the last packet of a video frame
  (and on every packet of a frameless source).

tcpdelay media header (wire version 2): the first :data:`MEDIA_HEADER_BYTES` (20) bytes of the
RTP payload::

    media seq (u64) | send time, ns on the sender's clock (u64) | piece (u8) | pieces (u8) | check (u16)

``check`` is the low 16 bits of the CRC-32 (zlib's) of the packet's length as an unsigned
16-bit integer followed by its first 30 bytes (the RTP header and the media header up to the
check): a length prefix, header or datagram that was altered, cut or made up is caught by it.
(Version 1 had a zero there.) The rest of the payload is filler and must be zeros, so that an
RTP packet of a media packet has exactly the source's ``size_bytes`` (split-N: the N pieces'
sizes add up to it) and bytes that do not belong there are caught too. The header sits in the
payload rather than in an RTP header extension (RFC 3550 §5.3.1) so that packet sizes stay
those of the source profile: an extension would add 4 bytes of its own.

RFC 4571 §2 framing over TCP: each RTP packet is preceded by its length as an unsigned 16-bit
integer, so a message is at most 65535 bytes. :class:`FrameParser` reads a byte stream of such
messages incrementally and never holds more than one incomplete message, whose size is bounded
by ``max_message_bytes``; anything malformed raises :class:`FramingError`. It checks the
header of a message as soon as its first bytes are in, not when its body is complete, so a
made-up length prefix is caught at once instead of swallowing the valid packets behind it; with
``flow_id`` it also requires every packet's SSRC to be the flow's (on a TCP media connection
nothing else may arrive).
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from tcpdelay.errors import ParameterError, TcpdelayError

RTP_VERSION = 2
RTP_HEADER_BYTES = 12
MEDIA_HEADER_BYTES = 20
MIN_MEDIA_RTP_BYTES = RTP_HEADER_BYTES + MEDIA_HEADER_BYTES
RFC4571_MAX_BYTES = 0xFFFF
PT_MEDIA = 96
PT_KEEPALIVE = 127
RTP_CLOCK_HZ = 90_000
MAX_PIECES = 255

_RTP = struct.Struct("!BBHII")
_MEDIA = struct.Struct("!QQBBH")
_LEN = struct.Struct("!H")
_U64 = 1 << 64
_CHECKED_BYTES = MIN_MEDIA_RTP_BYTES - 2      # what the check covers (after the length)
_ZEROS = bytes(RFC4571_MAX_BYTES)


def header_check(n: int, packet) -> int:
    """The header check of a media RTP packet of ``n`` bytes whose first 30 bytes ``packet``
    holds (see the module docstring): what goes into its bytes 30-31."""
    return zlib.crc32(packet[:_CHECKED_BYTES], zlib.crc32(_LEN.pack(n))) & 0xFFFF


_check = header_check


class FramingError(TcpdelayError):
    """The byte stream or datagram is not a valid tcpdelay RTP message."""

    before: list = []       # FrameParser.feed: the valid messages of the chunk before the bad one


class MediaPiece(NamedTuple):
    """One RTP packet of media as read from the wire."""
    flow_id: int          # SSRC
    rtp_seq: int
    rtp_timestamp: int
    marker: bool
    seq: int              # media sequence number (the source packet's)
    send_time_ns: int     # when the source packet entered the sender's queue, sender clock
    piece: int            # 0 .. pieces-1
    pieces: int
    size_bytes: int       # this RTP packet's size (without the RFC 4571 length)


class KeepAlive(NamedTuple):
    flow_id: int
    rtp_seq: int
    size_bytes: int


def encode_media(*, flow_id: int, rtp_seq: int, rtp_timestamp: int, marker: bool, seq: int,
                 send_time_ns: int, piece: int = 0, pieces: int = 1, size_bytes: int) -> bytes:
    """The RTP packet (``size_bytes`` long) of one media piece."""
    if size_bytes < MIN_MEDIA_RTP_BYTES or size_bytes > RFC4571_MAX_BYTES:
        raise ParameterError(f"RTP packet size {size_bytes} B is outside "
                             f"[{MIN_MEDIA_RTP_BYTES}, {RFC4571_MAX_BYTES}]")
    if not 1 <= pieces <= MAX_PIECES or not 0 <= piece < pieces:
        raise ParameterError(f"piece {piece} of {pieces}: pieces must be 1..{MAX_PIECES}")
    head = _RTP.pack(RTP_VERSION << 6, (0x80 if marker else 0) | PT_MEDIA, rtp_seq & 0xFFFF,
                     rtp_timestamp & 0xFFFFFFFF, flow_id & 0xFFFFFFFF)
    media = _MEDIA.pack(seq % _U64, send_time_ns % _U64, piece, pieces, 0)[:-2]
    check = _check(size_bytes, head + media)
    return head + media + _LEN.pack(check) + bytes(size_bytes - MIN_MEDIA_RTP_BYTES)


def encode_keepalive(*, flow_id: int, rtp_seq: int, rtp_timestamp: int) -> bytes:
    """A 12-byte RTP packet of payload type :data:`PT_KEEPALIVE` (RFC 6263 §4.3)."""
    return _RTP.pack(RTP_VERSION << 6, PT_KEEPALIVE, rtp_seq & 0xFFFF,
                     rtp_timestamp & 0xFFFFFFFF, flow_id & 0xFFFFFFFF)


def frame(rtp_packet: bytes) -> bytes:
    """RFC 4571 §2: the 16-bit length, then the packet."""
    n = len(rtp_packet)
    if n > RFC4571_MAX_BYTES:
        raise ParameterError(f"RTP packet of {n} B does not fit RFC 4571's 16-bit length")
    return _LEN.pack(n) + rtp_packet


def _head(packet, n: int, flow_id: int | None = None):
    """Check the header of an RTP packet of ``n`` bytes whose first ``min(n, 32)`` bytes
    ``packet`` holds; return the decoded packet without its filler checked."""
    if n < RTP_HEADER_BYTES:
        raise FramingError(f"RTP packet of {n} B is shorter than the {RTP_HEADER_BYTES}-byte header")
    b0, b1, rtp_seq, ts, ssrc = _RTP.unpack_from(packet, 0)
    if b0 >> 6 != RTP_VERSION:
        raise FramingError(f"RTP version {b0 >> 6}, expected {RTP_VERSION}")
    if b0 & 0x3F:
        raise FramingError("RTP padding, extension and CSRCs are not used by tcpdelay "
                           f"(first byte {b0:#04x})")
    pt = b1 & 0x7F
    if flow_id is not None and ssrc != flow_id:
        raise FramingError(f"RTP SSRC {ssrc} is not this flow's ({flow_id})")
    if pt == PT_KEEPALIVE:
        if n != RTP_HEADER_BYTES:
            raise FramingError(f"keep-alive of {n} B, expected {RTP_HEADER_BYTES}")
        return KeepAlive(ssrc, rtp_seq, n)
    if pt != PT_MEDIA:
        raise FramingError(f"RTP payload type {pt}, expected {PT_MEDIA} (media) or "
                           f"{PT_KEEPALIVE} (keep-alive)")
    if n < MIN_MEDIA_RTP_BYTES:
        raise FramingError(f"media RTP packet of {n} B is shorter than {MIN_MEDIA_RTP_BYTES} B")
    seq, send_ns, piece, pieces, check = _MEDIA.unpack_from(packet, RTP_HEADER_BYTES)
    if pieces == 0 or piece >= pieces:
        raise FramingError(f"bad media header: piece {piece} of {pieces}")
    if check != _check(n, packet):
        raise FramingError(f"header check {check:#06x} does not match the {n}-byte packet's "
                           f"{_check(n, packet):#06x}: corrupted or not tcpdelay media")
    return MediaPiece(ssrc, rtp_seq, ts, bool(b1 & 0x80), seq, send_ns, piece, pieces, n)


def _filler(packet, n: int) -> None:
    if n > MIN_MEDIA_RTP_BYTES and bytes(packet[MIN_MEDIA_RTP_BYTES:n]) != _ZEROS[:n - MIN_MEDIA_RTP_BYTES]:
        raise FramingError(f"the filler of a {n}-byte media packet is not zeros: corrupted")


def decode(packet, flow_id: int | None = None) -> MediaPiece | KeepAlive:
    """Parse one RTP packet (bytes or memoryview); with ``flow_id``, its SSRC must be that.
    Raises :class:`FramingError`."""
    n = len(packet)
    out = _head(packet, n, flow_id)
    if type(out) is MediaPiece:
        _filler(packet, n)
    return out


class FrameParser:
    """Incremental RFC 4571 de-framer (RFC 4571 §2) with a bounded message size.

    :meth:`feed` takes any chunk of the byte stream and returns the messages it completes,
    decoded by :func:`decode`. Complete messages are parsed straight from the chunk; only the
    one incomplete message at its end is kept, so the parser never holds more than
    ``2 + max_message_bytes`` bytes (:attr:`buffered_bytes`). A length prefix below the RTP
    header size or above ``max_message_bytes`` raises :class:`FramingError` before anything is
    allocated for it, and the header of an incomplete message is checked as soon as its first
    :data:`MIN_MEDIA_RTP_BYTES` bytes are in (a made-up length is caught there, not after the
    valid packets it would swallow). With ``flow_id``, a packet of another SSRC is an error.
    After an error the parser is unusable (a byte stream cannot be resynchronised).
    """

    def __init__(self, max_message_bytes: int = RFC4571_MAX_BYTES, flow_id: int | None = None):
        if not RTP_HEADER_BYTES <= max_message_bytes <= RFC4571_MAX_BYTES:
            raise ParameterError(f"max_message_bytes {max_message_bytes} is outside "
                                 f"[{RTP_HEADER_BYTES}, {RFC4571_MAX_BYTES}]")
        self.max_message_bytes = max_message_bytes
        self.flow_id = flow_id
        self._partial = bytearray()   # an incomplete message: its prefix and part of its body
        self._need = 0                # total bytes of the message in _partial (0 = unknown yet)
        self._head_ok = False         # the header of the message in _partial has been checked
        self._failed: FramingError | None = None

    @property
    def buffered_bytes(self) -> int:
        return len(self._partial)

    def _length(self, view, at: int) -> int:
        n = (view[at] << 8) | view[at + 1]
        if n < RTP_HEADER_BYTES or n > self.max_message_bytes:
            self._fail(FramingError(f"RFC 4571 length {n} is outside "
                                    f"[{RTP_HEADER_BYTES}, {self.max_message_bytes}]"))
        return n

    def _fail(self, err: FramingError) -> None:
        self._failed = err
        self._partial = bytearray()
        raise err

    def _decode(self, packet) -> MediaPiece | KeepAlive:
        try:
            return decode(packet, self.flow_id)
        except FramingError as err:
            self._fail(err)
            raise  # unreachable: _fail raises

    def _check_partial_head(self) -> None:
        """Check the header of the incomplete message once enough of it is in."""
        part = self._partial
        if self._head_ok or not self._need:
            return
        n = self._need - 2
        if len(part) - 2 < min(n, MIN_MEDIA_RTP_BYTES):
            return
        try:
            _head(memoryview(part)[2:2 + min(n, MIN_MEDIA_RTP_BYTES)], n, self.flow_id)
        except FramingError as err:
            self._fail(err)
        self._head_ok = True

    def feed(self, data) -> list[MediaPiece | KeepAlive]:
        """The messages ``data`` completes. On a :class:`FramingError`, the valid messages of
        ``data`` before the bad one are in the error's ``before``."""
        if self._failed is not None:
            self._failed.before = []
            raise self._failed
        out: list[MediaPiece | KeepAlive] = []
        try:
            self._feed(data, out)
        except FramingError as err:
            err.before = out
            raise
        return out

    def _feed(self, data, out: list) -> None:
        view = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else memoryview(data)
        end = len(view)
        if not end:
            return
        at = 0
        if self._partial:
            part = self._partial
            if len(part) < 2:              # one byte of the length prefix so far
                part.append(view[0])
                at = 1
                self._need = 2 + self._length(part, 0)
            elif not self._need:
                self._need = 2 + self._length(part, 0)
            take = min(self._need - len(part), end - at)
            part += view[at:at + take]
            at += take
            if len(part) < self._need:
                self._check_partial_head()
                return
            out.append(self._decode(memoryview(part)[2:]))
            self._partial = bytearray()
            self._need = 0
            self._head_ok = False
        while end - at >= 2:
            n = self._length(view, at)
            if end - at - 2 < n:
                break
            out.append(self._decode(view[at + 2:at + 2 + n]))
            at += 2 + n
        if at < end:
            self._partial = bytearray(view[at:end])
            self._need = 2 + self._length(view, at) if end - at >= 2 else 0
            self._head_ok = False
            self._check_partial_head()

    def finish(self) -> None:
        """The stream has ended: raise :class:`FramingError` if it ended inside a message."""
        if self._failed is None and self._partial:
            n = len(self._partial)
            self._partial = bytearray()
            raise FramingError(f"stream truncated: it ends {n} B into an incomplete message")


def split_sizes(size_bytes: int, pieces: int) -> list[int]:
    """Sizes of the ``pieces`` RTP packets of split-N (Brosh et al., §7.1): as equal as possible,
    adding up to ``size_bytes`` so the flow's byte rate is unchanged. Raises
    :class:`ParameterError` when a piece would be smaller than :data:`MIN_MEDIA_RTP_BYTES`."""
    if not 1 <= pieces <= MAX_PIECES:
        raise ParameterError(f"split: {pieces} pieces is outside 1..{MAX_PIECES}")
    if size_bytes < pieces * MIN_MEDIA_RTP_BYTES:
        raise ParameterError(
            f"split-{pieces} of a {size_bytes}-byte RTP packet leaves pieces below "
            f"{MIN_MEDIA_RTP_BYTES} B (RTP + tcpdelay header); use at most "
            f"split-{max(1, size_bytes // MIN_MEDIA_RTP_BYTES)}")
    base, extra = divmod(size_bytes, pieces)
    return [base + (1 if i < extra else 0) for i in range(pieces)]

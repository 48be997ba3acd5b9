"""RTP/RFC 4571 framing: round trips, and malformed streams fail cleanly within the size bound."""

import os
import struct
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcpdelay.errors import ParameterError
from tcpdelay.transport.framing import (
    MIN_MEDIA_RTP_BYTES, PT_MEDIA, RTP_HEADER_BYTES, FrameParser, FramingError, KeepAlive,
    MediaPiece, decode, encode_keepalive, encode_media, frame, split_sizes,
)

media = st.builds(
    dict,
    flow_id=st.integers(0, 2**32 - 1), rtp_seq=st.integers(0, 2**16 - 1),
    rtp_timestamp=st.integers(0, 2**32 - 1), marker=st.booleans(), seq=st.integers(0, 2**63),
    send_time_ns=st.integers(0, 2**64 - 1), size_bytes=st.integers(MIN_MEDIA_RTP_BYTES, 1500),
    pieces=st.integers(1, 255), piece=st.integers(0, 254),
).filter(lambda d: d["piece"] < d["pieces"])


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(media, st.builds(dict, keepalive=st.integers(0, 2**16 - 1))),
                min_size=1, max_size=20),
       st.lists(st.integers(0, 10**6), max_size=30))
def test_stream_round_trip_in_any_chunking(messages, cuts):
    stream = b""
    for m in messages:
        if "keepalive" in m:
            stream += frame(encode_keepalive(flow_id=7, rtp_seq=m["keepalive"], rtp_timestamp=1))
        else:
            pkt = encode_media(**m)
            assert len(pkt) == m["size_bytes"]
            stream += frame(pkt)
    parser = FrameParser(1500)
    got = []
    for chunk in _chunks(stream, cuts):
        got += parser.feed(chunk)
        assert parser.buffered_bytes <= 2 + 1500
    parser.finish()
    assert len(got) == len(messages)
    for m, g in zip(messages, got):
        if "keepalive" in m:
            assert g == KeepAlive(7, m["keepalive"], RTP_HEADER_BYTES)
        else:
            assert isinstance(g, MediaPiece)
            assert (g.flow_id, g.rtp_seq, g.rtp_timestamp, g.marker, g.seq, g.send_time_ns,
                    g.piece, g.pieces, g.size_bytes) == (
                m["flow_id"], m["rtp_seq"], m["rtp_timestamp"], m["marker"], m["seq"],
                m["send_time_ns"], m["piece"], m["pieces"], m["size_bytes"])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(0, 10**6), max_size=20),
       st.integers(RTP_HEADER_BYTES, 2000))
def test_garbage_raises_framing_error_only_and_stays_within_the_bound(data, cuts, bound):
    parser = FrameParser(bound)
    try:
        for chunk in _chunks(data, cuts):
            parser.feed(chunk)
            assert parser.buffered_bytes <= 2 + bound
        parser.finish()
    except FramingError as err:
        assert str(err)
        with pytest.raises(FramingError):   # a failed stream stays failed
            parser.feed(b"\x00\x20" + bytes(32))


@settings(max_examples=200, deadline=None)
@given(media, st.integers(1, 10**6), st.data())
def test_corrupted_valid_message_fails_cleanly(m, cut, data):
    """Flip one byte of the header, or truncate: a clean FramingError or a valid decode."""
    pkt = bytearray(frame(encode_media(**m)))
    i = data.draw(st.integers(0, 2 + MIN_MEDIA_RTP_BYTES - 1))
    pkt[i] ^= data.draw(st.integers(1, 255))
    parser = FrameParser(1500)
    try:
        parser.feed(bytes(pkt[:cut % (len(pkt) + 1)]))
        parser.finish()
    except FramingError:
        pass


def test_bad_lengths_fail_on_the_prefix_before_the_body():
    p = FrameParser(1500)
    with pytest.raises(FramingError, match="outside"):
        p.feed(struct.pack("!H", 1501))
    assert p.buffered_bytes == 0
    p = FrameParser(1500)
    with pytest.raises(FramingError, match="outside"):
        p.feed(struct.pack("!H", RTP_HEADER_BYTES - 1))
    # split prefix: one byte, then the other
    p = FrameParser(100)
    assert p.feed(b"\xff") == []
    with pytest.raises(FramingError):
        p.feed(b"\xff")


def test_a_maximal_claim_never_holds_more_than_its_bound():
    """A peer announcing 65535 bytes and trickling them in: memory stays ~ the message size.
    (A valid header, then its filler: the header of a message is checked before its body.)"""
    p = FrameParser()
    msg = frame(encode_media(flow_id=1, rtp_seq=0, rtp_timestamp=0, marker=True, seq=0,
                             send_time_ns=0, size_bytes=65535))
    tracemalloc.start()
    try:
        for at in range(0, 65535 - 64, 64):
            p.feed(msg[at:at + 64])
            assert p.buffered_bytes <= 2 + 65535
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 65537 + 64 * 1024
    with pytest.raises(FramingError, match="truncated"):
        p.finish()


@pytest.mark.parametrize("mutate, match", [
    (lambda b: bytes([0x40]) + b[1:], "version 1"),
    (lambda b: bytes([0x90]) + b[1:], "extension"),
    (lambda b: b[:1] + bytes([0x00]) + b[2:], "payload type 0"),
    (lambda b: b[:20], "shorter"),
    (lambda b: b[:8], "shorter than the 12-byte header"),
    (lambda b: b[:12 + 16] + bytes([3, 3]) + b[30:], "piece 3 of 3"),
    (lambda b: b[:12 + 16] + bytes([0, 0]) + b[30:], "piece 0 of 0"),
    (lambda b: b[:12] + bytes([b[12] ^ 1]) + b[13:], "header check"),     # the media seq
    (lambda b: b[:30] + bytes([b[30] ^ 1]) + b[31:], "header check"),     # the check itself
    (lambda b: b[:99], "header check"),                                   # cut: another length
    (lambda b: b[:50] + b"x" + b[51:], "filler"),
])
def test_decode_rejects_malformed_datagrams(mutate, match):
    good = encode_media(flow_id=1, rtp_seq=2, rtp_timestamp=3, marker=True, seq=4,
                        send_time_ns=5, size_bytes=100)
    assert decode(good).seq == 4 and decode(good).marker
    with pytest.raises(FramingError, match=match):
        decode(mutate(good))


def test_header_layout_is_rfc3550():
    pkt = encode_media(flow_id=0xDEADBEEF, rtp_seq=70000, rtp_timestamp=90000, marker=True,
                       seq=1, send_time_ns=2, size_bytes=40)
    b0, b1, seq16, ts, ssrc = struct.unpack("!BBHII", pkt[:12])
    assert b0 == 0x80 and b1 == 0x80 | PT_MEDIA and seq16 == 70000 % 65536
    assert ts == 90000 and ssrc == 0xDEADBEEF
    assert struct.unpack("!QQBB", pkt[12:30]) == (1, 2, 0, 1)
    # wire version 2: the last two header bytes are the CRC-32 of length + first 30 bytes
    check = zlib.crc32(pkt[:30], zlib.crc32(struct.pack("!H", 40))) & 0xFFFF
    assert struct.unpack("!H", pkt[30:32]) == (check,) and pkt[32:] == bytes(8)
    assert frame(pkt)[:2] == b"\x00\x28"


@given(st.integers(MIN_MEDIA_RTP_BYTES, 65535), st.integers(1, 255))
def test_split_sizes_add_up_and_stay_above_the_header(size, n):
    if size < n * MIN_MEDIA_RTP_BYTES:
        with pytest.raises(ParameterError, match="split"):
            split_sizes(size, n)
        return
    sizes = split_sizes(size, n)
    assert sum(sizes) == size and len(sizes) == n
    assert min(sizes) >= MIN_MEDIA_RTP_BYTES and max(sizes) - min(sizes) <= 1


def test_encode_checks_its_parameters():
    with pytest.raises(ParameterError):
        encode_media(flow_id=1, rtp_seq=0, rtp_timestamp=0, marker=False, seq=0,
                     send_time_ns=0, size_bytes=MIN_MEDIA_RTP_BYTES - 1)
    with pytest.raises(ParameterError):
        FrameParser(5)


def test_a_made_up_length_is_caught_at_the_header_not_after_the_packets_it_swallows():
    """A stream, then a plausible length prefix that no packet follows, then the stream goes
    on: the parser fails on the bytes right after the prefix instead of reading the next
    ~115 valid packets as the body of a 20000-byte message."""
    pkts = [frame(encode_media(flow_id=3, rtp_seq=i, rtp_timestamp=0, marker=True, seq=i,
                               send_time_ns=i, size_bytes=172)) for i in range(200)]
    p = FrameParser(flow_id=3)
    assert len(p.feed(b"".join(pkts[:10]))) == 10
    with pytest.raises(FramingError) as caught:      # in one chunk: the good ones are kept
        FrameParser(flow_id=3).feed(b"".join(pkts[:10]) + struct.pack("!H", 20000) + pkts[10])
    assert [m.seq for m in caught.value.before] == list(range(10))
    p.feed(struct.pack("!H", 20000))
    with pytest.raises(FramingError, match="RTP version 0"):
        for pkt in pkts[10:]:
            p.feed(pkt)
            assert p.buffered_bytes < 2 + 174, "the parser is swallowing valid packets"


def test_a_packet_of_another_flow_on_a_flow_connection_is_an_error():
    other = frame(encode_media(flow_id=4, rtp_seq=0, rtp_timestamp=0, marker=True, seq=0,
                               send_time_ns=0, size_bytes=100))
    assert FrameParser().feed(other)[0].flow_id == 4
    with pytest.raises(FramingError, match="SSRC 4 is not this flow's"):
        FrameParser(flow_id=3).feed(other)
    with pytest.raises(FramingError, match="SSRC 4"):
        FrameParser(flow_id=3).feed(frame(encode_keepalive(flow_id=4, rtp_seq=0, rtp_timestamp=0)))


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.integers(0, 20), st.integers(0, 3000))
def test_garbage_injected_into_a_valid_stream_is_detected(garbage, after, seed):
    """Any bytes injected between two frames of a valid stream, where they do not happen to
    be whole valid frames of the flow themselves, fail the stream before its end."""
    pkts = [frame(encode_media(flow_id=9, rtp_seq=i, rtp_timestamp=0, marker=True, seq=i,
                               send_time_ns=seed + i, size_bytes=100)) for i in range(40)]
    stream = b"".join(pkts[:after]) + garbage + b"".join(pkts[after:])
    p = FrameParser(flow_id=9)
    got = []
    try:
        got = p.feed(stream)
        p.finish()
    except FramingError:
        return
    # not detected: then the garbage decoded as frames of this flow with a valid check
    assert len(got) > 40

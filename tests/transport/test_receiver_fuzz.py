"""Fuzzing the receiver (issue 53, item 1): its control and media parsers on any bytes
(hypothesis), any JSON as a hello, and a bounded random-bytes run per transport; after each, the
receiver still serves a real sender."""

from __future__ import annotations

import json
import random
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from receiver_helpers import Receiver, hello, media_conn, pkt, real_run

from tcpdelay.transport import control
from tcpdelay.transport.framing import FrameParser, FramingError, KeepAlive, MediaPiece, decode, frame

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8))
def test_the_control_reader_takes_any_bytes(chunks):
    reader = control.ControlReader()
    try:
        for chunk in chunks:
            for msg, n in reader.feed(chunk):
                assert isinstance(msg, dict) and isinstance(msg["type"], str) and 3 <= n <= 2 + control.MAX_CONTROL_BYTES
    except control.ControlError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 2100), st.sampled_from([b"[", b"{\"a\":", b"[{\"b\":"]))
def test_any_nesting_is_a_control_error_not_a_crash(depth, opener):
    body = opener * depth
    body = body[:control.MAX_CONTROL_BYTES]
    reader = control.ControlReader()
    with pytest.raises(control.ControlError):
        reader.feed(struct.pack("!H", len(body)) + body)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=400), max_size=8), st.integers(12, 65535), st.none() | st.integers(0, 3))
def test_the_frame_parser_takes_any_bytes(chunks, max_message_bytes, flow_id):
    parser = FrameParser(max_message_bytes, flow_id=flow_id)
    try:
        for chunk in chunks:
            for piece in parser.feed(chunk):
                assert type(piece) in (MediaPiece, KeepAlive)
        parser.finish()
    except FramingError:
        assert parser.buffered_bytes <= 2 + max_message_bytes


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_a_datagram_of_any_bytes_decodes_or_is_a_framing_error(data):
    try:
        assert type(decode(data)) in (MediaPiece, KeepAlive)
    except FramingError:
        pass


@pytest.fixture(scope="module")
def rx(tmp_path_factory):
    r = Receiver(out_dir=str(tmp_path_factory.mktemp("fuzz") / "rx"), idle_timeout_s=2.0,
                 max_runs_per_peer_per_minute=10**6)
    yield r
    r.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.dictionaries(st.text(max_size=10), JSON, max_size=6),
                 st.fixed_dictionaries({"type": st.just("hello"), "protocol": st.just(control.PROTOCOL),
                                        "version": st.just(control.VERSION),
                                        "run_id": st.text(max_size=70) | JSON,
                                        "params": st.dictionaries(st.sampled_from(
                                            ["transport", "connections", "split", "duration_s", "flow_id",
                                             "delivery", "source", "max_packet_bytes", "x"]), JSON, max_size=5)
                                        | JSON})))
def test_any_json_as_a_hello_is_answered_or_closed_and_the_receiver_serves_on(rx, msg):
    data = json.dumps(msg).encode()
    if len(data) > control.MAX_CONTROL_BYTES:
        return
    with socket.create_connection(("127.0.0.1", rx.port), timeout=10) as s:
        s.sendall(struct.pack("!H", len(data)) + data)
        s.settimeout(10)
        try:
            s.recv(4096)            # a reject, or closed (an accepted run is abandoned)
        except OSError:
            pass
    assert rx.alive(), rx.error


@pytest.mark.parametrize("transport", ["tcp", "udp", "quic-stream", "quic-datagram"])
def test_a_run_of_random_bytes_ends_and_the_receiver_serves_a_real_sender_after(rx, tmp_path, transport):
    rng = random.Random(53)
    ctl, accept = hello(rx, f"random-{transport}", transport=transport, duration_s=2)
    assert accept["type"] == "accept"
    if transport == "tcp":
        with media_conn(rx, accept["token"]) as data:
            data.sendall(frame(pkt(0)) + b"".join(rng.randbytes(rng.randint(1, 2000)) for _ in range(30)))
    else:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            for i in range(300):
                kind = i % 3
                if kind == 0:
                    data = rng.randbytes(rng.randint(0, 1500))
                elif kind == 1:         # a long-header Initial of QUIC v1, any length, random rest
                    data = bytes([0xC0 | rng.randint(0, 3)]) + struct.pack("!I", 1) + rng.randbytes(rng.randint(0, 1400))
                else:                   # RTP-looking: version 2, our payload type, random rest
                    data = bytes([0x80, 96]) + rng.randbytes(rng.randint(0, 200))
                u.sendto(data, ("127.0.0.1", rx.port))
    ctl.close()
    real_run(rx, tmp_path / "tx", transport=transport, run_id=f"after-random-{transport}")
    assert rx.alive(), rx.error

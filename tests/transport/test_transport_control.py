"""The control exchange: bounded messages, answers never longer than requests; the schedulers."""

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tcpdelay.errors import ParameterError
from tcpdelay.transport import control
from tcpdelay.transport.config import ReceiverConfig, RunParams, SenderConfig, parse_host_port
from tcpdelay.transport.scheduler import (
    CA_DISORDER, CA_LOSS, CA_OPEN, CA_RECOVERY, BlindScheduler, ConnectionView,
    IntelligentScheduler, make_scheduler,
)


def test_messages_round_trip_through_a_chunked_reader():
    msgs = [{"type": "hello", "n": i, "s": "x" * i} for i in range(0, 300, 37)]
    stream = b"".join(control.encode(m) for m in msgs)
    reader = control.ControlReader()
    got = []
    for i in range(0, len(stream), 5):
        got += [m for m, _ in reader.feed(stream[i:i + 5])]
    assert got == msgs


def test_reader_limit_leaves_the_media_that_follows():
    data = control.encode({"type": "data", "token": "t", "connection": 0}) + b"\x00\x0cRTPRTPRTPRT"
    reader = control.ControlReader()
    (msg, n), = reader.feed(data, limit=1)
    assert msg["type"] == "data" and reader.take_rest() == b"\x00\x0cRTPRTPRTPRT"


@pytest.mark.parametrize("data, match", [
    (b"\x00\x00", "length 0"),
    ((control.MAX_CONTROL_BYTES + 1).to_bytes(2, "big"), "outside"),
    (b"\x00\x03abc", "not UTF-8 JSON"),
    (b"\x00\x02[]", "JSON object"),
    (b"\x00\x0b{\"type\": 1}", "string 'type'"),
])
def test_malformed_control_messages_raise_control_error(data, match):
    with pytest.raises(control.ControlError, match=match):
        control.ControlReader().feed(data)


def test_oversized_message_is_refused_before_sending():
    with pytest.raises(control.ControlError, match="exceeds"):
        control.encode({"type": "x", "big": "a" * control.MAX_CONTROL_BYTES})


def test_padding_reaches_the_requested_size():
    data = control.encode({"type": "hello"}, pad_to=control.REQUEST_PAD_BYTES)
    assert len(data) == control.REQUEST_PAD_BYTES
    assert control.decode_body(data[2:])["type"] == "hello"


@given(st.integers(0, 600), st.text(max_size=400))
def test_an_answer_is_never_longer_than_its_request(request_bytes, reason):
    data = control.answer({"type": "reject", "reason": reason}, request_bytes)
    assert len(data) <= request_bytes
    if data:
        assert control.decode_body(data[2:])["type"] == "reject"


def test_blocking_recv_times_out_and_detects_close():
    a, b = socket.socketpair()
    with a, b:
        with pytest.raises(control.ControlError, match="within"):
            control.recv(a, 0.05)
        control.send(b, {"type": "end"})
        assert control.recv(a, 1.0)[0] == {"type": "end"}
        b.close()
        with pytest.raises(control.ControlError, match="closed"):
            control.recv(a, 1.0)


def test_run_params_validate_at_the_boundary():
    with pytest.raises(ParameterError, match="transport"):
        RunParams(transport="sctp")
    with pytest.raises(ParameterError, match="parallel connections need --transport tcp"):
        RunParams(transport="udp", connections=2)
    with pytest.raises(ParameterError, match="in-order needs"):
        RunParams(transport="udp", delivery="in-order")
    with pytest.raises(ParameterError, match="unknown keys"):
        RunParams.from_dict({"transport": "tcp", "evil": 1})
    with pytest.raises(ParameterError, match="connections"):
        RunParams(connections=65)
    with pytest.raises(ParameterError, match="proactive drop needs"):
        SenderConfig("127.0.0.1", 1, run=RunParams(transport="udp"), proactive_drop_delay_s=0.1)
    with pytest.raises(ParameterError, match="exclude each other"):
        SenderConfig("127.0.0.1", 1, run=RunParams(delivery="in-order"), proactive_drop_delay_s=0.1)
    with pytest.raises(ParameterError, match="port"):
        ReceiverConfig(listen_port=70000)
    assert RunParams.from_dict(RunParams(split=3).to_dict()) == RunParams(split=3)


def test_parse_host_port():
    assert parse_host_port("to", "127.0.0.1:5000") == ("127.0.0.1", 5000)
    assert parse_host_port("to", "[::1]:9") == ("::1", 9)
    for bad in ("127.0.0.1", "a:b", ":5", "h:99999", "::1:5"):
        with pytest.raises(ParameterError):
            parse_host_port("to", bad)


def test_blind_is_round_robin():
    s = BlindScheduler(3)
    assert [s.pick() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_intelligent_picks_least_unsent_not_in_recovery_or_timeout():
    s = IntelligentScheduler(4)
    views = [ConnectionView(0, 5000, CA_OPEN), ConnectionView(1, 100, CA_RECOVERY),
             ConnectionView(2, 300, CA_DISORDER), ConnectionView(3, 0, CA_LOSS)]
    assert s.pick(views) == 2          # 3 (empty) is in timeout, 1 in fast recovery
    all_bad = [ConnectionView(0, 50, CA_LOSS), ConnectionView(1, 10, CA_RECOVERY)]
    assert IntelligentScheduler(2).pick(all_bad) == 1    # none usable: least unsent of all


def test_intelligent_ties_rotate_so_idle_connections_share_the_load():
    s = IntelligentScheduler(3)
    idle = [ConnectionView(i, 0, CA_OPEN) for i in range(3)]
    assert [s.pick(idle) for _ in range(6)] == [0, 1, 2, 0, 1, 2]


def test_make_scheduler_rejects_unknown_names():
    with pytest.raises(ParameterError, match="blind, intelligent"):
        make_scheduler("random", 2)

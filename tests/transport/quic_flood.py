"""A hostile QUIC client for the receiver's soak (tests/transport/test_receiver_soak.py): it
completes the handshake, then writes stream data at chosen offsets, ignoring the flow-control
credit it was given (aioquic's client bookkeeping is overridden)."""

import socket, time
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted
from tcpdelay.transport.quic_config import QuicOptions, client_configuration


def quic_high_offset_flood(port, offsets, chunk=1000, timeout_s=10.0, payload=None):
    """A QUIC client that completes the handshake, then writes stream 0's data at the given
    offsets (a gap before each; ``payload``, default ``chunk`` zeros), ignoring the receiver's
    flow-control credit. Returns what
    became of the connection: 'terminated: ...' or 'open'."""
    addr = ("127.0.0.1", port)
    conn = QuicConnection(configuration=client_configuration(QuicOptions(), "quic-stream"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.05)
    state = {"done": False, "term": None}

    def pump(duration_s):
        end = time.monotonic() + duration_s
        while time.monotonic() < end:
            for data, _ in conn.datagrams_to_send(now=time.monotonic()):
                sock.sendto(data, addr)
            try:
                data, _ = sock.recvfrom(65536)
                conn.receive_datagram(data, addr, now=time.monotonic())
            except socket.timeout:
                t = conn.get_timer()
                if t is not None and t <= time.monotonic():
                    conn.handle_timer(now=time.monotonic())
            while (ev := conn.next_event()) is not None:
                if isinstance(ev, HandshakeCompleted):
                    state["done"] = True
                elif isinstance(ev, ConnectionTerminated):
                    state["term"] = f"{ev.error_code:#x} {ev.reason_phrase}"
            if state["term"]:
                return

    conn.connect(addr, now=time.monotonic())
    deadline = time.monotonic() + timeout_s
    while not state["done"] and not state["term"] and time.monotonic() < deadline:
        pump(0.1)
    assert state["done"], state
    sid = conn.get_next_available_stream_id()
    stream = conn._get_or_create_stream_for_send(sid)
    for off in offsets:
        s = stream.sender
        s._buffer = bytearray()
        s._buffer_start = s._buffer_stop = off
        s._pending = type(s._pending)()
        stream.max_stream_data_remote = 2**60
        conn._remote_max_data = 2**60
        s.write(payload if payload is not None else b"\x00" * chunk)
        pump(0.3)
        if state["term"]:
            break
    sock.close()
    return state["term"] or "open"

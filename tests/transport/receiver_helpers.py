"""Shared by the receiver's hardening, fuzz and soak tests (issue 53): a receiver in a thread,
a real sender's run, a hand-driven hello."""

from __future__ import annotations

import socket
import threading
import time

from tcpdelay.traffic import CbrSource
from tcpdelay.transport import ReceiverConfig, RunParams, SenderConfig, run_receiver, run_sender
from tcpdelay.transport import control
from tcpdelay.transport.framing import encode_media

VOIP = CbrSource(172, 0.02)


class Receiver:
    """run_receiver in a thread, on a free loopback port, serving until stopped."""

    def __init__(self, **kw):
        kw.setdefault("listen_host", "127.0.0.1")
        kw.setdefault("idle_timeout_s", 5.0)
        kw.setdefault("runs", 0)
        kw.setdefault("min_free_disk_bytes", 0)
        self.cfg = ReceiverConfig(**kw)
        self.stop = threading.Event()
        self.results, self.notices, self.error = [], [], None
        ready = threading.Event()

        def main():
            try:
                self.results = run_receiver(self.cfg, stop=self.stop, on_notice=self.notices.append,
                                            on_ready=lambda a: (setattr(self, "port", a[1]), ready.set()))
            except BaseException as err:  # noqa: BLE001 - reported by close()
                self.error = err
                ready.set()

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        assert ready.wait(10)
        assert self.error is None, self.error

    def alive(self) -> bool:
        return self.thread.is_alive() and self.error is None

    def close(self, timeout=30):
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "receiver did not stop"
        assert self.error is None, f"the receiver died: {self.error!r}"
        return self.results


def real_run(rx: Receiver, out_dir, transport="tcp", run_id=None, duration_s=0.4):
    """A real sender's run; it must complete (the receiver serves on)."""
    assert rx.alive(), f"the receiver died: {rx.error!r}"
    res = run_sender(SenderConfig("127.0.0.1", rx.port, run=RunParams(transport=transport, duration_s=duration_s),
                                  out_dir=str(out_dir), run_id=run_id), VOIP)
    assert res.status == "completed", (res.status, res.error)
    return res


def hello(rx: Receiver, run_id="hand", *, raw: dict | None = None, **params) -> tuple[socket.socket, dict]:
    """A hand-driven sender's hello; its control socket and the receiver's answer."""
    ctl = socket.create_connection(("127.0.0.1", rx.port), timeout=10)
    msg = raw if raw is not None else {
        "type": "hello", "protocol": control.PROTOCOL, "version": control.VERSION,
        "run_id": run_id, "params": RunParams(**params).to_dict()}
    control.send(ctl, msg, pad_to=control.REQUEST_PAD_BYTES)
    answer, _ = control.recv(ctl, 10)
    return ctl, answer


def media_conn(rx: Receiver, token: str) -> socket.socket:
    data = socket.create_connection(("127.0.0.1", rx.port), timeout=10)
    data.sendall(control.encode({"type": "data", "token": token, "connection": 0}))
    return data


def pkt(seq: int, flow_id=0, size=100) -> bytes:
    return encode_media(flow_id=flow_id, rtp_seq=seq, rtp_timestamp=0, marker=True, seq=seq,
                        send_time_ns=time.monotonic_ns(), size_bytes=size)


def wait_for(cond, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)

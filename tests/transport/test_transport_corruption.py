"""Garbage in a media stream fails the flow, visibly, at both ends.

A real TCP relay on loopback sits between `tcpdelay send` and `tcpdelay recv`. It forwards
the control connection untouched and the media connection frame by frame, and after the 20th
frame injects two bytes: a plausible RFC 4571 length prefix (the flow's own packet size, so
no bound on lengths can catch it) that no packet follows, then forwards the rest of the valid
stream. A receiver that trusts the prefix reads the start of the next valid packet as the body
of this one, and so on; this one checks the header of a message as soon as it starts, fails
the run as "corrupted" with the reason, tells the sender, and both commands exit 1.
"""

import json
import re
import socket
import struct
import subprocess
import sys
import threading

from tcpdelay.records import read_records, read_run_metadata

TCPDELAY = [sys.executable, "-m", "tcpdelay"]
GOOD_FRAMES = 20


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            raise EOFError
        got += chunk
    return got


class GarbageProxy:
    """A TCP relay that injects a made-up length prefix into each media connection after
    GOOD_FRAMES frames."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.lst = socket.create_server(("127.0.0.1", 0))
        self.port = self.lst.getsockname()[1]
        self.injected = 0
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                down, _ = self.lst.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            self.socks += [down, up]
            threading.Thread(target=self._forward, args=(down, up, True), daemon=True).start()
            threading.Thread(target=self._forward, args=(up, down, False), daemon=True).start()

    def _forward(self, src: socket.socket, dst: socket.socket, from_sender: bool):
        try:
            if from_sender:
                head = _read_exactly(src, 2)
                body = _read_exactly(src, struct.unpack("!H", head)[0])
                dst.sendall(head + body)
                if json.loads(body)["type"] == "data":        # a media connection: RFC 4571 frames
                    for _ in range(GOOD_FRAMES):
                        head = _read_exactly(src, 2)
                        dst.sendall(head + _read_exactly(src, struct.unpack("!H", head)[0]))
                    dst.sendall(head)       # the length of the last frame, and no frame
                    self.injected += 1
            while chunk := src.recv(65536):
                dst.sendall(chunk)
            dst.shutdown(socket.SHUT_WR)
        except (OSError, EOFError):
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.lst.close()
        for s in self.socks:
            s.close()


def test_garbage_injected_by_a_relay_fails_the_flow_at_both_ends(tmp_path):
    rx = subprocess.Popen([*TCPDELAY, "recv", "--listen", "127.0.0.1:0", "--out", str(tmp_path / "rx"),
                           "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proxy = None
    try:
        port = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", rx.stderr.readline()).group(1))
        proxy = GarbageProxy(("127.0.0.1", port))
        tx = subprocess.run([*TCPDELAY, "send", "--to", f"127.0.0.1:{proxy.port}", "--duration-s", "3",
                             "--connect-timeout-s", "20", "--out", str(tmp_path / "tx"), "--json"],
                            capture_output=True, text=True, timeout=120)
        out, err = rx.communicate(timeout=120)
    finally:
        rx.kill()
        if proxy is not None:
            proxy.close()
    assert proxy.injected == 1
    # the sender: told by the receiver, exit 1, the reason in its result
    assert tx.returncode == 1, tx.stderr
    sent = json.loads(tx.stdout)
    assert sent["status"] == "receiver-failed", sent
    assert "corrupted" in sent["error"] and "connection 0" in sent["error"]
    # the receiver: the run failed as corrupted, with the reason, exit 1
    assert rx.returncode == 1, err
    (run,) = json.loads(out)["runs"]
    assert run["status"] == "corrupted" and run["failure"].startswith("connection 0: ")
    assert run["params"]["max_packet_bytes"] == 172      # the voip profile's packets bound the lengths
    assert "RTP version 0" in run["failure"]          # the next valid frame's length prefix
    # what came before the garbage is kept; nothing behind it was swallowed as a message body
    assert run["received_packets"] == GOOD_FRAMES
    assert read_records(tmp_path / "rx", "received").column("seq").to_pylist() == list(range(GOOD_FRAMES))
    assert read_run_metadata(tmp_path / "rx")["receiver"]["status"] == "corrupted"
    assert read_run_metadata(tmp_path / "tx")["sender"]["status"] == "receiver-failed"

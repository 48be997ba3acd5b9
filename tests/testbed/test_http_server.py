"""nginx in a testbed host (testbed/http_server.py) serves a file across the emulated link, byte
for byte, with the host's congestion control on its socket — read back from nginx's own
connection (transport/borrowed_socket.py) — and leaves no process behind."""

import hashlib
import os
import socket
import time

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.testbed import LinkSpec, Testbed
from tcpdelay.testbed.http_server import NginxServer
from tcpdelay.testbed.netns import unavailable_reason
from tcpdelay.testbed.spec import parse_spec

pytestmark = [pytest.mark.testbed, pytest.mark.skipif(unavailable_reason() is not None,
                                                      reason=str(unavailable_reason()))]


def _get(address: str, port: int, path: str, slow_s: float = 0.0) -> dict:
    """In a testbed host: GET the file, reading slowly at first (so the server is still sending)."""
    s = socket.create_connection((address, port), timeout=30)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = b""
    t = time.monotonic()
    while True:
        if time.monotonic() - t < slow_s:
            time.sleep(0.05)
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        data += chunk
    s.close()
    head, body = data.split(b"\r\n\r\n", 1)
    return {"status": int(head.split()[1]), "sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)}


def _variant_of_connections(pids: list[int], port: int) -> list[str]:
    from tcpdelay.transport import borrowed_socket

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = borrowed_socket.borrow_connections(pids, port)
        if got:
            out = [s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
                   for _, _, s in got]
            for _, _, s in got:
                s.close()
            return out
        time.sleep(0.02)
    return []


@pytest.mark.parametrize("cc", ["cubic", "ccp"])
def test_nginx_serves_a_file_with_the_hosts_variant_and_goes(tmp_path, cc):
    www = tmp_path / "www"
    www.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(www, 0o755)
    payload = os.urandom(3_000_000)
    (www / "f.bin").write_bytes(payload)
    os.chmod(www / "f.bin", 0o644)
    spec = parse_spec({"hosts": [{"name": "srv", "side": "left", "tcp": {"congestion_control": cc}},
                                 {"name": "cli", "side": "right"}],
                       "link": LinkSpec.symmetric(delay_s=0.01, rate_bps=20e6, queue_packets=100).model_dump()})
    with Testbed(spec) as tb:
        kernel = tb.kernel_name(cc)
        with NginxServer(tb.hosts["srv"], www, 8080, tmp_path / "nginx") as srv:
            pids = srv.pids()
            assert len(pids) == 2                              # master and one worker
            got = tb.hosts["cli"].spawn(_get, tb.hosts["srv"].address, 8080, "/f.bin", slow_s=1.0)
            used = tb.hosts["srv"].call(_variant_of_connections, pids, 8080, timeout_s=30)
            res = got.result(timeout_s=60)
        served = srv.served()
        assert all(not os.path.exists(f"/proc/{p}") for p in pids)
    assert res == {"status": 200, "sha256": hashlib.sha256(payload).hexdigest(), "bytes": len(payload)}
    assert used == [kernel]
    assert served["requests"][0]["status"] == 200 and served["bytes_sent"] >= len(payload)


def test_bad_input_is_one_line(tmp_path):
    class Host:
        address = "10.0.0.1"
    with pytest.raises(ParameterError, match="port"):
        NginxServer(Host(), tmp_path, 70000, tmp_path / "w")
    with pytest.raises(ParameterError, match="not a directory"):
        NginxServer(Host(), tmp_path / "missing", 8080, tmp_path / "w")

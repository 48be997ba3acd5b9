"""Cross-traffic generators on loopback: bulk, on/off web, page loads, constant-rate UDP."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
from hypothesis import given, strategies as st

from tcpdelay.errors import ParameterError
from tcpdelay.traffic import bulk, page_load, response_server, udp_background, web_onoff

LO = "127.0.0.1"


def free_port(kind=socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((LO, 0))
        return s.getsockname()[1]


class Background:
    """Run ``fn`` in a thread and keep its return value."""

    def __init__(self, fn, *args, **kw):
        self.value = None
        self.ready = threading.Event()
        if "ready" in fn.__code__.co_varnames:
            kw["ready"] = self.ready
        else:
            self.ready.set()
        self.thread = threading.Thread(target=self._run, args=(fn, args, kw), daemon=True)
        self.thread.start()
        assert self.ready.wait(5)

    def _run(self, fn, args, kw):
        self.value = fn(*args, **kw)

    def result(self, timeout=15):
        self.thread.join(timeout)
        assert not self.thread.is_alive()
        return self.value


def test_request_round_trip_and_bounds():
    data = response_server.encode_request(1000, None, 512, "reno")
    assert len(data) == 54
    # any name the kernel takes (up to 15 characters) crosses, e.g. the BPF port "tdwestwoodp"
    longest = response_server.encode_request(1000, None, 512, "tdwestwoodp0123")
    assert response_server.decode_request(longest).congestion_control == "tdwestwoodp0123"
    with pytest.raises(ParameterError, match="longer than 15 characters"):
        response_server.encode_request(1000, None, 512, "tdwestwoodp01234")
    assert response_server.decode_request(data) == (1000, None, 512, "reno", None, 0)
    assert response_server.decode_request(response_server.encode_request(None, 0.05, 512)) == (None, 0.05, 512, None, None, 0)
    paced = response_server.decode_request(response_server.encode_request(None, 3.0, 512, gap_mean_s=0.05, seed=7))
    assert (paced.gap_mean_s, paced.seed, paced.duration_s) == (0.05, 7, 3.0)
    with pytest.raises(ParameterError, match="gap_mean_s"):
        response_server.encode_request(None, 1.0, 512, gap_mean_s=1e-6)
    with pytest.raises(ParameterError, match="needs size_bytes or duration_s"):
        response_server.encode_request(None, None, 512)
    with pytest.raises(ParameterError, match="write_bytes"):
        response_server.encode_request(10, None, 0)


@given(st.binary(min_size=0, max_size=60))
def test_malformed_requests_are_rejected_cleanly(data):
    try:
        size, dur, write, cc, gap, seed = response_server.decode_request(data)
    except ValueError:
        return
    assert data[:4] == b"TDX3" and 1 <= write <= 65535 and (dur is None or dur < 1e7)
    assert gap is None or gap >= response_server.MIN_GAP_S


def test_bulk_sized_unlimited_and_congestion_control():
    port = free_port()
    srv = Background(bulk.server, port, duration_s=2.0, host=LO)
    sized = bulk.client(LO, port, size_bytes=2_000_000, duration_s=5, congestion_control="reno")
    assert sized["complete"] and sized["bytes"] == 2_000_000 and sized["goodput_bps"] > 0
    t = time.monotonic()
    unlimited = bulk.client(LO, port, duration_s=0.4, congestion_control="bbr")
    # it ran its whole duration, however fast loopback is, and no longer than its drain bound
    assert 0.4 <= time.monotonic() - t < 0.4 + 5.0 + 1.0
    assert unlimited["complete"] and unlimited["bytes"] > 100_000
    stats = srv.result()
    assert stats["connections"] == 2 and stats["rejected"] == 0
    assert stats["bytes_sent"] == 2_000_000 + unlimited["bytes"]
    assert stats["congestion_controls"] == ["bbr", "reno"]
    assert stats["responses_completed"] == 2


def test_server_deadline_and_byte_cap_bound_every_response():
    port = free_port()
    srv = Background(response_server.serve, port, duration_s=0.8, host=LO, max_response_bytes=50_000)
    capped = response_server.fetch(LO, port, size_bytes=10_000_000)
    assert capped["bytes"] == 50_000 and not capped["complete"]
    t = time.monotonic()
    cut = response_server.fetch(LO, port, duration_s=30.0, write_bytes=1000)
    assert time.monotonic() - t < 15.0  # the server's 0.8 s deadline ended the 30 s request
    assert not cut["complete"]  # ... short of its duration, and the client says so
    with socket.create_connection((LO, port)) as junk:
        junk.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 14)
        assert junk.recv(10) == b""
    stats = srv.result()
    assert stats["rejected"] == 1 and cut["bytes"] <= 50_000
    assert stats["max_response_bytes"] == 50_000 and stats["capped_responses"] >= 1 and stats["warnings"]


def test_the_server_takes_every_waiting_connection_at_once():
    """The accept queue is emptied at each wake-up (a starved server that took one per wake-up
    left connections there until its deadline, which reset them): five clients connected before
    the server looks are taken in one call, which does not block once the queue is empty and
    leaves the listening socket as it was."""
    with socket.socket() as srv:
        srv.bind((LO, 0))
        srv.listen(16)
        srv.settimeout(0.1)
        clients = [socket.create_connection(srv.getsockname()) for _ in range(5)]
        try:
            time.sleep(0.05)    # the handshakes complete in the kernel
            taken = response_server._accept_waiting(srv)
            assert len(taken) == 5 and srv.gettimeout() == 0.1
            assert response_server._accept_waiting(srv) == []
            for conn in taken:
                conn.close()
        finally:
            for c in clients:
                c.close()


def test_a_burst_of_clients_is_served_every_one():
    """Eighty clients at once (a 100-web-flow scenario's burst at its start): every one gets its
    whole response, none is left unaccepted."""
    port = free_port()
    srv = Background(response_server.serve, port, duration_s=4.0, host=LO)
    out: list[dict] = []
    threads = [threading.Thread(target=lambda: out.append(response_server.fetch(LO, port, size_bytes=20_000)))
               for _ in range(80)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    stats = srv.result(timeout=20)
    assert len(out) == 80 and all(r["complete"] and r["bytes"] == 20_000 for r in out), out
    assert stats["connections"] == 80 and stats["responses_completed"] == 80 and stats["rejected"] == 0


def test_response_limit_unlimited_means_unlimited():
    assert response_server.response_limit(None, None) == float("inf")  # no cap at all by default
    assert response_server.response_limit(10, None) == 10
    assert response_server.response_limit(None, 2**31) == 2**31  # a cap, only when one is given
    assert response_server.response_limit(2**40, 2**31) == 2**31
    with pytest.raises(ParameterError, match="max_response_bytes"):
        response_server.serve(free_port(), duration_s=1.0, host=LO, max_response_bytes=0)


def test_an_unlimited_download_is_not_capped_and_runs_its_duration():
    port = free_port()
    srv = Background(bulk.server, port, duration_s=3.0, host=LO)
    t = time.monotonic()
    res = response_server.fetch(LO, port, duration_s=1.0)
    assert time.monotonic() - t >= 1.0 and res["complete"], res
    stats = srv.result()
    assert stats["max_response_bytes"] is None and stats["capped_responses"] == 0 and not stats["warnings"]
    assert stats["bytes_sent"] == res["bytes"] > 0  # whatever the rate: beyond 2 GiB where loopback can


def test_a_cap_that_cuts_an_unlimited_download_is_reported_and_warned(caplog):
    port = free_port()
    srv = Background(response_server.serve, port, duration_s=4.0, host=LO, max_response_bytes=1_000_000)
    with caplog.at_level("WARNING", logger="tcpdelay.traffic.response_server"):
        res = bulk.client(LO, port, duration_s=3.0)
        stats = srv.result()
    assert res["bytes"] == 1_000_000 and not res["complete"], res  # cut short, and not silently
    assert stats["capped_responses"] == 1 and stats["max_response_bytes"] == 1_000_000
    assert "max_response_bytes" in stats["warnings"][0]
    assert any("cap of 1000000 bytes" in r.getMessage() for r in caplog.records)


def test_bulk_client_waits_for_its_start():
    port = free_port()
    srv = Background(bulk.server, port, duration_s=1.5, host=LO)
    start = time.monotonic() + 0.3
    res = bulk.client(LO, port, size_bytes=10_000, duration_s=2, start_at=start)
    assert res["start_s"] == start and time.monotonic() >= start and res["complete"]
    srv.result()


def test_web_onoff_draws_exponential_on_and_off_from_the_seed():
    port = free_port()
    srv = Background(web_onoff.server, port, duration_s=1.6, host=LO)
    res = web_onoff.client(LO, port, duration_s=1.0, on_mean_s=0.05, off_mean_s=0.05, packet_size_bytes=512, seed=42)
    stats = srv.result()
    n = res["exchanges"]
    assert 4 <= n <= 15  # about 1 s / (50 ms on + 50 ms off + connection set-up)
    rng = np.random.default_rng(42)
    expected = [(rng.exponential(0.05), rng.exponential(0.05)) for _ in range(n)]
    assert res["on_s"] == pytest.approx([e[0] for e in expected])
    assert res["off_s"] == pytest.approx([e[1] for e in expected])
    assert res["failed"] == 0 and res["bytes"] > 0
    assert stats["connections"] == n
    assert stats["mss_bytes"] == [512]  # every data segment carries at most 512 bytes
    assert 0.95 < res["duration_s"] < 1.5


def test_web_poisson_mode_sends_512_byte_messages_at_exponential_gaps_on_one_connection():
    # tg's "arrival exponential 0.05 length constant 512": 81.9 kb/s offered, one connection
    port = free_port()
    srv = Background(web_onoff.server, port, duration_s=4.0, host=LO)
    res = web_onoff.client(LO, port, duration_s=3.0, mode="poisson", gap_mean_s=0.01,
                           packet_size_bytes=512, seed=3)
    stats = srv.result()
    assert res["mode"] == "poisson" and res["exchanges"] == stats["connections"] == 1 and res["failed"] == 0
    assert stats["mss_bytes"] == [512]
    # ~300 messages of 512 bytes in 3 s (Poisson: sd ~ sqrt(300) = 17)
    assert res["bytes"] % 512 == 0 and 240 <= res["bytes"] / 512 <= 360


def test_paced_response_follows_the_seeded_poisson_schedule():
    # Over a socket pair: every write is one message. The program never writes ahead of its
    # schedule (a faster machine is not earlier) and never past its stop; how many arrivals a
    # busy machine lets it write in time is the machine's, so it is not bounded from below.
    rng = np.random.default_rng(5)
    arrivals = np.cumsum(rng.exponential(0.02, 200))
    payload = memoryview(b"x" * 4096)

    a, b = socket.socketpair()
    a.settimeout(0.05)
    t0 = time.monotonic()
    sent = response_server._paced(a, payload, 100, 20 * 100, t0 + 100.0, 0.02, seed=5)
    elapsed = time.monotonic() - t0
    a.close()
    assert sent == 2000 and len(b.recv(1 << 20, socket.MSG_WAITALL)) == 2000
    assert elapsed >= arrivals[19] - 1e-3            # the 20th message waited for its instant

    a, b = socket.socketpair()
    a.settimeout(0.05)
    t0 = time.monotonic()
    sent = response_server._paced(a, payload, 100, 10**9, t0 + 1.0, 0.02, seed=5)
    a.close()
    got = b.recv(1 << 20, socket.MSG_WAITALL)
    assert sent == len(got) and sent % 100 == 0
    assert 0 < sent // 100 <= int(np.sum(arrivals < 1.0))   # none after the stop


def test_page_load_fetches_372_kB_over_n_parallel_connections():
    port = free_port()
    srv = Background(page_load.server, port, duration_s=1.5, host=LO)
    start = time.monotonic() + 0.1
    res = page_load.client(LO, port, connections=6, duration_s=1.0, start_at=start)
    stats = srv.result()
    assert res["complete"] and res["bytes"] == 372_000
    assert [c["size_bytes"] for c in res["connections"]] == [62_000] * 6
    assert all(c["bytes"] == 62_000 and 0 <= c["connect_s"] < 0.5 for c in res["connections"])
    assert res["page_load_time_s"] == max(c["done_s"] for c in res["connections"])
    assert stats["connections"] == 6 and stats["bytes_sent"] == 372_000


def test_page_load_start_and_split():
    starts = [page_load.draw_start(seed) for seed in range(200)]
    assert all(10.0 <= s <= 12.0 for s in starts)
    assert 10.7 < np.mean(starts) < 11.3
    assert page_load.draw_start(5) == page_load.draw_start(5)
    assert page_load.split_bytes(10, 3) == [4, 3, 3]
    assert page_load.split_bytes(372_000, 1) == [372_000]
    with pytest.raises(ParameterError, match="cannot split 2 bytes over 3 connections"):
        page_load.split_bytes(2, 3)


def test_udp_constant_rate():
    port = free_port(socket.SOCK_DGRAM)
    sink = Background(udp_background.sink, port, duration_s=1.2, host=LO)
    sent = udp_background.send(LO, port, rate_bps=1e6, packet_size_bytes=1000, duration_s=0.8)
    got = sink.result()
    assert sent["packets"] == 100 and sent["send_errors"] == 0
    assert sent["rate_bps"] == pytest.approx(1e6, rel=0.05)
    assert got["packets"] == 100 and got["lost"] == 0 and got["bytes"] == 100_000
    assert got["highest_seq"] == 99 and got["delay_mean_s"] < 0.05
    with pytest.raises(ParameterError, match="packet_size_bytes"):
        udp_background.send(LO, port, rate_bps=1e6, duration_s=1, packet_size_bytes=8)


def test_the_bulk_server_samples_each_response_connections_tcp_state(tmp_path):
    from tcpdelay.records import read_records

    port = free_port()
    srv = Background(bulk.server, port, duration_s=1.5, host=LO, tcp_state_dir=str(tmp_path),
                     tcp_state_period_s=0.01, flow_ids={LO: 7})
    a = Background(bulk.client, LO, port, duration_s=0.6, congestion_control="reno")
    b = Background(bulk.client, LO, port, duration_s=0.6, congestion_control="cubic")
    assert a.result()["complete"] and b.result()["complete"]
    srv.result()
    t = read_records(tmp_path, "tcp_state")
    assert set(t.column("flow_id").to_pylist()) == {7}
    assert set(t.column("connection").to_pylist()) == {0, 1}
    for c in (0, 1):
        rows = t.filter(t.column("connection").to_numpy() == c)
        times = rows.column("time_s").to_numpy()
        assert np.all(np.diff(times) > 0)
        assert 0.008 < np.median(np.diff(times)) < 0.02
        assert len(times) >= 40                    # 0.6 s at 10 ms, both connections in one loop
        assert np.all(rows.column("cwnd_segments").to_numpy() > 0)
        assert rows.column("delivery_rate_bps").to_numpy()[-1] > 0

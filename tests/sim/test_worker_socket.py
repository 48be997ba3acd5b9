"""The shared ns-3 worker (tcpdelay.sim.worker_socket): the session's own (tests/conftest.py
starts one on demand, its socket in the environment), reached by several connections at once."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from tcpdelay.records import read_records
from tcpdelay.sim.worker import SimulationError, shared_worker
from tcpdelay.sim.worker_socket import SOCKET_ENV, OnDemandWorker, SocketWorker

pytestmark = pytest.mark.ns3

LINK = {"a_to_b": {"delay_s": 0.01, "rate_bps": 1e6, "queue_packets": 50}, "b_to_a": {"delay_s": 0.01}}


def _job_file(tmp_path: Path, name: str, udp_job, packets: int, gap_s: float = 0.02) -> Path:
    job = udp_job(tmp_path, name, LINK, [i * gap_s for i in range(packets)], [200] * packets)
    path = Path(job.out_dir) / "job.json"
    path.write_text(json.dumps(job.to_dict()))
    return path


def test_a_socket_nobody_connects_to_starts_no_worker(tmp_path):
    od = OnDemandWorker(tmp_path / "w.sock")
    time.sleep(0.3)
    assert od.path.exists() and not od.started
    od.close()
    assert not od.path.exists() and not od.started
    with pytest.raises(OSError):
        SocketWorker(tmp_path / "w.sock")


def test_the_session_worker_is_shared():
    """What the suite's processes get from shared_worker(): a connection to the session's worker."""
    assert os.environ.get(SOCKET_ENV), "tests/conftest.py names the session's worker"
    w = shared_worker()
    assert isinstance(w, SocketWorker) and w.alive() and w.path == os.environ[SOCKET_ENV]
    assert w.import_s > 0 and w.warm_up_s > 0


def test_two_connections_run_side_by_side_and_get_the_same_simulation(tmp_path, udp_job):
    """The same job from two connections at once: both complete, in two children, with the same
    counters and packets (each child starts from the worker's clean state)."""
    a, b = SocketWorker(os.environ[SOCKET_ENV]), SocketWorker(os.environ[SOCKET_ENV])
    answers, pids = {}, {}

    def run(w, name):
        answers[name] = w.run(_job_file(tmp_path, name, udp_job, 500), timeout_s=300)
        pids[name] = w.last_pid

    threads = [threading.Thread(target=run, args=(w, n)) for w, n in ((a, "x"), (b, "y"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a.stop()
    b.stop()
    assert answers["x"]["exit"] == answers["y"]["exit"] == 0, answers
    assert pids["x"] != pids["y"]
    x, y = (json.loads((tmp_path / n / "result.json").read_text()) for n in ("x", "y"))
    assert x["counters"] == y["counters"] and x["results"] == y["results"]
    assert x["counters"]["a_to_b"]["packets_out"] == 500 and x["results"]["rx:0"][0]["received_packets"] == 500
    got_x, got_y = (read_records(tmp_path / n, "received") for n in ("x", "y"))
    assert got_x.num_rows == 500 and got_x.equals(got_y)


def test_a_failed_simulation_answers_with_its_error_and_the_worker_serves_on(tmp_path, udp_job):
    w = SocketWorker(os.environ[SOCKET_ENV])
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    answer = w.run(bad, timeout_s=300)
    assert answer["exit"] == 1 and "Job" in w.last_error() and "TypeError" in w.last_error()
    # a line that is not a job: one answer saying so, and the connection still serves
    w._sock.sendall(b"not json\n")
    assert "not a job line" in json.loads(w._file.readline())["error"]
    assert w.run(_job_file(tmp_path, "ok", udp_job, 50), timeout_s=300)["exit"] == 0
    w.stop()


def test_a_client_that_goes_takes_its_simulation_with_it(tmp_path, udp_job):
    """A connection closed mid-job (its process ended or was killed): the worker kills the
    simulation, which never writes its result."""
    path = _job_file(tmp_path, "long", udp_job, 400_000, gap_s=0.001)    # 400 s simulated: minutes here
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ[SOCKET_ENV])
    f = s.makefile("r")
    assert json.loads(f.readline())["ready"]
    s.sendall((json.dumps({"job": str(path)}) + "\n").encode())
    started = json.loads(f.readline())
    pid = started["pid"]
    assert started["started"] == str(path) and os.path.exists(f"/proc/{pid}")
    time.sleep(0.5)
    assert os.path.exists(f"/proc/{pid}")      # still simulating when its client goes
    f.close()
    s.close()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")
    assert not (path.parent / "result.json").exists()


def test_a_socket_whose_worker_cannot_start_says_so(tmp_path):
    """A worker that ends before its hello (here: a Python without tcpdelay) is one error."""
    with OnDemandWorker(tmp_path / "w.sock", python="/bin/false") as od:
        with pytest.raises(SimulationError, match="did not start"):
            SocketWorker(od.path, start_timeout_s=60)
        assert od.started

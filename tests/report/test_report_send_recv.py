"""Issue 54, item 6: ``tcpdelay report`` of a finished ``tcpdelay send``/``recv`` run said "No
media flow in these results ... 1 incomplete" while ``tcpdelay metrics`` showed every packet, and
``report DIR1 DIR2`` of two such runs refused to compare ("has no media flow"): such a run has
no ``complete.json`` (only ``tcpdelay run`` and ``sweep`` write one), and the report left out
every run without it. Its ends' statuses in ``run.json`` now say how it ended."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys

import pytest

from tcpdelay.jsonio import write_json
from tcpdelay.results import load_results

TCPDELAY = [sys.executable, "-m", "tcpdelay"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def send_recv_run(tmp_path_factory):
    """The README's "between two real hosts" on one: recv and send into one directory."""
    run = tmp_path_factory.mktemp("sendrecv") / "r1"
    port = _free_port()
    rx = subprocess.Popen([*TCPDELAY, "recv", "--listen", f"127.0.0.1:{port}", "--out", str(run)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in rx.stderr.readline()
        tx = subprocess.run([*TCPDELAY, "send", "--to", f"127.0.0.1:{port}", "--profile", "voip",
                             "--duration-s", "1", "--out", str(run)], capture_output=True, text=True, timeout=60)
        rx.communicate(timeout=30)
    finally:
        rx.kill()
    assert tx.returncode == 0 and rx.returncode == 0, tx.stderr
    return run


def _tcpdelay(*args, cwd=None):
    return subprocess.run([*TCPDELAY, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_report_of_a_send_recv_run_shows_its_packets(send_recv_run):
    metrics = json.loads(_tcpdelay("metrics", str(send_recv_run), "--json").stdout)
    (flow,) = metrics["flows"]
    assert flow["packets"]["received"] == 50
    res = _tcpdelay("report", str(send_recv_run), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["runs"] == {"complete": 1, "failed": 0, "incomplete": 0}
    (cell,) = doc["cells"]
    (agg,) = cell["flows"]
    assert agg["packets"] == 50 and agg["received"] == 50 and agg["loss_rate"] == 0
    assert "media" in doc["measured"]
    text = _tcpdelay("report", str(send_recv_run), "--out", str(send_recv_run.parent / "r.html")).stdout
    assert "No media flow" not in text and "1 complete, 0 failed, 0 incomplete runs" in text


def test_two_send_recv_runs_compare(send_recv_run):
    other = send_recv_run.parent / "r2"
    shutil.copytree(send_recv_run, other)
    res = _tcpdelay("report", str(send_recv_run), str(other), "--out", str(send_recv_run.parent / "cmp.html"),
                    "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [r["matched_cells"] for r in doc["results"]] == [1, 1] and doc["rows"]


def _copy_with_ends(run, tmp_path, **ends) -> object:
    d = tmp_path / "run"
    shutil.copytree(run, d)
    meta = json.loads((d / "run.json").read_text())
    for end, (status, result) in ends.items():
        meta[end] = {**meta[end], "status": status, "result": {**meta[end]["result"], **result}}
    write_json(d / "run.json", meta)
    return d


def test_an_end_that_did_not_complete_is_a_failed_run_with_its_reason(send_recv_run, tmp_path):
    d = _copy_with_ends(send_recv_run, tmp_path, sender=("receiver-failed", {"error": "the receiver failed the run"}))
    (run,) = load_results(d).cells[0].runs
    assert run.status == "failed" and run.error == "sender receiver-failed: the receiver failed the run"


def test_a_run_still_going_is_incomplete(send_recv_run, tmp_path):
    d = _copy_with_ends(send_recv_run, tmp_path, sender=("running", {}))
    (run,) = load_results(d).cells[0].runs
    assert run.status == "incomplete" and not run.flows


def test_an_interrupted_tcpdelay_run_stays_incomplete(send_recv_run, tmp_path):
    """A run of ``tcpdelay run`` (its summary under ``run``) is complete only with complete.json."""
    d = tmp_path / "run"
    shutil.copytree(send_recv_run, d)
    meta = json.loads((d / "run.json").read_text())
    write_json(d / "run.json", {**meta, "run": {"media": []}})
    (run,) = load_results(d).cells[0].runs
    assert run.status == "incomplete"

"""Scenarios on the ns-3 backend (``--backend ns3``): the same records, metrics and report as the
testbed's; a loss-free run delivers every packet at the one-way delay, a lossy one retransmits
and has a delay tail; the seed fixes the run; what ns-3 lacks is one line at plan time (exit 2);
a killed sweep resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tcpdelay.cli import main
from tcpdelay.experiments.run import run_scenario
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.records import read_records

pytestmark = pytest.mark.ns3

ROOT = Path(__file__).resolve().parents[2]


def _voip(loss_p: float, **over) -> dict:
    return {"name": "voip-ns3", "duration_s": 30, "seed": 1,
            "path": {"rtt_s": 0.1, "rate_bps": 2e6, "queue_packets": 50,
                     "loss": {"model": "bernoulli", "p": loss_p} if loss_p else {"model": "none"}},
            "flows": [{"name": "voip", "profile": "voip", "transport": "tcp", "tcp": {"congestion_control": "reno"}}],
            **over}


def _run(data: dict, out: Path, seed: int = 1) -> dict:
    return run_scenario(parse_scenario(data), seed, out, backend="ns3")


def _delays(out: Path) -> np.ndarray:
    r = read_records(out, "received")
    return np.asarray(r["recv_time_s"]) - np.asarray(r["send_time_s"])


def test_loss_free_tcp_delivers_every_packet_at_the_one_way_delay(worker, tmp_path):
    totals = _run(_voip(0.0), tmp_path / "r")
    assert totals["errors"] == [] and totals["packets_sent"] == totals["packets_received"] == 1500
    d = _delays(tmp_path / "r")
    # 176 bytes of TCP payload + 52 of headers at 2 Mb/s: 0.9 ms on top of 50 ms
    assert np.all(d >= 0.05) and np.all(d < 0.05 + 0.002)
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["clock"] == "ns3-simulation"
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["flows"][0]["packets"]["loss_rate"] == 0.0
    assert run["tcp_stats"][0]["total_retrans"] == 0


def test_two_percent_loss_retransmits_and_has_a_delay_tail(worker, tmp_path):
    totals = _run(_voip(0.02), tmp_path / "r")
    assert totals["packets_received"] == totals["packets_sent"] == 1500       # TCP: late, not lost
    d = _delays(tmp_path / "r")
    assert np.quantile(d, 0.99) > 0.05 + 0.1          # a retransmission costs at least an RTT
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    retx = run["tcp_stats"][0]["total_retrans"]
    drops = run["run"]["link_counters"]["a_to_b"]["drops"]["loss"]
    assert retx >= drops > 10                         # every data segment lost is sent again
    state = read_records(tmp_path / "r", "tcp_state")
    assert state.num_rows > 2000 and max(state["retransmits_total"].to_pylist()) == retx
    assert set(state["ca_state"].to_pylist()) >= {0, 3}   # open and recovery


def test_the_seed_fixes_the_run(worker, tmp_path):
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        _run(_voip(0.02, duration_s=10), tmp_path / name, seed)
    a, b, c = (read_records(tmp_path / n, "received").sort_by("seq") for n in "abc")
    assert a.equals(b) and not a.equals(c)


def test_bulk_cross_traffic_and_the_queue_over_time(worker, tmp_path):
    data = _voip(0.0, duration_s=20, cross=[{"kind": "bulk", "count": 2, "start_s": 2.0}])
    totals = _run(data, tmp_path / "r")
    assert totals["errors"] == []
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    got = [c["result"]["bytes"] for c in run["run"]["cross"]]
    # two bulk flows fill what VoIP leaves of 2 Mb/s for 18 s (4.5 MB between them, within 25 %)
    assert sum(got) == pytest.approx(18 * (2e6 - 70e3) / 8, rel=0.25) and min(got) > 0
    q = read_records(tmp_path / "r", "link_queue")
    assert max(q["packets"].to_pylist()) == run["run"]["link_counters"]["a_to_b"]["peak_queue_packets"] > 20
    d = _delays(tmp_path / "r")
    assert np.median(d) > 0.05 + 0.1                  # VoIP waits behind the bulk flows' queue


def test_bulk_goodput_is_a_rate_the_link_can_carry(worker, tmp_path):
    """One unlimited bulk flow alone on 2 Mb/s for 10 s: its goodput is bytes over the time they
    took to arrive (as on the testbed), so it cannot exceed the link's payload rate although the
    flow's send buffer drains for seconds after it stops (the drain's bytes over the run's
    duration gave papers/004's wired FTP flows 10.4 Mb/s on a 10-Mb/s link)."""
    import pyarrow.parquet as pq

    data = {"duration_s": 10, "path": {"rate_bps": 2e6, "delay_s": 0.02, "queue_packets": 50},
            "cross": [{"kind": "bulk", "count": 1}]}
    totals = _run(data, tmp_path / "r")
    assert totals["errors"] == []
    (flow,) = pq.read_table(tmp_path / "r" / "flows.parquet").to_pylist()
    payload_bps = 2e6 * 1448 / 1500
    assert 0.8 * payload_bps < flow["goodput_bps"] <= payload_bps * 1.01, flow
    assert flow["bytes_received"] * 8 / 10 > payload_bps      # bytes did arrive after the 10 s


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def _cli_here(capsys, *args: str) -> tuple[int, str, str]:
    """``tcpdelay ARGS`` in this process: (exit status, stdout, stderr). Its simulations go to the
    session's ns-3 worker; a command run as a process starts one of its own, ~20 s of CPU to
    import ns-3 and compile tcpdelay's C++ parts, more than a short run. The tests that need a
    process of their own (a kill, an exit status, the worker's own temporary files) use _cli."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    got = capsys.readouterr()
    return exc.value.code, got.out, got.err


@pytest.mark.parametrize("cc, what", [("compound", "'compound' is not in ns-3 3.44"),
                                      ("westwood", "'westwood' is not in ns-3 3.44")])
def test_a_variant_ns3_lacks_is_one_line_and_exit_2(tmp_path, cc, what):
    sc = tmp_path / "s.toml"
    sc.write_text(f'duration_s = 5\n[path]\nrtt_s = 0.1\n[[flows]]\nprofile = "voip"\n'
                  f'tcp = {{ congestion_control = "{cc}" }}\n')
    proc = _cli("run", str(sc), "--backend", "ns3", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and what in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_report_reads_an_ns3_run(worker, tmp_path):
    _run(_voip(0.01, duration_s=10), tmp_path / "r" / "seed-1")
    proc = _cli("report", str(tmp_path / "r"), "--out", str(tmp_path / "r.html"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r.html").stat().st_size > 1000


def _descendants(pid: int) -> set[int]:
    """The processes below ``pid`` (by /proc/PID/stat's parent)."""
    parent = {}
    for proc_dir in Path("/proc").iterdir():
        if proc_dir.name.isdigit():
            try:
                stat = (proc_dir / "stat").read_text()
            except OSError:
                continue
            parent[int(proc_dir.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in found]
        found.update(kids)
        todo.extend(kids)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_sweep_resumes(tmp_path, worker, capsys):
    """A sweep killed mid-run (with an ns-3 worker of its own: the session's shared one is not in
    its environment, so this is the path of a ``tcpdelay sweep`` run by hand) leaves nothing
    running: its worker and the simulation die with it (PR_SET_PDEATHSIG), and the worker's
    temporary files are gone (it removes them once it has imported ns-3 and warmed up; the sweep
    gets a temporary directory of its own, TMPDIR, so that what is there is its own whatever the
    tests beside it make in /tmp). Run again, it resumes where it was killed."""
    from tcpdelay.sim.worker_socket import SOCKET_ENV

    sc = tmp_path / "s.toml"
    # 20 s runs: long enough that the kill lands between the first run's end and the sixth's
    sc.write_text('name = "k"\nduration_s = 20\nrepetitions = 3\n[path]\nrtt_s = 0.1\nloss = { model = "bernoulli", p = 0.01 }\n'
                  '[[flows]]\nprofile = "voip"\n[sweep]\n"path.rtt_s" = [0.02, 0.1]\n')
    out = tmp_path / "o"
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != SOCKET_ENV}, "TMPDIR": str(own_tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "tcpdelay", "sweep", str(sc), "--backend", "ns3", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=env)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(list(out.glob("cells/*/seed-*/complete.json"))) < 1:
        time.sleep(0.2)
    below = _descendants(proc.pid)     # its ns-3 worker (and the simulation it runs, if any)
    assert below
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(out.glob("cells/*/seed-*/complete.json")))
    assert 1 <= done_before < 6
    # the worker and its simulation die with the sweep, not only its process group
    deadline = time.monotonic() + 10
    while any(map(_alive, below)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in below if _alive(p)]
    assert sorted(p.name for p in own_tmp.iterdir()) == []
    code, stdout, stderr = _cli_here(capsys, "sweep", str(sc), "--backend", "ns3", "--out", str(out), "--json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["skipped"] == done_before and doc["ran"] == 6 - done_before
    assert all(r["status"] == "complete" for r in doc["runs"])


def test_every_cross_traffic_kind_runs_as_request_and_response(worker, tmp_path):
    data = _voip(0.0, duration_s=12, cross=[
        {"kind": "page_load", "connections": 6, "total_bytes": 372_000, "start_s": 2.0, "start_spread_s": 0.0},
        {"kind": "web_onoff", "mode": "connections", "count": 2, "on_mean_s": 0.05, "off_mean_s": 0.05},
        {"kind": "web_onoff", "mode": "poisson", "gap_mean_s": 0.05, "packet_size_bytes": 512},
        {"kind": "udp", "rate_bps": 200e3, "packet_size_bytes": 1000, "start_s": 1.0},
        {"kind": "bulk", "size_bytes": 200_000, "start_s": 5.0},
    ])
    totals = _run(data, tmp_path / "r")
    assert totals["errors"] == []
    cross = {c["name"]: c for c in json.loads((tmp_path / "r" / "run.json").read_text())["run"]["cross"]}
    page = cross["cross0-page_load"]["result"]
    assert page["complete"] and page["bytes"] == 372_000 and len(page["connections"]) == 6
    # a page load takes at least the handshake and the request: two RTTs, more with slow start
    assert page["page_load_time_s"] > 0.2 and all(c["connect_s"] >= 0.1 for c in page["connections"])
    for k in ("cross1-web_onoff#0", "cross1-web_onoff#1"):
        web = cross[k]["result"]
        assert web["exchanges"] > 10 and web["bytes"] > 0 and web["failed"] == 0
    poisson = cross["cross2-web_onoff"]["result"]
    assert poisson["exchanges"] == 1
    assert poisson["bytes"] == pytest.approx(12 * 512 / 0.05, rel=0.2)     # 82 kb/s offered and carried
    udp, sink = cross["cross3-udp"]["result"], cross["cross3-udp"]["sink"]
    assert udp["packets"] == 275 and sink["packets"] == 275 - sink["lost"] > 0.9 * 275   # 11 s x 25/s; the
    # queue, full of the page load's bursts, may drop a few
    bulk = cross["cross4-bulk"]["result"]
    assert bulk["complete"] and bulk["bytes"] == 200_000
    state = read_records(tmp_path / "r", "tcp_state")
    assert {cross[k]["flow_id"] for k in cross if "udp" not in k} <= set(state["flow_id"].to_pylist())


def test_timed_transfers_give_the_testbeds_rows(worker, tmp_path):
    """The transfers kind in ns-3: one row per transfer in the testbed's schema; without loss a
    handshake is one RTT and a 16-segment transfer on IW3 is three rounds (3 + 6 + 7 segments,
    growth per segment acknowledged); with SYN/ACK and data loss some handshakes back off by
    ns-3's 3-s SYN timeout and some transfers are classed rto."""
    tcp = {"preset": "newreno-2008", "no_metrics_save": True}
    data = {"name": "transfers-ns3", "duration_s": 20, "seed": 1, "tcp_state_period_s": 0,
            "path": {"rtt_s": 0.1}, "cross": [{"kind": "transfers", "size_bytes": 16 * 1448, "transfers": 5,
                                               "gap_s": 0.1, "tcp": tcp}]}
    assert _run(data, tmp_path / "clean")["errors"] == []
    rows = json.loads((tmp_path / "clean" / "run.json").read_text())["run"]["cross"][0]["result"]["transfers"]
    assert [r["index"] for r in rows] == list(range(5)) and all(r["complete"] for r in rows)
    for r in rows:
        assert r["class"] == "no_loss" and r["retransmits"] == 0 and r["rtos"] == 0 and r["syn_retransmits"] == 0
        assert r["handshake_s"] == pytest.approx(0.1, abs=1e-3) and r["transfer_s"] == pytest.approx(0.3, abs=2e-3)
        assert r["bytes"] == 16 * 1448
    lossy = {**data, "duration_s": 300, "path": {"rtt_s": 0.1, "forward": {"loss": {"model": "bernoulli", "p": 0.3}}},
             "cross": [{**data["cross"][0], "size_bytes": 4 * 1448, "transfers": 30}]}
    assert _run(lossy, tmp_path / "lossy")["errors"] == []
    rows = json.loads((tmp_path / "lossy" / "run.json").read_text())["run"]["cross"][0]["result"]["transfers"]
    done = [r for r in rows if r["complete"]]
    assert len(done) >= 25
    backoffs = {round(r["handshake_s"] - 0.1) for r in done}
    assert 0 in backoffs and backoffs & {3, 9}, backoffs          # SYN/ACK losses cost 3 s, 3 + 6 s
    assert {r["class"] for r in done} >= {"no_loss", "rto"}
    assert all((r["class"] == "rto") == (r["rtos"] > 0) for r in done)


def _transfer_rows(tmp_path: Path, name: str, d: int, tcp: dict, *, mtu: int = 1500, transfers: int = 3,
                   rtt: float = 0.064, duration_s: float = 60) -> tuple[list[dict], dict]:
    mss = tcp.get("mss_bytes", 1448)
    data = {"name": name, "duration_s": duration_s, "seed": 1, "tcp_state_period_s": 0,
            "path": {"rtt_s": rtt, "mtu_bytes": mtu},
            "cross": [{"kind": "transfers", "size_bytes": d * mss, "transfers": transfers, "gap_s": 0.1,
                       "tcp": {"preset": "newreno-2008", "no_metrics_save": True, **tcp}}]}
    assert _run(data, tmp_path / name)["errors"] == []
    run = json.loads((tmp_path / name / "run.json").read_text())["run"]
    return run["cross"][0]["result"]["transfers"], run["link_counters"]


def test_transfers_take_the_scenarios_mss_and_keep_to_eq_15(worker, tmp_path):
    """tcp.mss_bytes = 536 (papers/001's smallest MSS): every data segment carries 536 bytes (the
    rows say so, and the link carried d of them per transfer), and the time of d = 64 segments is
    eq (15)'s for that d, within one RTT. MSS 4312 needs the 9000-byte MTU: its segments cross
    the link whole."""
    from tcpdelay.model.transfer import transfer_time_s

    rtt, d = 0.064, 64
    rows, counters = _transfer_rows(tmp_path, "mss536", d, {"mss_bytes": 536}, rtt=rtt)
    assert len(rows) == 3 and all(r["complete"] and r["class"] == "no_loss" for r in rows), rows
    model = float(transfer_time_s(d, 0.0, rtt, w1=3, b=1))
    for r in rows:
        assert r["mss_bytes"] == 536 and r["bytes"] == d * 536
        assert abs(r["transfer_s"] - model) <= rtt, (r["transfer_s"], model)
    # d data segments a transfer, plus at most three without data (SYN/ACK, ACKs, FIN): none larger
    assert 3 * d < counters["a_to_b"]["packets_out"] <= 3 * (d + 3)
    rows, counters = _transfer_rows(tmp_path, "mss4312", 16, {"mss_bytes": 4312}, mtu=9000, rtt=rtt)
    assert all(r["mss_bytes"] == 4312 and r["complete"] for r in rows), rows
    assert 3 * 16 < counters["a_to_b"]["packets_out"] <= 3 * (16 + 3)        # not fragmented
    assert counters["a_to_b"]["bytes_out"] > 3 * 16 * 4312


def test_a_window_clamp_is_eq_15s_w_max(worker, tmp_path):
    """tcp.window_clamp_bytes = 8 segments: a 256-segment transfer is window-limited as eq (15)
    with W_max = 8 has it (within one RTT), and clearly longer than without the clamp."""
    from tcpdelay.model.transfer import transfer_time_s

    rtt, d, mss = 0.064, 256, 536
    rows, _ = _transfer_rows(tmp_path, "clamp8", d, {"mss_bytes": mss, "window_clamp_bytes": 8 * mss}, rtt=rtt,
                             transfers=2)
    free, _ = _transfer_rows(tmp_path, "free", d, {"mss_bytes": mss}, rtt=rtt, transfers=2)
    model = float(transfer_time_s(d, 0.0, rtt, w1=3, b=1, w_max=8))
    assert model > 4 * float(transfer_time_s(d, 0.0, rtt, w1=3, b=1))
    for r, f in zip(rows, free):
        assert r["complete"] and r["class"] == "no_loss" and r["window_clamp_bytes"] == 8 * mss, r
        assert abs(r["transfer_s"] - model) <= rtt, (r["transfer_s"], model)
        assert r["transfer_s"] > 3 * f["transfer_s"], (r["transfer_s"], f["transfer_s"])


def test_validate_on_ns3_sets_the_simulation_against_the_model(tmp_path, worker, capsys):
    out = tmp_path / "v"
    code, stdout, stderr = _cli_here(capsys, "validate", "--backend", "ns3", "--duration-s", "20", "--loss", "0.01",
                                     "--profile", "voip", "--out", str(out), "--json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    (point,) = doc["points"]
    assert point["stack"] == "newreno-2008"         # ns-3's only stack: no RACK/TLP for linux-default
    # Brosh et al. §5.1: the model's mean within 10 % for VoIP at RTT 100 ms, 1 %
    assert abs(point["relative_error"]["mean_s"]) <= 0.1, point["relative_error"]
    assert point["measured"]["tcp_retransmissions"] > 0
    run = json.loads(next(out.glob("cells/*/seed-*/run.json")).read_text())
    assert run["clock"] == "ns3-simulation"
    bad = _cli("validate", "--backend", "ns3", "--stack", "linux-default", "--out", str(tmp_path / "w"))
    assert bad.returncode == 2 and "RACK" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_relative_output_directory_works_and_the_command_leaves_nothing(tmp_path):
    # The run gets a temporary directory of its own (TMPDIR), so what it leaves there is its own,
    # whatever other tests running beside it create in the machine's /tmp (an ns-3 worker's own
    # files: test_a_killed_sweep_resumes).
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    sc = tmp_path / "s.toml"
    sc.write_text('duration_s = 5\n[path]\nrtt_s = 0.1\n[[flows]]\nprofile = "voip"\n')
    proc = subprocess.run([sys.executable, "-m", "tcpdelay", "run", "s.toml", "--backend", "ns3", "--out", "rel", "--json"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "TMPDIR": str(own_tmp)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["runs"][0]["status"] == "complete"
    assert (tmp_path / "rel" / "seed-1" / "received").is_dir()
    assert sorted(p.name for p in own_tmp.iterdir()) == []


def test_parallel_connections_split_and_proactive_drop(worker, tmp_path):
    def flow_run(name, heuristics, **path):
        data = _voip(0.0, duration_s=10, path={"rtt_s": 0.1, "rate_bps": path.get("rate_bps", 2e6),
                                              "queue_packets": 50, "loss": path.get("loss", {"model": "none"})})
        data["flows"][0]["profile"] = "video"
        data["flows"][0]["heuristics"] = heuristics
        _run(data, tmp_path / name)
        run = json.loads((tmp_path / name / "run.json").read_text())["run"]
        return run, read_records(tmp_path / name, "sent"), read_records(tmp_path / name, "received")

    run, sent, got = flow_run("blind", {"connections": 3, "scheduler": "blind"})
    conns = sent["connection"].to_pylist()
    assert conns[:6] == [0, 1, 2, 0, 1, 2] and got.num_rows == sent.num_rows
    tx = run["media"][0]["sender"]
    assert tx["connections"] == 3 and len(tx["tcp_info_end"]) == 3 and max(tx["per_connection_packets"]) - min(tx["per_connection_packets"]) <= 1
    assert set(read_records(tmp_path / "blind", "tcp_state")["connection"].to_pylist()) == {0, 1, 2}
    assert sorted(got["connection"].to_pylist()) == sorted(conns)

    run, sent, got = flow_run("intelligent", {"connections": 3, "scheduler": "intelligent"},
                              loss={"model": "bernoulli", "p": 0.02})
    assert set(sent["connection"].to_pylist()) == {0, 1, 2} and got.num_rows == sent.num_rows

    run1, sent1, _ = flow_run("split1", {"split": 1})
    run4, sent4, got4 = flow_run("split4", {"split": 4})
    tx1, tx4 = run1["media"][0]["sender"], run4["media"][0]["sender"]
    n = tx1["packets"]
    assert tx4["rtp_packets"] > 3 * n and tx4["wire_bytes"] - tx1["wire_bytes"] == 2 * (tx4["rtp_packets"] - n)
    assert got4.num_rows == sent4.num_rows

    # a 300 kb/s link for a 573 kb/s video: the backlog grows; with a 0.2 s bound the sender skips
    run, sent, got = flow_run("drop", {"proactive_drop_s": 0.2}, rate_bps=300e3)
    dropped = sent["dropped"].to_pylist()
    assert run["media"][0]["sender"]["dropped_packets"] == sum(dropped) > 0
    assert not set(got["seq"].to_pylist()) & {i for i, d in enumerate(dropped) if d}
    assert all(c == -1 for c, d in zip(sent["connection"].to_pylist(), dropped) if d)


@pytest.mark.parametrize("profile", ["voip", "voip-low", "ivideo", "ivideo-low", "video", "video-low", "audio-16k",
                                     "voip-onoff", "mpeg4-tes", "video-trace"])
def test_every_media_profile_runs_with_its_frames(worker, tmp_path, profile):
    flow = {"name": "m", "profile": profile, "transport": "tcp"}
    if profile == "mpeg4-tes":
        flow["rate_bps"] = 500e3
    if profile == "video-trace":
        trace = tmp_path / "frames.txt"
        trace.write_text("".join(f"{'I' if k % 12 == 0 else 'P'} {9000 if k % 12 == 0 else 2500}\n" for k in range(300)))
        flow["trace"] = str(trace)
    data = _voip(0.0, duration_s=8)
    data["flows"] = [flow]
    totals = _run(data, tmp_path / "r")
    assert totals["errors"] == [] and totals["packets_sent"] == totals["packets_received"] > 0
    sent = read_records(tmp_path / "r", "sent")
    if profile in ("mpeg4-tes", "video-trace"):          # frames: ids, types and each frame's last packet
        assert set(sent["frame_type"].to_pylist()) >= {"I", "P"} and max(sent["frame_id"].to_pylist()) > 10
        assert sum(sent["frame_last"].to_pylist()) == len(set(sent["frame_id"].to_pylist()))
    if profile == "voip-onoff":                          # silences: gaps of about a second in the send times
        t = np.asarray(sent["send_time_s"])
        assert np.diff(t).max() > 0.3


ACCESS = {"name": "access", "duration_s": 10, "seed": 1,
          "path": {"rtt_s": 0.05, "rate_bps": 10e6, "queue_packets": 30},
          "access": {"delay_s": 0.01, "rate_bps": 1e6, "right": {"loss": {"model": "bernoulli", "p": 0.05}}},
          "flows": [{"name": "v", "profile": "voip", "count": 2, "transport": "udp"}]}


def test_access_links_are_simulated_per_host(tmp_path):
    """papers/004's topology: each flow's sender and receiver reach the bottleneck through their
    own emulated link; the delay is the three links' plus two serializations at 1 Mb/s, the
    sinks' loss is their own, counted per host as on the testbed."""
    _run(ACCESS, tmp_path)
    run = json.loads((tmp_path / "run.json").read_text())["run"]
    access = run["link_counters"]["access"]
    assert set(access) == {"ltx0", "ltx1", "rrx0", "rrx1"}
    sent = 10 / 0.02
    for host in ("ltx0", "ltx1"):
        assert access[host]["a_to_b"]["packets_in"] == sent and access[host]["a_to_b"]["drops"]["total"] == 0
    losses = [access[h]["b_to_a"]["drops"]["loss"] for h in ("rrx0", "rrx1")]
    assert all(0.02 * sent < n < 0.09 * sent for n in losses) and losses[0] != losses[1]   # own loss processes
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["queue"]["a_to_b"]["samples"] > 0           # the bottleneck's queue over the run
    flows = metrics["flows"]
    serialization = 2 * (200 * 8 / 1e6)          # a 172-byte packet + IP/UDP headers, twice at 1 Mb/s
    for f in flows:
        assert f["delay"]["mean_s"] == pytest.approx(0.045 + serialization, abs=0.002)
        assert f["packets"]["loss_rate"] == pytest.approx(losses[f["flow_id"]] / sent, abs=0.01)

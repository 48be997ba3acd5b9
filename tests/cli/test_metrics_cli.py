"""``tcpdelay metrics`` and the run summary on a small synthetic run worked out by hand."""

import json
import math

import pytest

from tcpdelay.cli import main
from tcpdelay.metrics import MetricOptions
from tcpdelay.results.runs import summarize_run
from tcpdelay.records import RecordWriter, write_run_metadata


@pytest.fixture
def cbr_run(tmp_path):
    """100 packets of 172 B every 20 ms; delay 50 ms; seq 10-14 lost; seq 50 takes 300 ms.
    A second flow (id 1) of 50 packets, none lost, delay 50 ms, for the fairness index."""
    with RecordWriter(tmp_path, "sent", writer_id="s") as ws, \
            RecordWriter(tmp_path, "received", writer_id="r") as wr:
        for fid, n in ((0, 100), (1, 50)):
            for seq in range(n):
                t = seq * 0.02
                ws.append(flow_id=fid, connection=0, seq=seq, size_bytes=172, send_time_s=t,
                          frame_id=-1, frame_type="", frame_last=True, dropped=False)
                if fid == 0 and 10 <= seq <= 14:
                    continue
                d = 0.3 if (fid == 0 and seq == 50) else 0.05
                wr.append(flow_id=fid, connection=0, seq=seq, size_bytes=172, send_time_s=t,
                          recv_time_s=t + d)
    write_run_metadata(tmp_path, {"clock": "shared", "duration_s": 2.0,
                                  "tcp_stats": [{"flow_id": 0, "connection": 0,
                                                 "total_retrans": 4}]})
    return tmp_path


def test_summary_by_hand(cbr_run):
    res = summarize_run(cbr_run, opts=MetricOptions(playout_delays_s=(0.1, 0.4)))
    f0, f1 = res["flows"]
    assert f0["kind"] == "stream" and f0["packets"]["lost"] == 5
    assert f0["packets"]["loss_rate"] == pytest.approx(0.05)
    # late at 100 ms: only seq 50 (1/100); missed adds the 5 lost
    assert f0["late"]["late_fraction"] == pytest.approx([0.01, 0.0])
    assert f0["late"]["miss_fraction"] == pytest.approx([0.06, 0.05])
    # jitter filter: base 50 ms + 40 ms: seq 50 is a delayed loss, 10-14 pure losses
    jf = f0["jitter_filter"]
    assert (jf["base_delay_s"], jf["pure_losses"], jf["delayed_losses"]) == (
        pytest.approx(0.05), 5, 1)
    # quality: 5 x 20 ms = 100 ms -> level 3 for 5 packets; seq 50 alone -> level 1
    q = f0["quality"]
    assert q["level_counts"] == {"0": 94, "1": 1, "2": 0, "3": 5, "4": 0, "5": 0}
    assert q["acceptable_fraction"] == pytest.approx(0.95)
    # RTPI: arrivals of 9 (0.23 s) and 15 (0.35 s) are 120 ms apart: 1 delayed packet;
    # seq 50 arrives at 1.30 s between 62 (1.29) and 63 (1.31): no gap over 100 ms.
    # RTPI = (95 - 1) / 100
    assert f0["rtpi"]["delayed"] == 1 and f0["rtpi"]["rtpi"] == pytest.approx(0.94)
    # goodput: what arrived within the run's 2 s from the first send, over 2 s: of the 95
    # received, seq 98 and 99 arrive at 2.01 and 2.03 s: 93 * 160 B * 8 / 2 = 59 520 b/s;
    # flow 1's 50 packets all arrive by 1.03 s: 50 * 1280 / 2
    assert f0["goodput_bps"] == pytest.approx(59520)
    assert f1["goodput_bps"] == pytest.approx(32000)
    assert res["fairness"]["jain_index_goodput"] == pytest.approx(
        (59520 + 32000) ** 2 / (2 * (59520 ** 2 + 32000 ** 2)))
    assert f0["tcp_retransmissions"] == 4 and f1["tcp_retransmissions"] is None
    # E-model at 100 ms playout: 6 % effective loss; at 400 ms: 5 %
    em = f0["emodel"]["per_playout_delay"]
    assert [e["effective_loss"] for e in em] == pytest.approx([0.06, 0.05])
    assert f0["packet_interval_s"] == pytest.approx(0.02)
    assert not res["delay_relative_to_min"]


def test_cli_human_and_json(cbr_run, capsys):
    with pytest.raises(SystemExit) as ex:
        main(["metrics", str(cbr_run)])
    assert ex.value.code == 0
    out = capsys.readouterr().out
    assert "One-way delay" in out and "Jain fairness" in out and "Voice" in out
    with pytest.raises(SystemExit) as ex:
        main(["metrics", str(cbr_run), "--json", "--playout-delay-s", "0.1", "--series"])
    assert ex.value.code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["options"]["playout_delays_s"] == [0.1]
    assert doc["flows"][0]["packets"]["lost"] == 5
    assert "over_time" in doc["flows"][0]["quality"]
    assert doc["options"]["buffer_bytes"] is None  # unlimited is written as null


@pytest.mark.parametrize("args, message", [
    (["metrics", "/nonexistent/run"], "does not exist"),
    (["metrics", "{empty}"], "no packet records"),
    (["metrics", "{empty}", "--playout-delay-s", "-1"], "--playout-delay-s"),
    (["metrics", "{empty}", "--codec", "opus"], "--codec"),
])
def test_cli_errors_are_one_line_exit_2(tmp_path, capsys, args, message):
    args = [a.replace("{empty}", str(tmp_path)) for a in args]
    with pytest.raises(SystemExit) as ex:
        main(args)
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_video_flow_through_the_summary(tmp_path):
    from tcpdelay.traffic import Mpeg4TesSource
    # 2 s of 25 fps video; every packet takes 100 ms except frame 30's, which take 1.5 s
    src = Mpeg4TesSource(mean_rate_bps=1e6, fps=25.0)
    with RecordWriter(tmp_path, "sent", writer_id="s") as ws, \
            RecordWriter(tmp_path, "received", writer_id="r") as wr:
        for seq, p in enumerate(src.packets(2.0, seed=3)):
            ws.append(flow_id=0, connection=0, seq=seq, size_bytes=p.size_bytes,
                      send_time_s=p.at_s, frame_id=p.frame_id, frame_type=p.frame_type,
                      frame_last=p.frame_last, dropped=False)
            d = 1.5 if p.frame_id == 30 else 0.1
            wr.append(flow_id=0, connection=0, seq=seq, size_bytes=p.size_bytes,
                      send_time_s=p.at_s, recv_time_s=p.at_s + d)
    res = summarize_run(tmp_path, opts=MetricOptions(startup_delay_s=0.5))
    v = res["flows"][0]["video"]
    # first arrival 0.1 s; D_k = 0.6 + k/25; frame 30 completes at 1.2 + 1.5 = 2.7 > D_30 = 1.8:
    # 1 late frame; frames 31.. arrive at k/25 + 0.1, before their deadlines: no underflow
    assert v["fps"] == pytest.approx(25.0)
    assert (v["frames"], v["late_frames"], v["picture_discards"], v["underflow_events"]) == (
        50, 1, 1, 0)
    assert "emodel" not in res["flows"][0]


def test_a_flow_that_lost_everything_and_a_receiver_only_directory(tmp_path, capsys):
    run = tmp_path / "run"
    with RecordWriter(run, "sent", writer_id="s") as ws:
        for seq in range(10):
            ws.append(flow_id=0, connection=0, seq=seq, size_bytes=172, send_time_s=seq * 0.02,
                      frame_id=-1, frame_type="", frame_last=True, dropped=False)
    res = summarize_run(run)
    f = res["flows"][0]
    assert f["packets"]["lost"] == 10 and f["delay"]["mean_s"] is None
    assert f["rtpi"]["rtpi"] == 0.0 and math.isnan(f["goodput_bps"])
    assert res["fairness"]["jain_index_goodput"] is None
    with pytest.raises(SystemExit) as ex:
        main(["metrics", str(run)])
    assert ex.value.code == 0 and "—" in capsys.readouterr().out

    rcv = tmp_path / "rcv"  # the receiver's directory alone, across hosts
    with RecordWriter(rcv, "received", writer_id="r") as wr:
        for seq in (0, 1, 4):
            wr.append(flow_id=3, connection=0, seq=seq, size_bytes=172, send_time_s=seq * 0.02,
                      recv_time_s=100 + seq * 0.02)
    write_run_metadata(rcv, {"clock": "unsynchronized"})
    with pytest.raises(SystemExit) as ex:
        main(["metrics", str(rcv), "--json"])
    doc = json.loads(capsys.readouterr().out)
    g = doc["flows"][0]
    # seq 2, 3 inferred lost; delays relative to the minimum (100 s offset removed)
    assert g["inferred_from_received"] and g["packets"]["lost"] == 2
    assert doc["delay_relative_to_min"] and g["delay"]["max_s"] == pytest.approx(0.0)

"""Issue 54, item 6: a video flow got a G.711 MOS (and the voice study's jitter filter and
quality levels: every flow without frame records was taken for voice), and Jain's index was
computed across voice and video flows (a 64 kb/s call beside 573 kb/s video: it measures their
rates, not fairness). The flows' profiles, from the run's scenario, now say which is which."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tcpdelay.records import RecordWriter, write_run_metadata

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = """name = "voice-and-video"
duration_s = 2.0

[path]
rtt_s = 0.1

[[flows]]
profile = "voip"
count = 2

[[flows]]
profile = "video"
"""


def _metrics(run) -> dict:
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "metrics", str(run), "--json"], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture
def voice_and_video(tmp_path):
    """Two voice flows (174 B every 20 ms) and one video flow (1448 B every 20 ms), 2 s each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path / "seed-1"
    run.mkdir()
    sizes = {0: 174, 1: 174, 2: 1448}
    with RecordWriter(run, "sent", writer_id="s") as ws, RecordWriter(run, "received", writer_id="r") as wr:
        for fid, size in sizes.items():
            for seq in range(100):
                t = 100.0 + seq * 0.02
                ws.append(flow_id=fid, connection=0, seq=seq, size_bytes=size, send_time_s=t,
                          frame_id=-1, frame_type="", frame_last=True, dropped=False)
                wr.append(flow_id=fid, connection=0, seq=seq, size_bytes=size, send_time_s=t,
                          recv_time_s=t + 0.05 + 0.01 * (seq % 3))
    write_run_metadata(run, {"clock": "shared-monotonic", "duration_s": 2.0})
    pq.write_table(pa.table({"flow_id": pa.array([0, 1, 2], pa.int32()), "name": ["voip#0", "voip#1", "video"],
                             "kind": ["media"] * 3}), run / "flows.parquet")
    (run / "scenario.toml").write_text(SCENARIO)
    (run / "complete.json").write_text(json.dumps({"seed": 1, "wall_s": 2.0, "summary": {}}))
    return run


def test_a_video_flow_gets_no_voice_metrics(voice_and_video):
    flows = {f["name"]: f for f in _metrics(voice_and_video)["flows"]}
    assert flows["video"]["media"] == "video" and flows["video"]["profile"] == "video"
    assert not {"emodel", "jitter_filter", "quality"} & set(flows["video"])
    for name in ("voip#0", "voip#1"):
        assert flows[name]["media"] == "voice" and flows[name]["emodel"]["best"]["mos"] > 4


def test_jains_index_compares_flows_of_one_kind(voice_and_video):
    fair = _metrics(voice_and_video)["fairness"]
    assert fair["flows"] == 3 and fair["jain_index_goodput"] is None
    assert fair["by_media"]["voice"] == {"flows": 2, "jain_index_goodput": pytest.approx(1.0)}
    assert fair["by_media"]["video"]["flows"] == 1
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "metrics", str(voice_and_video)], capture_output=True,
                         text=True, timeout=300)
    assert "Jain fairness index of the goodputs, per kind: video 1.000 (1 flow); voice 1.000 (2 flows)" \
        in " ".join(res.stdout.split())


def test_the_report_shows_no_mos_for_a_video_flow(voice_and_video, tmp_path):
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "report", str(voice_and_video), "--out",
                          str(tmp_path / "r.html"), "--json"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    (cell,) = json.loads(res.stdout)["cells"]
    mos = {f["name"]: f["mos"] for f in cell["flows"]}
    assert mos["video"] is None and mos["voip#0"] > 4
    assert cell["jain_index_goodput"] is None


def test_the_committed_video_runs_get_no_mos():
    """aqm-5.3-video's five flows play the ``video`` profile (no frame records)."""
    run = next((ROOT / "results" / "aqm-5.3-video-reduced" / "cells").glob("*/seed-1"))
    flows = _metrics(run)["flows"]
    assert len(flows) == 5 and all(f["media"] == "video" and "emodel" not in f for f in flows)

"""Issue 54, item 6: ``tcpdelay metrics`` at 80 columns named six voice rows "udpvoic…", wrapped
"100.00 %" over two lines and cut the video table's headers to "discar…". Its tables now have no
side borders, numbers that never wrap, names that are never cut, and titles above them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tcpdelay.records import RecordWriter, write_run_metadata

VOICE = [f"udpvoice#{k}" for k in range(6)]


@pytest.fixture
def six_voices_and_a_video(tmp_path):
    """Six voice flows (174 B every 20 ms) and one video flow of 25 frames/s, 4 s each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path / "run"
    run.mkdir()
    with RecordWriter(run, "sent", writer_id="s") as ws, RecordWriter(run, "received", writer_id="r") as wr:
        for fid in range(6):
            for seq in range(200):
                t = 100.0 + seq * 0.02
                ws.append(flow_id=fid, connection=0, seq=seq, size_bytes=174, send_time_s=t,
                          frame_id=-1, frame_type="", frame_last=True, dropped=False)
                wr.append(flow_id=fid, connection=0, seq=seq, size_bytes=174, send_time_s=t,
                          recv_time_s=t + 0.04 + 0.001 * (seq % 5))
        for frame in range(100):
            for k in range(3):
                seq, t = frame * 3 + k, 100.0 + frame * 0.04
                ws.append(flow_id=6, connection=0, seq=seq, size_bytes=1000, send_time_s=t, frame_id=frame,
                          frame_type="I" if frame % 25 == 0 else "P", frame_last=k == 2, dropped=False)
                wr.append(flow_id=6, connection=0, seq=seq, size_bytes=1000, send_time_s=t,
                          recv_time_s=t + 0.05 + (2.0 if frame == 50 else 0.0))
    write_run_metadata(run, {"clock": "shared-monotonic", "duration_s": 4.0})
    pq.write_table(pa.table({"flow_id": pa.array(range(7), pa.int32()), "name": [*VOICE, "video"],
                             "kind": ["media"] * 7}), run / "flows.parquet")
    return run


def test_metrics_fit_80_columns_and_cut_nothing(six_voices_and_a_video):
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "metrics", str(six_voices_and_a_video)],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "80"})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "…" not in res.stdout
    voice = lines.index(next(line for line in lines if line.startswith("Voice:")))
    rows = [line for line in lines[voice:] if line.startswith("udpvoice#")]
    assert [r.split()[0] for r in rows] == VOICE          # every voice row named whole, on one line
    rate = next(line for line in lines if line.startswith("udpvoice#0") and "100.00 %" in line)
    assert rate.split()[1:3] == ["100.00", "%"]           # RTPI on its row, not wrapped
    video = lines.index(next(line for line in lines if line.startswith("Video:")))
    header = next(line for line in lines[video:] if line.startswith("flow"))
    assert header.split() == ["flow", "fps", "frames", "discards", "late", "partial", "overflow", "stalls", "frozen"]
    doc = json.loads(subprocess.run([sys.executable, "-m", "tcpdelay", "metrics", str(six_voices_and_a_video),
                                     "--json"], capture_output=True, text=True, timeout=300).stdout)
    (v,) = [f for f in doc["flows"] if f["name"] == "video"]
    assert v["video"]["picture_discards"] >= 1

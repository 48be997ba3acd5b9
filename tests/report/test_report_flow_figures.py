"""Issue 54, item 6: the report of a 13-flow run drew 26 figures of one curve each (a delay CDF
and a late fraction per flow, a curve per cell), each curve named by the cell ("-") instead of
the flow; and a per-cell bar panel whose every value is 0 (the media's loss over TCP) was drawn
empty. With one cell the figures now have a curve per flow, named by the flow; an all-zero panel
says so."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys

import pytest

from tcpdelay.records import RecordWriter, write_run_metadata

NAMES = [f"voice#{k}" for k in range(13)]


@pytest.fixture(scope="module")
def thirteen_flows(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path_factory.mktemp("flows") / "run"
    run.mkdir()
    with RecordWriter(run, "sent", writer_id="s") as ws, RecordWriter(run, "received", writer_id="r") as wr:
        for fid in range(13):
            for seq in range(150):
                t = 100.0 + seq * 0.02
                ws.append(flow_id=fid, connection=0, seq=seq, size_bytes=174, send_time_s=t,
                          frame_id=-1, frame_type="", frame_last=True, dropped=False)
                wr.append(flow_id=fid, connection=0, seq=seq, size_bytes=174, send_time_s=t,
                          recv_time_s=t + 0.03 + 0.002 * fid + 0.001 * (seq % 7))
    write_run_metadata(run, {"clock": "shared-monotonic", "duration_s": 3.0})
    pq.write_table(pa.table({"flow_id": pa.array(range(13), pa.int32()), "name": NAMES, "kind": ["media"] * 13}),
                   run / "flows.parquet")
    (run / "complete.json").write_text(json.dumps({"seed": 1, "wall_s": 3.0, "summary": {}}))
    out = run.parent / "r.html"
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "report", str(run), "--out", str(out), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), out.read_text()


def _figures(doc: dict, html: str) -> dict[str, bytes]:
    """The page's figures by title, in the page's order."""
    pngs = re.findall(r"src='data:image/png;base64,([^']+)'", html)
    assert len(pngs) == len(doc["plots"]) == doc["figures"]
    return {p["title"]: base64.b64decode(png) for p, png in zip(doc["plots"], pngs)}


def test_one_cell_draws_a_curve_per_flow_named_by_the_flow(thirteen_flows, tmp_path):
    doc, html = thirteen_flows
    figs = _figures(doc, html)
    titles = [t for t in figs if t.startswith(("Delay CDF", "Late fraction"))]
    assert titles == [f"{what}, every flow (flows part {i} of 2)" for i in (1, 2)
                      for what in ("Delay CDF", "Late fraction")], titles   # ten curves a figure
    assert not any("flow voice#" in t for t in titles)
    assert all("one curve per flow" in p["caption"] for p in doc["plots"] if p["title"] in titles)
    for title in titles:   # for a look: the figures as drawn
        (tmp_path / (title.replace(" ", "_").replace(",", "") + ".png")).write_bytes(figs[title])


def test_bars_figure_marks_a_panel_of_zeros():
    from tcpdelay.report.results_plots import bars_figure

    fig = bars_figure(["a", "b"], [("loss (%)", [0.0, 0.0], [0.0, 0.0]), ("MOS", [4.3, 4.2], [None, None])])
    zero, mos = fig.axes
    assert [t.get_text() for t in zero.texts] == ["0 in every cell"] and not mos.texts
    assert zero.get_xlim() == (0.0, 1.0)

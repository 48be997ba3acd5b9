"""``tcpdelay report --csv DIR``: the per-packet, per-flow and per-cell tables as CSV — row
counts against the committed runs' own files (both kinds of packets.parquet), values of a run
written by hand, and bad input."""

import json
from collections import Counter
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tcpdelay.report.csv_export import export_csv
from tcpdelay.results import aggregate_cell, load_results

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"


def _read(path) -> list[dict]:
    return pacsv.read_csv(path).to_pylist()


def test_committed_sweeps_row_counts_equal_the_records(tmp_path, capsys, cli_exit):
    """droptail-5.3 keeps its packets' delays, validate-grid-ns3 its records: packets.csv has
    every row of every run's packets.parquet, flows.csv every row of its flows.parquet, cells.csv
    a row per cell and media flow."""
    sweeps = {"short": RESULTS / "droptail-5.3", "ns-3": RESULTS / "validate-grid-ns3"}
    out = tmp_path / "csv"
    assert cli_exit(["report", *map(str, sweeps.values()), "--label", "short", "--label", "ns-3",
                     "--csv", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    packets, flows, cells = (_read(out / f"{k}.csv") for k in ("packets", "flows", "cells"))
    assert [doc["files"][k]["rows"] for k in ("packets", "flows", "cells")] == [len(packets), len(flows), len(cells)]
    want_packets, want_flows, want_cells = Counter(), Counter(), Counter()
    for label, path in sweeps.items():
        for run in sorted(path.glob("cells/*/seed-*")):
            key = (label, run.parent.name, int(run.name.removeprefix("seed-")))
            want_packets[key] = pq.ParquetFile(run / "packets.parquet").metadata.num_rows
            want_flows[key] = pq.ParquetFile(run / "flows.parquet").metadata.num_rows
        for c in load_results(path).cells:
            want_cells[(label, c.id)] = len(aggregate_cell(c))
    assert Counter((r["results"], r["cell_id"], r["seed"]) for r in packets) == want_packets
    assert Counter((r["results"], r["cell_id"], r["seed"]) for r in flows) == want_flows
    assert Counter((r["results"], r["cell_id"]) for r in cells) == want_cells
    assert {r["source"] for r in packets if r["results"] == "short"} == {"delays"}
    assert {r["source"] for r in packets if r["results"] == "ns-3"} == {"records"}
    # one column per cell parameter, empty where the cell does not set it
    ns3 = next(r for r in packets if r["results"] == "ns-3")
    assert ns3["path.rtt_s"] in (0.02, 0.1, 0.3) and ns3["cross[1].count"] is None


def test_values_of_a_run_written_by_hand(tmp_path, make_run):
    """174-byte packets every 20 ms at 50 ms, seq 3 lost: send times from 0, delays as given,
    an empty delay for the lost packet; flows.csv has the run's metrics."""
    run = tmp_path / "r" / "seed-2"
    make_run(run, [0.05] * 10, lost={3})
    doc = export_csv([tmp_path / "r"], tmp_path / "out")
    assert doc["results"] == [{"label": "r", "results": str(tmp_path / "r")}]
    rows = _read(tmp_path / "out" / "packets.csv")
    assert [r["seq"] for r in rows] == list(range(10))
    assert all(r["seed"] == 2 and r["flow"] == "voip" and r["size_bytes"] == 174 for r in rows)
    assert [r["send_time_s"] for r in rows] == pytest.approx([i * 0.02 for i in range(10)])
    assert rows[3]["delay_s"] is None
    assert [r["delay_s"] for r in rows if r["seq"] != 3] == pytest.approx([0.05] * 9, abs=1e-9)
    (flow,) = _read(tmp_path / "out" / "flows.csv")
    assert flow["kind"] == "media" and flow["loss_rate"] == pytest.approx(0.1)
    assert flow["delay_mean_s"] == pytest.approx(0.05)
    (cell,) = _read(tmp_path / "out" / "cells.csv")
    assert cell["runs"] == 1 and cell["packets"] == 10 and cell["received"] == 9
    assert not list((tmp_path / "out").glob(".*"))  # no temporary file left


@pytest.mark.parametrize("target, message", [
    (lambda p: (p / "f.csv").write_text("x") and p / "f.csv", "is a file"),
    (lambda p: p / "missing" / "deeper", "does not exist"),
])
def test_bad_csv_dir_is_one_line(tmp_path, make_run, capsys, cli_exit, target, message):
    make_run(tmp_path / "r" / "seed-1", [0.05] * 5)
    assert cli_exit(["report", str(tmp_path / "r"), "--csv", str(target(tmp_path))]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_media_flows_goodput_is_the_same_in_flows_and_cells(tmp_path):
    """Issue 54, item 6: flows.csv had flows.parquet's goodput (every byte received over the
    sender's elapsed time, 68,866 b/s) where cells.csv had the metrics' (data without RTP
    headers over the connection time, 64,000 b/s) for the same cell of one run."""
    export_csv([RESULTS / "validate-reduced"], tmp_path / "out")
    cells = {(r["cell_id"], r["flow_id"]): r for r in _read(tmp_path / "out" / "cells.csv")}
    media = [r for r in _read(tmp_path / "out" / "flows.csv") if r["kind"] == "media"]
    assert len(media) == len(cells) >= 10
    for r in media:
        cell = cells[(r["cell_id"], r["flow_id"])]
        assert cell["runs"] == 1
        assert r["goodput_bps"] == pytest.approx(cell["goodput_bps"], rel=1e-12)


def test_out_and_csv_together_write_both(tmp_path, capsys, cli_exit):
    """Issue 54, item 6: ``--out FILE --csv DIR`` was refused ("not both")."""
    html, out = tmp_path / "r.html", tmp_path / "csv"
    assert cli_exit(["report", str(RESULTS / "validate-reduced"), "--out", str(html), "--csv", str(out),
                     "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["report_path"] == str(html) and html.stat().st_size > 10_000
    assert doc["csv"]["files"]["cells"]["rows"] == len(_read(out / "cells.csv")) >= 10
    assert cli_exit(["report", str(RESULTS / "validate-reduced"), "--out", str(html), "--csv", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"Report written to {html}" in text and f"{out / 'flows.csv'}" in text.replace("\n", "")

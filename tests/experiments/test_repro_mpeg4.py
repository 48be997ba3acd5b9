"""The reproduction of Papadimitriou and Tsaoussidis, "On Transport Layer Mechanisms for Real-Time
QoS", Sec. 4 (tcpdelay.reproductions.mpeg4_transport) against the committed results: every table
is what the analysis computes from the committed files, the page shows those tables, and the
quantities mean what the page says."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from tcpdelay.reproductions import mpeg4_transport as mpeg4  # noqa: E402

SWEEPS = sorted(p.name for p in (ROOT / "results").glob("mpeg4-*") if (p / "sweep.json").is_file())
PAGE = ROOT / "docs" / "experiments" / "mpeg4-transport.md"


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def test_the_sections_have_committed_results():
    # full size on ns-3 for every section, the testbed's reduced runs beside ns-3's at the same size
    for name in ("mpeg4-4.3-ns3", "mpeg4-4.4-ns3", "mpeg4-4.5-ns3", "mpeg4-4.2-wired-ns3", "mpeg4-4.2-wireless-ns3",
                 "mpeg4-4.1-wireless-ns3", "mpeg4-4.1-wireless-ftp-ns3", "mpeg4-4.1-wired-ns3", "mpeg4-4.1-wired-ftp-ns3",
                 "mpeg4-4.4-reduced", "mpeg4-4.3-reduced", "mpeg4-4.1-wireless-reduced", "mpeg4-4.1-wireless-reduced-ns3",
                 "mpeg4-4.1-wired-reduced", "mpeg4-4.1-wired-ftp-reduced"):
        assert name in SWEEPS, name


@pytest.mark.parametrize("name", SWEEPS)
def test_tables_are_the_committed_summary(name):
    sweep = ROOT / "results" / name
    rows = mpeg4.evaluate(sweep)
    committed = json.loads((sweep / "summary.json").read_text())
    assert len(rows) == len(committed) > 0
    for r, c in zip(rows, committed):
        assert set(r) == set(c)
        for k in c:
            assert _same(r[k], c[k]), (name, r["cell_id"], k, r[k], c[k])
    backend = "ns3" if name.endswith("-ns3") else "testbed"
    assert {r["backend"] for r in rows} == {backend}


@pytest.mark.parametrize("name", SWEEPS)
def test_each_row_is_its_runs_scenario_and_metrics(name):
    sweep = ROOT / "results" / name
    for r, run in zip(mpeg4.evaluate(sweep), mpeg4.runs(sweep)):
        sc = tomllib.loads((run["dir"] / "scenario.toml").read_text())
        metrics = json.loads((run["dir"] / "metrics.json").read_text())
        assert r["buffer_packets"] == sc["path"]["queue_packets"]
        assert r["mpeg_flows"] == sum(f.get("count", 1) for f in sc.get("flows", []))
        assert r["mpeg_flows"] == len(metrics["flows"])
        if metrics["flows"]:
            assert r["system_goodput_bps"] == pytest.approx(sum(f["goodput_bps"] for f in metrics["flows"]))
            assert 0.0 <= r["rtpi_mean"] <= 1.0 and 0.0 <= r["loss_rate_mean"] <= 1.0
        if r["queue_mean_packets"] is not None:
            assert 0.0 <= r["queue_mean_packets"] <= r["queue_max_packets"] <= r["buffer_packets"]


def test_paper_values_only_where_the_paper_measured():
    rows = [r for name in SWEEPS for r in mpeg4.evaluate(ROOT / "results" / name)]
    with_paper = [r for r in rows if r["paper_queue_mean_packets"] is not None]
    assert with_paper
    for r in with_paper:
        assert (r["topology"], r["per"], r["handoffs"], r["bottleneck_delay_s"]) == ("wireless", 0.01, 5, 0.025)
        assert r["mpeg_flows"] in (20, 40) and r["buffer_packets"] in (20, 30, 50, 80) and r["ftp_flows"] == 0
        assert r["paper_queue_mean_packets"] == mpeg4.PAPER_AVG_QUEUE[r["mpeg_flows"]][r["protocol"]][r["buffer_packets"]]


def test_the_page_shows_the_tables_the_committed_runs_give():
    text = PAGE.read_text()
    for name, table in mpeg4.page_tables(ROOT / "results").items():
        assert f"<!-- table {name} -->\n{table}\n\n" in text, name


@pytest.mark.parametrize("name", [n for n in SWEEPS if n.startswith("mpeg4-4.4")])
def test_queue_traces_are_kept_for_the_buffer_sweeps(name, tmp_path):
    import pyarrow.parquet as pq

    sweep = ROOT / "results" / name
    t = pq.read_table(sweep / mpeg4.QUEUE_TRACES_FILE)
    assert t.num_rows > 0 and set(t["buffer_packets"].to_pylist()) == {20, 30, 50, 80}
    for buf, top in zip(t["buffer_packets"].to_pylist(), t["packets"].to_pylist()):
        assert 0 <= top <= buf
    mpeg4.figure(mpeg4.queue_traces(sweep), tmp_path / "q.png")
    assert (tmp_path / "q.png").stat().st_size > 0

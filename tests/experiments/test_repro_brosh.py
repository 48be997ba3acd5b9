"""The reproductions of Brosh et al. §5.3, §6 and §7 (tcpdelay.reproductions.delay_friendliness)
against the committed results: the tables on the pages are what the analysis computes from the
committed files, and the quantities mean what the pages say."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow   # ~9 s: reads every committed delay file

ROOT = Path(__file__).resolve().parents[2]

from tcpdelay.reproductions import delay_friendliness as brosh  # noqa: E402
from tcpdelay.reproductions.sweep_data import media_delays  # noqa: E402


def _same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("name", ["droptail-5.3", "droptail-5.3-video", "droptail-5.3-long",
                                  "droptail-5.3-connections", "droptail-5.3-video-connections"])
def test_droptail_tables_are_the_committed_summary(name):
    sweep = ROOT / "results" / name
    rows = brosh.droptail_rows(sweep, 10.0)
    committed = json.loads((sweep / "summary.json").read_text())
    assert len(rows) == len(committed) > 0
    for r, c in zip(rows, committed):
        for k in c:
            assert _same(r[k], c[k]), (name, r["cell_id"], k, r[k], c[k])


def test_droptail_paper_values_only_where_the_paper_measured():
    rows = brosh.droptail_rows(ROOT / "results" / "droptail-5.3", 10.0)
    for r in rows:
        if r["queue"] == "bytes" and r["queue_limit"] == 100000:
            assert r["paper"] is None           # Table 3 has no 100 000 B queue for VoIP
        else:
            assert r["paper"] == brosh.DROPTAIL_PAPER["voip"][r["queue"]][r["web_flows"]]


def test_droptail_delay_statistics_match_the_delays_file():
    sweep = ROOT / "results" / "droptail-5.3"
    t = media_delays(sweep)
    rows = brosh.droptail_rows(sweep, 10.0)
    r = rows[0]
    cell = t.filter(np.array([c == r["cell_id"] for c in t["cell_id"].to_pylist()]))
    p95 = []
    for f in range(5):
        sel = cell.filter(np.array([x == f for x in cell["flow_id"].to_pylist()]))
        d = sel["delay_s"].to_numpy()[sel["send_time_s"].to_numpy() >= 10.0]
        assert d.size == 1000                   # 20 s at 50 packets/s after the warm-up
        p95.append(np.percentile(d[np.isfinite(d)], 95))
    assert r["p95_delay_s"] == pytest.approx(np.mean(p95))
    assert 0.05 < r["p95_delay_s"] < 5.0        # a one-way delay above L = 50 ms


def test_split_parallel_tables_are_the_committed_summary():
    sweep = ROOT / "results" / "split-parallel-7"
    rows = brosh.split_rows(sweep, 10.0)
    committed = json.loads((sweep / "summary.json").read_text())
    assert len(rows) == len(committed) == 20    # 5 heuristics x {0, 10} web flows x 2 seeds
    for r, c in zip(rows, committed):
        for k in c:
            assert _same(r[k], c[k]), (r["cell_id"], r["seed"], k)
    for r in rows:
        if r["heuristic"] == "plain":
            assert r["p95_reduction"] == 0 and r["ftp_change"] == 0
        if r["scheduler"] == "intelligent" and r["connections"] > 1:
            assert r["model_p95_s"] is None     # the model has no intelligent scheduler


def test_split_n_left_most_pieces_coalesced_and_gained_nothing_steady():
    """split-parallel-7.md, "Split-N hardly splits here" / "Splitting did not reduce the tail":
    every split run's forward link took in fewer extra packets (against the plain run of the same
    seed and web load) than half of what sending each piece as its own segment would add, and at
    each web load some split run is later than plain at the 95th percentile."""
    sweep = ROOT / "results" / "split-parallel-7"
    rows = json.loads((sweep / "summary.json").read_text())
    plain = {(r["web_flows"], r["seed"]): r for r in rows if r["heuristic"] == "plain"}
    split = [r for r in rows if r["split"] > 1]
    assert len(split) == 8
    for r in split:
        sent = json.loads((sweep / "cells" / r["cell_id"] / f"seed-{r['seed']}" / "complete.json")
                          .read_text())["summary"]["packets_sent"]
        extra = r["link_packets"] - plain[(r["web_flows"], r["seed"])]["link_packets"]
        assert extra < 0.5 * (r["split"] - 1) * sent, (r["cell_id"], r["seed"], extra, sent)
    for web in (0, 10):
        assert any(r["p95_reduction"] < 0 for r in split if r["web_flows"] == web)


def test_playout_tables_are_the_committed_json():
    results = [ROOT / "results" / n for n in ("validate-reduced", "validate-wide")]
    pts = brosh.playout_points(results, "newreno-2008")
    committed = {(p["profile"], p["rtt_s"], p["loss"]): p
                 for p in json.loads((ROOT / "results" / "playout-6" / "newreno-2008.json").read_text())}
    for p in pts:
        c = committed[(p["profile"], p["rtt_s"], p["loss"])]
        assert _same(p["late_measured"], c["late_measured"])
        assert _same(p["late_model"], c["late_model"])
        assert p["in_region_measured"] == c["in_region_measured"]
        # the late fraction can only fall as the playout delay grows (the first five are sorted)
        assert all(a >= b for a, b in zip(p["late_measured"][:5], p["late_measured"][1:5]))
        assert p["recommended_playout_s"] == pytest.approx(1.5 * p["rtt_s"] + 0.06)

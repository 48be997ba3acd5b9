"""papers/001 (Cardwell, Savage, Anderson, "Modeling TCP Latency") reproduced on ns-3: the
committed summaries (the page docs/experiments/latency-cardwell.md quotes them) are what
benchmarks/repro_latency_cardwell.py computes from the committed runs, and what they say holds
of the runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import repro_latency_cardwell as repro  # noqa: E402

RESULTS = {"latency-cardwell-fig3": "handshake", "latency-cardwell-fig4": "handshake",
           "latency-cardwell-lossfree": "lossfree", "latency-cardwell-loss": "loss"}
COMMITTED = [n for n in RESULTS if (ROOT / "results" / n / "summary.json").exists()]


def test_the_reproductions_are_committed():
    assert COMMITTED, "no committed results/latency-cardwell-*/summary.json"


@pytest.mark.parametrize("name", COMMITTED)
def test_summary_recomputes_from_the_committed_runs(name):
    sweep = ROOT / "results" / name
    want = json.loads((sweep / "summary.json").read_text())
    assert repro.summary(RESULTS[name], sweep) == want


@pytest.mark.parametrize("name", [n for n in COMMITTED if RESULTS[n] == "handshake"])
def test_handshake_rows_are_simulated_with_the_papers_syn_timeout(name):
    rows = json.loads((ROOT / "results" / name / "summary.json").read_text())["rows"]
    for r in rows:
        assert r["backend"] == "ns3-simulation" and r["syn_timeout_s"] == 3.0 and r["rtt_s"] == pytest.approx(0.07)
        assert r["trials"] >= 100
        assert r["mean_s"] >= r["rtt_s"] - 1e-6


PAGE = ROOT / "docs" / "experiments" / "latency-cardwell.md"
TABLES = {"latency-cardwell-fig3": "fig3", "latency-cardwell-fig4": "fig4", "latency-cardwell-lossfree": "lossfree",
          "latency-cardwell-loss": "loss"}


@pytest.mark.parametrize("name", COMMITTED)
def test_the_pages_tables_are_the_committed_summaries(name):
    """Each table of docs/experiments/latency-cardwell.md follows its ``<!-- marker -->`` and is
    the script's table of the committed summary."""
    page = PAGE.read_text()
    marker = f"<!-- {TABLES[name]} -->\n"
    assert marker in page, marker
    table = page.split(marker, 1)[1].split("\n\n", 1)[0]
    assert table == repro.markdown(json.loads((ROOT / "results" / name / "summary.json").read_text()))

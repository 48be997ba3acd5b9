"""docs/experiments/ns3-vs-testbed.md: its table is what benchmarks/ns3_vs_testbed.py computes
from the committed validations (the testbed's results/validate-grid, ns-3's
results/validate-grid-ns3), and the numbers its text quotes are that script's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("ns3_vs_testbed", ROOT / "benchmarks" / "ns3_vs_testbed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_page_table_is_recomputed_from_the_committed_runs():
    mod = _script()
    rows = mod.pairs(ROOT / "results" / "validate-grid", ROOT / "results" / "validate-grid-ns3")
    assert len(rows) == 42
    page = (ROOT / "docs" / "experiments" / "ns3-vs-testbed.md").read_text()
    committed = page.split("<!-- table -->\n", 1)[1].split("\n<!-- /table -->", 1)[0]
    assert committed == mod.table(rows)


def test_the_quoted_summary_is_the_scripts():
    mod = _script()
    s = mod.summary(mod.pairs(ROOT / "results" / "validate-grid", ROOT / "results" / "validate-grid-ns3"))
    page = (ROOT / "docs" / "experiments" / "ns3-vs-testbed.md").read_text()
    assert [round(s[r]["median_rel_diff_mean"] * 100) for r in (0.02, 0.1, 0.3)] == [13, 7, 20]
    assert "13 % at RTT\n  20 ms, 7 % at 100 ms" in page and "(median difference of the mean 20 %)" in page
    assert (s[0.3]["retransmissions_ns3"], s[0.3]["retransmissions_testbed"]) == (369, 186)
    assert (s[0.3]["timeouts_ns3"], s[0.3]["timeouts_testbed"], s[0.1]["timeouts_ns3"], s[0.1]["timeouts_testbed"]) == (42, 4, 21, 5)
    assert (s[0.02]["retransmissions_testbed"], s[0.02]["retransmissions_ns3"]) == (445, 443)

"""docs/experiments/aqm.md's tables are what experiments/aqm-tables.py computes from the
committed AQM sweeps (results/aqm-*): rerunning the script on a fresh clone changes nothing, and
the figures the page's judgements rest on are there (FQ-CoDel's VoIP tail against drop-tail's, the
marks ECN turns drops into)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tcpdelay.reproductions.page_tables import replace_tables

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow   # reads every packet of eight committed sweeps


def _script():
    spec = importlib.util.spec_from_file_location("aqm_tables", ROOT / "experiments" / "aqm-tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_page_tables_are_the_scripts_output_of_the_committed_runs():
    mod = _script()
    tables = {marker: mod.table(*spec) for marker, spec in mod.TABLES.items()}
    text = (ROOT / "docs" / "experiments" / "aqm.md").read_text()
    new, changed = replace_tables(text, tables)
    assert changed == [] and new == text


def test_fq_codel_keeps_voip_out_of_the_queue_and_ecn_marks_instead_of_dropping():
    mod = _script()
    for suffix in ("-ns3", "-reduced"):
        rows = {(r["discipline"], r["other"]): r for r in mod.cell_rows(ROOT / "results" / f"aqm-5.3{suffix}", False,
                                                                       "cross[1].count")}
        fq, tail = rows[("fq_codel", 20)], rows[("drop_tail", 20)]
        assert fq["p95_ms"] < tail["p95_ms"] / 5 and fq["late"][0] < 0.05 < 0.5 < tail["late"][0], suffix
        ecn = {(r["discipline"], r["other"]): r for r in mod.cell_rows(ROOT / "results" / f"aqm-5.3-ecn{suffix}", True,
                                                                      "cross[1].count")}
        codel, codel_ecn = rows[("codel", 20)], ecn[("codel", 20)]
        assert codel["ce_marks"] == 0 and codel_ecn["ce_marks"] > 10 * codel_ecn["aqm_drops"], suffix
        assert codel_ecn["media_rtx"] < codel["media_rtx"] / 5, suffix


def test_byte_limited_fq_codel_is_a_refused_row_giving_ns3s_own_reason():
    """Table 3's byte queue: ns-3 runs drop-tail, CoDel and PIE with a limit in bytes; FQ-CoDel's
    rows say it was refused and why, in the words of ns-3's plan-time check."""
    from tcpdelay.sim.aqm import unsupported

    mod = _script()
    spec = mod.TABLES["<!-- table aqm-5.3-bytes ns3 -->"]
    lines = mod.table(*spec).splitlines()
    reason = unsupported({"rate_bps": 3e6, "queue_bytes": 50_000, "aqm": {"discipline": "fq_codel"}})
    assert len(reason) == 1 and "queue_bytes" in reason[0]
    fq = [line for line in lines if "| FQ-CoDel |" in line]
    assert len(fq) == 2 and all(f"| 0 | refused by ns-3: {reason[0]} |" in line for line in fq)
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    for ecn in (False, True):
        rows = mod.cell_rows(mod._sweep_dir("aqm-5.3-bytes", ecn, "-ns3"), ecn, "cross[1].count")
        assert sorted(r["discipline"] for r in rows) == ["codel", "drop_tail", "pie"]
        assert all(r["runs"] > 0 and r["other"] == 20 for r in rows)


def test_a_discipline_left_out_that_ns3_would_run_is_an_error_not_a_refused_row():
    mod = _script()
    sweep = mod._sweep_dir("aqm-5.3-bytes", False, "-ns3")
    with pytest.raises(SystemExit, match="pie"):
        mod.refused_rows(sweep, False, "cross[1].count", {"drop_tail", "codel"})
    assert [r["discipline"] for r in mod.refused_rows(sweep, False, "cross[1].count",
                                                      {"drop_tail", "codel", "pie"})] == ["fq_codel"]

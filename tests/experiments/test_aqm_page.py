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

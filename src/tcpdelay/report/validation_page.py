"""The validation's page (``validation.html``): Brosh et al. §5.1, the delay model against
Linux TCP — what it is, the comparison table, the paper's claims checked, the figures (Figs 5a,
5b, 8, 11 and the delay CDFs) and the interpretation. The numbers come from
:mod:`tcpdelay.experiments.validation`; the prose from its ``texts.md``. The job calls
:func:`write_validation_page` as its ``page=`` writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tcpdelay.experiments.validation import MSS_BYTES, interpretation, table_columns, table_rows
from tcpdelay.experiments.validation.table import claim_hol_ramp_text, error_text
from tcpdelay.experiments.validation.texts import text
from tcpdelay.report import results_plots as rp
from tcpdelay.report.html import Report
from tcpdelay.results.testbed_error import Verdict

#: The page's file name in the validation's directory.
PAGE_FILE = "validation.html"
TITLE = "Delay model vs Linux TCP: Brosh et al. §5.1 (configured random drops)"

#: A run whose emulator released 1 % of its packets later than this is flagged (shared machine).
LATE_FLAG_US = 5000.0


def write_validation_page(out_dir: str | Path, points: list[dict], doc: dict) -> Path:
    """Write ``out_dir/validation.html`` from the compared points (with their ``_delays`` and
    ``_prediction``) and the validation document; returns its path."""
    report = Report(TITLE)
    add_validation_sections(report, points, doc)
    return report.write(Path(out_dir) / PAGE_FILE)


def add_validation_sections(report: Report, points: list[dict], doc: dict) -> None:
    """The page's sections, added to ``report``."""
    measured = [p for p in points if p.get("measured")]
    sec = report.section("What this is")
    sec.paragraph(text("what-this-is", mss_bytes=MSS_BYTES))
    dur = doc.get("duration_s")
    sec.paragraph(text("size", size=doc.get("size"), points=len(points), runs=sum(p["runs"] for p in points),
                       duration="—" if dur is None else f"{dur:g}"),
                  note=not str(doc.get("size")).startswith("full"))
    report.section("Model vs measurement").table(
        table_columns(hol_ramp=True), table_rows(points, hol_ramp=True), text("model-vs-measurement"))
    late = [p["measured"].get("emulator_lateness_p99_us") for p in points if p.get("measured")]
    late_max = [p["measured"].get("emulator_lateness_max_us") for p in points if p.get("measured")]
    if late:
        report.sections[-1].paragraph(text("emulator-timing", p99_ms=max(late) / 1e3, max_ms=max(late_max) / 1e3))
        flagged = [p for p in points if p.get("measured")
                   and (p["measured"].get("emulator_lateness_p99_us") or 0.0) > LATE_FLAG_US]
        if flagged:
            report.sections[-1].paragraph(text(
                "disturbed-points", count=len(flagged), flag_ms=LATE_FLAG_US / 1e3, points="; ".join(
                    f"{p['profile']} {p['stack']} RTT {p['rtt_s'] * 1e3:g} ms p {p['loss'] * 100:g} %"
                    for p in flagged)), note=True)
    late_points = [p for p in points if ((p.get("testbed_error") or {}).get("worst") or {}).get("late")]
    if late_points:    # the runs' own record of their error (docs/testbed.md), beside the flag above
        report.sections[-1].paragraph(
            f"{len(late_points)} point(s) with a run whose testbed was itself late (docs/testbed.md, \"When the "
            "testbed itself was late\"): " + "; ".join(
                f"{p['profile']} {p['stack']} RTT {(p['rtt_s'] or 0) * 1e3:g} ms p {(p['loss'] or 0) * 100:g} %: "
                f"{Verdict(**p['testbed_error']['worst']).text()}" for p in late_points), note=True)
    claims = doc.get("claims") or []
    if claims:
        report.section("The paper's accuracy claims, checked").table(
            ["profile", "stack", "RTT ms", "loss up to", "paper's bound", "points", "worst at loss",
             "worst rel. err of mean", "holds here", "hol_ramp: worst rel. err (at loss)"],
            [[c["profile"], c["stack"], f"{c['rtt_s'] * 1e3:g}", f"{c['max_loss'] * 100:g} %",
              f"{c['bound'] * 100:g} %", c["points"], f"{c['worst_loss'] * 100:g} %",
              error_text(c["worst_relative_error"]), "yes" if c["holds"] else "no", claim_hol_ramp_text(c)]
             for c in claims],
            text("claims"))
    sec = report.section("Figures")
    if measured:
        for stat, what in (("mean_s", "mean (Fig 5a)"), ("p95_s", "95th percentile (Fig 5b)"),
                           ("std_s", "standard deviation (Fig 11)")):
            sec.figure(rp.model_vs_measured_figure(measured, stat=stat, title=f"model vs measured {what}"),
                       text("figure-model-vs-measured", what=what))
        sec.figure(rp.relative_error_figure(measured, title="relative error of the mean (Fig 8)"),
                   text("figure-relative-error"))
        groups: dict[str, list[dict]] = {}
        for p in measured:
            groups.setdefault(f"{p['profile']} on {p['stack']}, RTT {p['rtt_s'] * 1e3:g} ms", []).append(p)
        for title, pts in groups.items():
            sec.figure(_cdf_figure(sorted(pts, key=lambda p: p["loss"]), title), text("figure-cdf", title=title))
    else:
        sec.paragraph(text("nothing-to-plot"), note=True)
    sec = report.section("Where the model departs from today's Linux, and why")
    for paragraph in doc.get("interpretation") or interpretation(points):
        sec.paragraph(paragraph)


def _cdf_figure(points: list[dict], title: str):
    """The measured delay CDF of each point (solid) and the model's (dashed) in one figure."""
    pairs = []
    for p in points:
        pred = p.get("_prediction")
        ok = pred is not None and not pred.unstable
        pairs.append((f"p={p['loss'] * 100:g} %", p.get("_delays", np.zeros(0)),
                      pred.support_s if ok else None, np.cumsum(pred.pmf) if ok else None))
    return rp.measured_and_model_cdf_figure(pairs, title=title)

"""The report's figures and tables as a person reads them (issue 27, defect 4): legends outside
the axes (never over a curve), no two figures with the same title when one flow's cells take
several figures, no empty panel (ns-3 records no delivery rate), a single run labelled by its
name and not "-", tables that fit the page."""

import json
import re

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from tcpdelay.records import RecordWriter
from tcpdelay.report import results_plots as rp
from tcpdelay.report.results import write_report


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _series(n=12):
    rng = np.random.default_rng(1)
    return [(f"profile=voip rtt={20 * (i + 1)}ms loss={i % 3}%", rng.exponential(0.05, 400) + 0.02 * i)
            for i in range(n)]


def _tcp(n=3, rate=True):
    t = np.linspace(0, 10, 50)
    return [(f"flow {i}", t, 10 + t * i, 0.05 + 0.001 * t, (1e6 * (1 + t)) if rate else np.full(t.size, np.nan))
            for i in range(n)]


FIGURES = {
    "delay_cdf": lambda: rp.delay_cdf_figure(_series(), title="t"),
    "late_fraction": lambda: rp.late_fraction_figure(
        [(lbl, [0.05, 0.1, 0.2, 0.4], [0.5, 0.1, 0.01 * (i + 1), 0.001]) for i, (lbl, _) in enumerate(_series())],
        title="t"),
    "quality": lambda: rp.quality_over_time_figure(
        [("a seed 1", np.arange(10.0), np.full(10, 1.0), np.full(10, 3.0))], bin_s=0.5, title="t"),
    "tcp_state": lambda: rp.tcp_state_figure(_tcp(), title="t"),
    "times_cdf": lambda: rp.times_cdf_figure(_series(), xlabel="x", title="t"),
    "queue": lambda: rp.queue_trace_figure([("a a_to_b", np.arange(10.0), np.arange(10.0))], title="t"),
    "model_vs_measured": lambda: rp.model_vs_measured_figure(
        [{"label": "a", "group": f"g{i}", "measured": {"mean_s": 0.1 + i / 100}, "model": {"mean_s": 0.1}}
         for i in range(5)], stat="mean_s"),
}


@pytest.mark.parametrize("kind", sorted(FIGURES))
def test_the_legend_is_outside_every_axes(kind):
    fig = FIGURES[kind]()
    FigureCanvasAgg(fig).draw()
    legends = [lg for ax in fig.axes if (lg := ax.get_legend()) is not None]
    assert legends, "the figure has a legend"
    for lg in legends:
        box = lg.get_window_extent()
        for ax in fig.axes:
            assert not _overlap(box, ax.get_window_extent()), f"{kind}: the legend covers an axes"


def test_no_empty_delivery_rate_panel():
    """ns-3 records no delivery rate: its panel is left out, the others drawn."""
    full = rp.tcp_state_figure(_tcp(rate=True))
    no_rate = rp.tcp_state_figure(_tcp(rate=False))
    assert [ax.get_ylabel() for ax in full.axes] == ["cwnd (segments)", "smoothed RTT (ms)", "delivery rate (Mbit/s)"]
    assert [ax.get_ylabel() for ax in no_rate.axes] == ["cwnd (segments)", "smoothed RTT (ms)"]
    for ax in no_rate.axes:
        assert ax.lines and any(np.isfinite(line.get_ydata()).any() for line in ax.lines)


def _write_ns3_like_state(run_dir, n=40):
    with RecordWriter(run_dir, "tcp_state", writer_id="test") as w:
        for k in range(n):
            w.append(flow_id=0, connection=0, time_s=1.0 + 0.1 * k, cwnd_segments=10 + k, ssthresh_segments=None,
                     srtt_s=0.05, rttvar_s=0.01, delivery_rate_bps=None, retransmits_total=0, ca_state=0,
                     bytes_acked=1448 * k, mss_bytes=1448, pacing_rate_bps=None, cc_state_0=None,
                     cc_state_1=None, cc_state_2=None, cc_state_3=None)


def test_a_single_run_without_delivery_rate_is_named_and_has_no_empty_panel(tmp_path, make_run):
    out = tmp_path / "tiny"
    make_run(out / "seed-1", [0.03] * 50)
    (out / "scenario.toml").write_text('name = "tiny-ns3"\nduration_s = 1.0\nflows = []\n')
    _write_ns3_like_state(out / "seed-1")
    doc = write_report(out, tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert doc["cells"][0]["short_label"] == "tiny-ns3"
    (state,) = [p for p in doc["plots"] if p["section"] == "TCP state"]
    assert state["title"] == "TCP state: tiny-ns3, seed 1" and "- seed" not in html
    assert "panel is left out" in state["caption"] and doc["tcp"]["state"][0]["delivery_rate"] is False


def _sweep(tmp_path, make_run, n_cells=12):
    """A sweep of ``n_cells`` cells whose overrides are nested tables (as droptail-5.3's are),
    one run each, no scenario.toml (so every metric is shown)."""
    out = tmp_path / "sweep"
    out.mkdir()
    cells = []
    for i in range(n_cells):
        cid = f"{i:012x}"
        ov = {"path.forward": {"rate_bps": 3e6, "queue_packets": 100 + 50 * (i % 3)}, "cross[1].count": 5 * (i // 3)}
        cells.append({"id": cid, "index": i, "overrides": ov,
                      "label": " ".join(f"{k}={json.dumps(v)}" for k, v in ov.items())})
        make_run(out / "cells" / cid / "seed-1", [0.03 + 0.002 * i] * 40 + [0.3] * 5)
    (out / "sweep.json").write_text(json.dumps({"name": "many", "seeds": [1], "cells": cells}))
    return out


def test_figures_of_one_flow_in_parts_never_share_a_title(tmp_path, make_run):
    doc = write_report(_sweep(tmp_path, make_run), tmp_path / "r.html")
    titles = [p["title"] for p in doc["plots"]]
    assert len(titles) == doc["figures"] and all(titles)
    assert len(set(titles)) == len(titles), titles
    cdfs = [t for t in titles if t.startswith("Delay CDF, flow voip")]
    assert cdfs == ["Delay CDF, flow voip (cells part 1 of 2)", "Delay CDF, flow voip (cells part 2 of 2)"]


def test_tables_fit_the_page(tmp_path, make_run):
    """At most 13 columns a table, and cells labelled by what differs between them (not the
    overrides written whole); the first column wraps, every table in a scroll box."""
    write_report(_sweep(tmp_path, make_run), tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    tables = re.findall(r"<div class='wide'><table>(.*?)</table></div>", html, flags=re.S)
    assert tables and len(tables) == html.count("<table>")
    for t in tables:
        assert len(re.findall(r"<th>", t)) <= 13
        firsts = re.findall(r"<tr><td>([^<]*)</td>", t)
        assert firsts and max(map(len, firsts)) <= 40, firsts[:3]
    assert "rate_bps" not in html.split("<h2", 2)[-1]  # the same in every cell: not in the labels
    assert "overflow-wrap:anywhere" in html and ".wide{overflow-x:auto" in html


def test_an_ecdf_of_many_samples_is_drawn_with_few_steps_each_on_the_exact_curve():
    from tcpdelay.report.results_plots import ecdf_steps

    rng = np.random.default_rng(3)
    d = rng.exponential(0.05, 75_000)
    d[::97] = np.nan                        # not received: left out
    finite = np.sort(d[np.isfinite(d)])
    x, y = ecdf_steps(d, max_points=500)
    assert 2 <= x.size <= 501 and np.all(np.diff(x) >= 0) and np.all(np.diff(y) > 0)
    # the smallest and largest samples are drawn, and every point is on the exact ECDF
    assert x[0] == finite[0] and x[-1] == finite[-1] and y[-1] == 1.0
    assert np.allclose(np.searchsorted(finite, x, side="right") / finite.size, y)
    # between two points drawn the exact curve rises by at most 1/500 (+ one sample)
    assert np.max(np.diff(y)) <= 1 / 500 + 1 / finite.size + 1e-12
    # a short series is drawn whole
    x, y = ecdf_steps([0.3, np.nan, 0.1, 0.2])
    assert x.tolist() == [0.1, 0.2, 0.3] and y.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])

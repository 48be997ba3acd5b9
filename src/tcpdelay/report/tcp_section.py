"""The report's section on the senders' TCP: the state over time (congestion window, smoothed RTT,
delivery rate) of each cell's first complete run with ``tcp_state`` records (else the window the
sweep kept in its ``tcp_state.parquet``), and TCP_INFO at each run's end (``run.json``'s
``tcp_stats``: retransmissions, timeouts, RTTs) per cell.
"""

from __future__ import annotations

import numpy as np

from tcpdelay.report.report_context import ReportContext, chunks, part_title
from tcpdelay.report.table_format import mean_std, ms, num

__all__ = ["TCP_STATE_CURVES_PER_FIGURE", "tcp_section"]

#: Connections per TCP-state figure (a run with more is drawn in several figures).
TCP_STATE_CURVES_PER_FIGURE = 10


def tcp_section(ctx: ReportContext, report) -> dict:
    """Add the section (nothing when no run has either); return ``{"state": [...], "end": [...]}``
    (the runs drawn, the per-cell TCP_INFO figures; empty lists when none)."""
    end = _end_rows(ctx)
    state_runs = [(cell, r) for cell in ctx.results.cells for r in ctx.complete(cell)]
    sampled_rows = sum(ctx.measures(r).tcp_state_rows for _, r in state_runs)
    out = {"state": [], "end": end}
    sec = None

    def section():
        nonlocal sec
        if sec is None:
            sec = report.section("TCP state")
        return sec

    if end:
        section().table(
            ["parameters", "runs", "connections", "retrans segments", "RTOs", "min RTT ms", "smoothed RTT ms",
             "cwnd segments"],
            [[e["short_label"], e["runs"], num(e["connections"], ".3g"), num(e["retransmits"], ".4g"),
              num(e["rtos"], ".3g"), ms(e["min_rtt_s"]), ms(e["srtt_s"]), num(e["cwnd_segments"], ".3g")]
             for e in end],
            "The senders' TCP_INFO at the end of each run, every TCP connection of the run (media "
            "flows and cross traffic): connections, retransmitted segments and RTOs per run (sums over "
            "its connections), and the mean over the connections of the smallest RTT, the smoothed RTT "
            "and the window at the end; means over the complete runs.")
    out["state"] = _state_figures(ctx, section)
    out["state"] += _kept_state_figures(ctx, section, {d["cell"] for d in out["state"]})
    if not out["state"] and sampled_rows:
        section().paragraph(
            f"The runs sampled their TCP state ({sampled_rows} samples in all, run.json), but the "
            "records (tcp_state/) are not in this directory (a committed result leaves them out): no "
            "figure of the state over time.", note=True)
    return out


def _end_rows(ctx: ReportContext) -> list[dict]:
    out = []
    for cell in ctx.results.cells:
        runs = [ctx.measures(r).tcp_stats for r in ctx.complete(cell)]
        runs = [s for s in runs if s]
        if not runs:
            continue

        def per_run(key):
            return mean_std([sum(c.get(key) or 0 for c in s) for s in runs])[0]

        def per_conn(key, scale=1.0):
            return mean_std([c[key] * scale for s in runs for c in s if c.get(key) is not None])[0]

        out.append({"cell": cell.id, "label": cell.label, "short_label": ctx.label(cell), "runs": len(runs),
                    "connections": mean_std([len(s) for s in runs])[0],
                    "retransmits": per_run("total_retrans"), "rtos": per_run("total_rto"),
                    "min_rtt_s": per_conn("min_rtt_us", 1e-6), "srtt_s": per_conn("rtt_us", 1e-6),
                    "cwnd_segments": per_conn("snd_cwnd")})
    return out


def _state_figures(ctx: ReportContext, section) -> list[dict]:
    """TCP state over time of each cell's first complete run that has ``tcp_state`` records (a
    run measured before the sampler, or a committed one, has none and gets no figure)."""
    from tcpdelay.report import results_plots as rp
    from tcpdelay.results.tcp_state import tcp_state_series

    drawn = []
    for cell in ctx.results.cells:
        for r in ctx.complete(cell):
            series = tcp_state_series(r.run_dir)
            if not series:
                continue
            names = {**ctx.measures(r).flow_names, **{f.flow_id: f.name for f in r.flows}}
            multi = {s.flow_id for s in series if s.connection != 0}
            curves = [(names.get(s.flow_id, f"flow {s.flow_id}") + (f" conn {s.connection}" if s.flow_id in multi else ""),
                       s.t_s, s.cwnd_segments, s.srtt_s, s.delivery_rate_bps) for s in series]
            no_rate = not rp.has_values(c[4] for c in curves)
            parts = chunks(curves, TCP_STATE_CURVES_PER_FIGURE)
            title = f"TCP state: {ctx.label(cell)}, seed {r.seed}"
            for i, part in enumerate(parts):
                section().figure(
                    rp.tcp_state_figure(part, title=part_title(title, i, len(parts), "connections part")),
                    f"TCP state over time of {ctx.label(cell)!r}, seed {r.seed} (first complete repetition "
                    "with TCP state records): congestion window, smoothed RTT"
                    + (" (no delivery rate: this run's TCP did not record one — ns-3 has none — so that "
                       "panel is left out)" if no_rate else " and delivery rate")
                    + " of every TCP connection, sampled by the sender.")
            drawn.append({"cell": cell.id, "label": cell.label, "short_label": ctx.label(cell), "seed": r.seed,
                          "connections": len(curves), "figures": len(parts), "delivery_rate": not no_rate})
            break
    return drawn


def _kept_state_figures(ctx: ReportContext, section, drawn_cells: set[str]) -> list[dict]:
    """The window over time of the cells whose runs' records are gone but whose sweep kept them
    (``tcp_state.parquet``, :mod:`tcpdelay.results.kept_tcp_state`): the window only."""
    from tcpdelay.report import results_plots as rp
    from tcpdelay.results.kept_tcp_state import kept_tcp_state

    kept = kept_tcp_state(ctx.results.path)
    drawn = []
    for cell in ctx.results.cells:
        if cell.id in drawn_cells or cell.id not in kept:
            continue
        curves = [(f"conn {k}", t, cwnd, np.full(t.size, np.nan), np.full(t.size, np.nan))
                  for k, t, cwnd in kept[cell.id]]
        parts = chunks(curves, TCP_STATE_CURVES_PER_FIGURE)
        title = f"TCP window: {ctx.label(cell)}"
        for i, part in enumerate(parts):
            section().figure(
                rp.tcp_state_figure(part, title=part_title(title, i, len(parts), "connections part")),
                f"Congestion window over time of {ctx.label(cell)!r}, one curve per connection, from the "
                "TCP state records the sweep kept (tcp_state.parquet; the runs' own records are not "
                "committed): the window only (no RTT or rate was kept).")
        drawn.append({"cell": cell.id, "label": cell.label, "short_label": ctx.label(cell), "seed": None,
                      "connections": len(curves), "figures": len(parts), "delivery_rate": False})
    return drawn

"""Figures of measured results: delay CDF, late fraction against playout delay, quality over
time, and model against measurement (Brosh et al., *The Delay-Friendliness of TCP for Real-Time
Traffic*: Fig 5 predicted vs measured mean/95th percentile, Fig 8 relative error, Fig 11 standard
deviation, Fig 23 late packets against playout delay).

Matplotlib without pyplot (no global state): every function returns a
:class:`matplotlib.figure.Figure` for :meth:`tcpdelay.report.html.Section.figure`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure


def log_ms_axis(ax) -> None:
    """A log x axis of milliseconds labelled 1-2-5 in plain numbers (``200``, ``500``, ``1000``),
    no minor labels: the labels never run into each other, whatever the range."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    wide = lo > 0 and hi / lo > 10 ** 2.5  # 1-2-5 over many decades would crowd: decades only
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


#: Points an empirical CDF is drawn with at most (:func:`ecdf_steps`).
ECDF_MAX_POINTS = 2000


def ecdf_steps(values, max_points: int = ECDF_MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of ``values`` (NaN left out) as ``(x, P(X ≤ x))`` for a ``where="post"``
    step curve, thinned to at most ``max_points`` steps: the sorted values at ranks
    ``⌈k·n/max_points⌉``, ``k = 1 … max_points``, and the smallest one. Every point drawn lies on
    the exact curve, and between two of them the curve drawn is off by less than
    ``1/max_points`` in probability (0.05 % of the axis, a fifth of a pixel at the reports'
    size); drawing every sample of long runs (75 000 for five 300-s video runs) cost seconds
    a figure."""
    d = np.asarray(values, float)
    d = np.sort(d[np.isfinite(d)])
    n = d.size
    if n <= max_points:
        return d, np.arange(1, n + 1) / n
    ranks = np.unique(np.concatenate(([1], np.ceil(np.arange(1, max_points + 1) * n / max_points).astype(np.int64))))
    return d[ranks - 1], ranks / n


def _style_cdf(ax, title, *, xlabel: str, ylabel: str) -> None:
    """Axes of an empirical CDF of times: log ms, probability 0..1, grid, legend outside."""
    log_ms_axis(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title)
    legend_outside(ax)


def _style_delay_cdf(ax, title) -> None:
    """Axes of a delay CDF."""
    _style_cdf(ax, title, xlabel="one-way delay (ms, log)", ylabel="P(delay ≤ x)")


def legend_outside(ax, **kw):
    """The axes' legend to the right of the axes, outside them, so that it never covers a curve
    (the saved figure grows to hold it); None when nothing is labelled."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                     fontsize=7, frameon=False, **kw)


def delay_cdf_figure(series: Sequence[tuple[str, np.ndarray]], *, title: str = "",
                     model: Sequence[tuple[str, np.ndarray, np.ndarray]] = ()) -> Figure:
    """Empirical CDF of the received packets' delays, one curve per ``(label, delay_s)``
    (NaN = not received, left out); ``model`` adds ``(label, support_s, cdf)`` step curves."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    for label, d in series:
        x, y = ecdf_steps(d)
        if x.size:
            ax.step(x * 1e3, y, where="post", label=label)
    for label, x, c in model:
        ax.step(np.asarray(x) * 1e3, c, where="post", linestyle="--", label=label)
    _style_delay_cdf(ax, title)
    return fig


def late_fraction_figure(series: Sequence[tuple[str, Sequence[float], Sequence[float] | None]], *,
                         title: str = "") -> Figure:
    """Late fraction (log) against playout delay, one curve per ``(label, playout_s, fraction)``."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    floor = None
    for label, x, y in series:
        if y is None:
            continue
        y = np.asarray(y, float)
        pos = y[y > 0]
        if pos.size:
            floor = pos.min() if floor is None else min(floor, pos.min())
        ax.plot(np.asarray(x) * 1e3, np.where(y > 0, y, np.nan), marker=".", markersize=3, label=label)
    ax.set_yscale("log")
    if floor is not None:
        ax.set_ylim(bottom=floor / 2)
    ax.set_xlabel("playout delay from the send time (ms)")
    ax.set_ylabel("fraction of packets late")
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title)
    legend_outside(ax)
    return fig


def quality_over_time_figure(series: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray]], *,
                             bin_s: float, title: str = "") -> Figure:
    """Quality level over time, one panel per ``(label, bin_start_s, mean_level, worst_level)``."""
    n = max(1, len(series))
    fig = Figure(figsize=(7.5, 1.5 + 1.3 * n))
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, t, mean, worst) in zip(axes, series):
        # each bin drawn over its whole width: the last value repeated at the last bin's end
        t = np.append(np.asarray(t, float), float(t[-1]) + bin_s) if len(t) else np.asarray(t, float)
        worst = np.append(worst, worst[-1]) if len(worst) else worst
        mean = np.append(mean, mean[-1]) if len(mean) else mean
        ax.step(t, worst, where="post", color="tab:red", alpha=0.6, label=f"worst per {bin_s:g} s")
        ax.step(t, mean, where="post", color="tab:blue", label="mean")
        ax.set_ylim(-0.2, 5.2)
        ax.set_yticks(range(6))
        ax.set_ylabel("level")
        ax.set_title(label, fontsize=8, loc="left")
        ax.grid(True, alpha=0.3)
    legend_outside(axes[0])
    axes[-1].set_xlabel("time from the start of the media (s)")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def model_vs_measured_figure(points: Sequence[dict], *, stat: str, title: str = "") -> Figure:
    """Predicted against measured ``stat`` (``mean_s``, ``p95_s``, ``std_s``) on log axes with the
    diagonal and a ±20 % band (Brosh et al. Figs 5 and 11). ``points``: dicts with ``label``,
    ``group`` (one marker per group) and ``measured``/``model`` dicts holding ``stat``."""
    fig = Figure(figsize=(6.2, 5.2))
    ax = fig.add_subplot()
    groups: dict[str, list[tuple[float, float]]] = {}
    for p in points:
        m, x = (p.get("measured") or {}).get(stat), (p.get("model") or {}).get(stat)
        if m is None or x is None or not (m > 0 and x > 0):
            continue
        groups.setdefault(p["group"], []).append((m, x))
    allv = [v for g in groups.values() for pair in g for v in pair]
    markers = "os^Dv<>px*"
    for i, (g, pairs) in enumerate(sorted(groups.items())):
        a = np.asarray(pairs) * 1e3
        ax.scatter(a[:, 0], a[:, 1], marker=markers[i % len(markers)], label=g, s=28)
    if allv:
        lo, hi = min(allv) * 1e3 / 1.5, max(allv) * 1e3 * 1.5
        xs = np.array([lo, hi])
        ax.plot(xs, xs, color="black", linewidth=0.8)
        ax.fill_between(xs, xs / 1.2, xs * 1.2, color="grey", alpha=0.15, label="±20 %")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"measured {stat.removesuffix('_s')} (ms)")
    ax.set_ylabel(f"model {stat.removesuffix('_s')} (ms)")
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title)
    if groups:
        legend_outside(ax)
    return fig


def relative_error_figure(points: Sequence[dict], *, title: str = "") -> Figure:
    """Relative error of the mean delay, (model − measured) / measured, against loss, one curve
    per ``group`` (Brosh et al. Fig 8). ``points``: dicts with ``group``, ``loss`` and
    ``relative_error`` (``mean_s``)."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    groups: dict[str, list[tuple[float, float]]] = {}
    for p in points:
        e = (p.get("relative_error") or {}).get("mean_s")
        if e is not None:
            groups.setdefault(p["group"], []).append((p["loss"], e))
    # colour by RTT, line style by profile, marker by stack, when the points say them
    style: dict[str, dict] = {}
    rtts = sorted({p.get("rtt_s") for p in points if p.get("rtt_s") is not None})
    profiles = sorted({p.get("profile") for p in points if p.get("profile")})
    stacks = sorted({p.get("stack") for p in points if p.get("stack")})
    for p in points:
        if p.get("rtt_s") in rtts and p.get("profile") in profiles and p.get("stack") in stacks:
            style[p["group"]] = {"color": f"C{rtts.index(p['rtt_s']) % 10}",
                                 "linestyle": ("-", "--", ":", "-.")[profiles.index(p["profile"]) % 4],
                                 "marker": "os^Dv"[stacks.index(p["stack"]) % 5]}
    for i, (g, pairs) in enumerate(sorted(groups.items())):
        a = np.asarray(sorted(pairs))
        kw = style.get(g, {"marker": "o", "color": f"C{i % 10}"})
        ax.plot(a[:, 0] * 100, a[:, 1] * 100, label=g, **kw)
    ax.axhline(0, color="black", linewidth=0.8)
    for y in (-20, -10, 10, 20):
        ax.axhline(y, color="grey", linewidth=0.5, linestyle=":")
    ax.set_xscale("log")
    ax.set_xlabel("configured loss (%)")
    ax.set_ylabel("relative error of the mean delay (%)")
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title)
    if groups:
        legend_outside(ax)
    return fig


def measured_and_model_cdf_figure(pairs: Sequence[tuple[str, np.ndarray, np.ndarray | None, np.ndarray | None]],
                                  *, title: str = "") -> Figure:
    """Measured delay CDF (solid) and the model's (dashed, same colour) per
    ``(label, measured_delay_s, model_support_s, model_cdf)``; the model may be None (unstable)."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    for i, (label, d, x, c) in enumerate(pairs):
        color = f"C{i % 10}"
        dx, dy = ecdf_steps(d)
        if dx.size:
            ax.step(dx * 1e3, dy, where="post", color=color, label=f"{label} measured")
        if x is not None and c is not None and len(x):
            ax.step(np.asarray(x) * 1e3, c, where="post", color=color, linestyle="--", label=f"{label} model")
        elif dx.size:
            ax.plot([], [], color=color, linestyle="--", label=f"{label} model: unstable")
    _style_delay_cdf(ax, title)
    return fig


def has_values(arrays) -> bool:
    """Whether any of ``arrays`` holds a finite value (a panel of only NaN is left out)."""
    return any(np.isfinite(np.asarray(a, float)).any() for a in arrays)


def tcp_state_figure(series: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]], *,
                     title: str = "") -> Figure:
    """TCP state over time, one curve per ``(label, t_s, cwnd_segments, srtt_s,
    delivery_rate_bps)``: congestion window (segments), smoothed RTT (ms) and throughput (the
    kernel's delivery rate, Mbit/s) in panels sharing the time axis, as flent's time-series plots
    and the papers' cwnd traces show them. A quantity no connection recorded (ns-3 records no
    delivery rate: all NaN) gets no panel."""
    panels = [("cwnd (segments)", 2, 1.0, True),
              ("smoothed RTT (ms)", 3, 1e3, has_values(s[3] for s in series)),
              ("delivery rate (Mbit/s)", 4, 1e-6, has_values(s[4] for s in series))]
    panels = [p for p in panels if p[3]]
    fig = Figure(figsize=(7.5, 1.2 + 1.95 * len(panels)))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for label, *values in series:
        color = None
        for ax, (_, idx, scale, _) in zip(axes, panels):
            y = np.asarray(values[idx - 1], float) * scale
            if idx == 2:
                line, = ax.step(values[0], y, where="post", label=label, linewidth=0.9)
                color = line.get_color()
            else:
                ax.plot(values[0], y, color=color, linewidth=0.9)
    for ax, (ylabel, _, _, _) in zip(axes, panels):
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[-1].set_xlabel("time from the run's first sample (s)")
    legend_outside(axes[0])
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def times_cdf_figure(series: Sequence[tuple[str, np.ndarray]], *, xlabel: str, title: str = "") -> Figure:
    """Empirical CDF of durations (s, drawn in ms on a log axis), one curve per ``(label, x_s)``
    (NaN left out): handshake and transfer times."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    for label, x in series:
        xs, ys = ecdf_steps(x)
        if xs.size:
            ax.step(xs * 1e3, ys, where="post", label=f"{label} (n={int(np.isfinite(np.asarray(x, float)).sum())})")
    _style_cdf(ax, title, xlabel=xlabel, ylabel="P(time ≤ x)")
    return fig


def bars_figure(labels: Sequence[str], panels: Sequence[tuple[str, Sequence[float | None], Sequence[float | None]]],
                *, title: str = "") -> Figure:
    """Horizontal bars, one row per label (a cell), one panel per ``(axis label, means, stds)``
    side by side with the labels once on the left; a missing value draws no bar. The stds are
    error bars (the spread over the runs)."""
    n = max(1, len(labels))
    fig = Figure(figsize=(2.2 + 2.6 * len(panels), 1.1 + 0.26 * n))
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    y = np.arange(n)
    for i, (ax, (xlabel, means, stds)) in enumerate(zip(axes, panels)):
        m = np.array([np.nan if v is None else float(v) for v in means])
        e = np.array([0.0 if v is None else float(v) for v in stds])
        ax.barh(y, np.nan_to_num(m), xerr=np.where(np.isfinite(m), e, 0.0), color=f"C{i % 10}", alpha=0.8,
                error_kw={"elinewidth": 0.8, "capsize": 2})
        ax.set_xlabel(xlabel)
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_xlim(left=0)
        finite = m[np.isfinite(m)]
        if finite.size and not finite.any():   # every bar 0: the panel said nothing, drawn empty
            ax.set_xlim(0, 1)
            ax.text(0.5, 0.5, "0 in every cell" if finite.size == n else "0 in every cell measured",
                    transform=ax.transAxes, ha="center", va="center", fontsize=9, color="0.3")
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(labels, fontsize=7)
    axes[0].invert_yaxis()
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def queue_trace_figure(series: Sequence[tuple[str, np.ndarray, np.ndarray]], *, title: str = "") -> Figure:
    """The bottleneck queue's length (packets) over time, one curve per ``(label, t_s, packets)``."""
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    for label, t, packets in series:
        ax.step(t, packets, where="post", label=label, linewidth=0.9)
    ax.set_xlabel("time from the first sample (s)")
    ax.set_ylabel("queue (packets)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    legend_outside(ax)
    return fig

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


def _style_delay_cdf(ax, title) -> None:
    """Axes of a delay CDF: log delay in ms, probability 0..1, grid, legend."""
    ax.set_xscale("log")
    ax.set_xlabel("one-way delay (ms, log)")
    ax.set_ylabel("P(delay ≤ x)")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7, loc="lower right")


def delay_cdf_figure(series: Sequence[tuple[str, np.ndarray]], *, title: str = "",
                     model: Sequence[tuple[str, np.ndarray, np.ndarray]] = ()) -> Figure:
    """Empirical CDF of the received packets' delays, one curve per ``(label, delay_s)``
    (NaN = not received, left out); ``model`` adds ``(label, support_s, cdf)`` step curves."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    for label, d in series:
        d = np.sort(np.asarray(d, float)[np.isfinite(d)])
        if d.size:
            ax.step(d * 1e3, np.arange(1, d.size + 1) / d.size, where="post", label=label)
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
    ax.legend(fontsize=7)
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
    axes[0].legend(fontsize=7, loc="upper right")
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
        ax.legend(fontsize=7)
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
        ax.legend(fontsize=7)
    return fig


def measured_and_model_cdf_figure(pairs: Sequence[tuple[str, np.ndarray, np.ndarray | None, np.ndarray | None]],
                                  *, title: str = "") -> Figure:
    """Measured delay CDF (solid) and the model's (dashed, same colour) per
    ``(label, measured_delay_s, model_support_s, model_cdf)``; the model may be None (unstable)."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    for i, (label, d, x, c) in enumerate(pairs):
        color = f"C{i % 10}"
        d = np.sort(np.asarray(d, float)[np.isfinite(d)])
        if d.size:
            ax.step(d * 1e3, np.arange(1, d.size + 1) / d.size, where="post", color=color, label=f"{label} measured")
        if x is not None and c is not None and len(x):
            ax.step(np.asarray(x) * 1e3, c, where="post", color=color, linestyle="--", label=f"{label} model")
        elif d.size:
            ax.plot([], [], color=color, linestyle="--", label=f"{label} model: unstable")
    _style_delay_cdf(ax, title)
    return fig


def tcp_state_figure(series: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]], *,
                     title: str = "") -> Figure:
    """TCP state over time, one curve per ``(label, t_s, cwnd_segments, srtt_s,
    delivery_rate_bps)``: congestion window (segments), smoothed RTT (ms) and throughput (the
    kernel's delivery rate, Mbit/s) in three panels sharing the time axis, as flent's
    time-series plots and the papers' cwnd traces show them."""
    fig = Figure(figsize=(7.5, 7.0))
    ax_cwnd, ax_rtt, ax_rate = fig.subplots(3, 1, sharex=True)
    for label, t, cwnd, srtt, rate in series:
        line, = ax_cwnd.step(t, cwnd, where="post", label=label, linewidth=0.9)
        ax_rtt.plot(t, np.asarray(srtt, float) * 1e3, color=line.get_color(), linewidth=0.9)
        ax_rate.plot(t, np.asarray(rate, float) / 1e6, color=line.get_color(), linewidth=0.9)
    ax_cwnd.set_ylabel("cwnd (segments)")
    ax_rtt.set_ylabel("smoothed RTT (ms)")
    ax_rate.set_ylabel("delivery rate (Mbit/s)")
    ax_rate.set_xlabel("time from the run's first sample (s)")
    for ax in (ax_cwnd, ax_rtt, ax_rate):
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    if series:
        ax_cwnd.legend(fontsize=7, loc="upper right")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig

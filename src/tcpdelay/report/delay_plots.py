"""Plots of the delay model: distribution, working-region map (Figs 14-16), late fraction vs
playout delay (Fig 23). Each function writes one file (format from the suffix) and returns
its path."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_delay_distribution(pred, path, title: str = "") -> Path:
    """CDF of the per-packet delay, with mean and 95th/99th percentiles marked."""
    fig, ax = plt.subplots(figsize=(6, 4))
    if pred.unstable:
        ax.text(0.5, 0.5, "unstable: the source's rate exceeds TCP's throughput",
                ha="center", va="center", transform=ax.transAxes)
    else:
        x = np.repeat(pred.support_s, 2)[1:]
        cum = np.cumsum(pred.pmf)
        y = np.repeat(cum, 2)[:-1]
        ax.plot(np.concatenate([[pred.support_s[0]], x]), np.concatenate([[0.0], y]), lw=1.5)
        for q, style in ((95, "--"), (99, ":")):
            v = pred.percentile_s(q)
            ax.axvline(v, ls=style, color="grey", lw=1)
            ax.text(v, 0.05 + (0.1 if q == 99 else 0), f" p{q} {v * 1e3:.0f} ms", fontsize=8)
        ax.set_xlim(left=0, right=max(pred.max_s * 1.05, pred.support_s[0] + 0.01))
    ax.set_xlabel("delay (s)")
    ax.set_ylabel("P(delay ≤ x)")
    ax.set_title(title or "Predicted per-packet delay")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_region(region: dict, path) -> Path:
    """Percentile delay vs loss rate per RTT, the bound as a line (like Figures 14-16)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, rtt in enumerate(region["rtts_s"]):
        cells = sorted((c for c in region["cells"] if c["rtt_s"] == rtt), key=lambda c: c["loss"])
        xs = [c["loss"] * 100 for c in cells if c["value_s"] is not None]
        ys = [c["value_s"] for c in cells if c["value_s"] is not None]
        line, = ax.plot(xs, ys, marker="o", label=f"RTT {rtt * 1e3:g} ms")
        bad = [c["loss"] * 100 for c in cells if c["unstable"]]
        if bad:   # a row of ✗ per RTT above the bound: at one loss rate they stood on each other
            ax.plot(bad, [unstable_mark_s(region["bound_s"], k)] * len(bad), marker="x", ls="none",
                    color=line.get_color())
    ax.axhline(region["bound_s"], color="k", ls="--", lw=1, label=f"bound {region['bound_s']:g} s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("loss rate (%)")
    ax.set_ylabel(f"{region['percentile']:g}th percentile delay (s)")
    ax.set_title(f"Working region: {region['profile']} (x: unstable)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _save(fig, path)


def unstable_mark_s(bound_s: float, k: int) -> float:
    """Where the region plot puts the ✗ (unstable) of its ``k``-th RTT: above the bound, a
    row per RTT, a quarter of a decade apart on the log axis."""
    return bound_s * 1.5 * 10 ** (0.25 * k)


def plot_late_fraction(advice: dict, path) -> Path:
    """Late-packet fraction vs playout delay (Figure 23), the recommendation marked."""
    fig, ax = plt.subplots(figsize=(6, 4))
    curve = advice["curve"]
    ax.plot(curve["playout_delay_s"], np.maximum(curve["late_fraction"], 1e-7), lw=1.5)
    rec = advice["recommended_playout_s"]
    # named in the legend: a label at a fixed height stood on the title (y = 0.5 is above a
    # curve whose late fraction starts below it)
    ax.axvline(rec, color="grey", ls="--", lw=1, label=f"L+RTT+3/f = {rec * 1e3:.0f} ms")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_yscale("log")
    ax.set_xlabel("playout delay (s)")
    ax.set_ylabel("fraction of late packets")
    ax.set_title(f"{advice['profile']}: RTT {advice['rtt_s'] * 1e3:g} ms, loss {advice['loss'] * 100:g} %")
    ax.grid(alpha=0.3, which="both")
    return _save(fig, path)

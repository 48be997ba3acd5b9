"""Reproduction 3, part 1: Brosh et al., "The Delay-Friendliness of TCP for Real-Time Traffic",
§6.6 (Fig 23: late packets against a fixed playout delay) and §6.1 (working regions), measured
against the delay model, from the per-packet delays of reproduction 1's runs (configured random
drops, the §5.1 environment the paper used for both figures).

    .venv/bin/python benchmarks/repro_playout_6.py [RESULTS ...] [--stack newreno-2008]
        [--figure docs/experiments/img/playout-6.6.png] [--json]

RESULTS default to ``results/validate-reduced``, ``results/validate-wide`` and
``results/validate-boundary`` (a point measured in more than one keeps the first's runs; their
``validation-delays.parquet``: every packet's one-way delay, NaN for a packet still not
delivered when the run ended, counted late at every playout delay; a 95th percentile or maximum
"not delivered" means more than 5 % / some packets were still in TCP's buffers at the end).

Printed:
- Fig 23: the late fraction at playout delays 0.1, 0.2, 0.4, 1 and 5 s and at the paper's
  "loss recovery latency" L + RTT + 3/f (= 1.5 RTT + 60 ms here), measured and model
  (``tcpdelay.model.delay.predict``, random loss, the configured drop rate);
- §6.1: whether each point lies in the working region — VoIP: 95th percentile ≤ 200 ms;
  video: maximum ≤ 5 s (measured maximum; for the model, whose distribution has an unbounded
  tail, its 99.9th percentile, the 0.1 % late bound the paper cites for video).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from repro_common import save_figure
from tcpdelay.model.delay import predict
from tcpdelay.model.delay.playout import recommended_playout_s
from tcpdelay.model.delay.profiles import PROFILES

PLAYOUTS_S = (0.1, 0.2, 0.4, 1.0, 5.0)


def points(results: list[Path], stack: str) -> list[dict]:
    seen = {}
    for res in results:
        t = pq.read_table(res / "validation-delays.parquet").to_pydict()
        groups: dict[tuple, list[float]] = {}
        for prof, st, rtt, loss, d in zip(t["profile"], t["stack"], t["rtt_s"], t["loss"], t["delay_s"]):
            if st == stack:
                groups.setdefault((prof, round(rtt, 4), round(loss, 5)), []).append(d)
        for key, ds in groups.items():
            seen.setdefault(key, np.array(ds, dtype=float))  # first results directory wins
    out = []
    for (prof, rtt, loss), d in sorted(seen.items()):
        d = np.where(np.isnan(d), np.inf, d)
        pred = predict(prof, rtt_s=rtt, loss=loss, stack="paper")
        rate_pps = PROFILES[prof].rate_pps
        rec = recommended_playout_s(rtt, rate_pps)
        xs = list(PLAYOUTS_S) + [rec]
        meas_late = [float(np.mean(d > x)) for x in xs]
        model_late = [float(pred.late_fraction(x)) for x in xs]
        m_p95 = float(np.sort(d)[int(np.ceil(0.95 * d.size)) - 1])  # inf: not delivered in the run
        m_max = float(np.max(d))
        if prof.startswith("voip"):
            meas_ok, model_ok = m_p95 <= 0.2, (not pred.unstable and float(pred.quantile(0.95)) <= 0.2)
        else:
            meas_ok, model_ok = m_max <= 5.0, (not pred.unstable and float(pred.quantile(0.999)) <= 5.0)
        out.append({"profile": prof, "rtt_s": rtt, "loss": loss, "packets": int(d.size),
                    "recommended_playout_s": rec, "playouts_s": xs,
                    "late_measured": meas_late, "late_model": model_late,
                    "p95_s": m_p95, "max_s": m_max,
                    "model_p95_s": None if pred.unstable else float(pred.quantile(0.95)),
                    "model_p999_s": None if pred.unstable else float(pred.quantile(0.999)),
                    "model_unstable": bool(pred.unstable),
                    "in_region_measured": bool(meas_ok), "in_region_model": bool(model_ok),
                    "_delays": d, "_pred": pred})
    return out


def figure(pts: list[dict], path: Path, stack: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    colors = {0.02: "tab:blue", 0.1: "tab:orange", 0.3: "tab:red"}
    styles = {0.001: ":", 0.005: (0, (1, 1)), 0.01: "-", 0.02: "-.", 0.05: "--", 0.1: (0, (5, 1))}
    for ax, prof in zip(axes, ("voip", "video")):
        for p in pts:
            if p["profile"] != prof or p["loss"] not in (0.01, 0.05) and not (p["rtt_s"] == 0.1 and p["loss"] == 0.02):
                continue
            x = np.linspace(0.0, 2.0 if prof == "voip" else 6.0, 400)
            d = p["_delays"]
            meas = [(d > xi).mean() for xi in x]
            c = colors.get(p["rtt_s"], "k")
            ls = styles.get(p["loss"], "-")
            ax.plot(x, meas, color=c, ls=ls, lw=1.6,
                    label=f"RTT {p['rtt_s']*1e3:.0f} ms, p {p['loss']*100:g}%")
            ax.plot(x, np.atleast_1d(p["_pred"].late_fraction(x)), color=c, ls=ls, lw=0.8, alpha=0.6)
        ax.set_yscale("log")
        ax.set_ylim(1e-4, 1.1)
        ax.set_xlabel("playout delay (s)")
        ax.set_title(f"{prof} ({stack}); thick: measured, thin: model")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of late packets")
    axes[0].legend(fontsize=7)
    save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, nargs="*",
                    default=[Path(p) for p in ("results/validate-reduced", "results/validate-wide",
                                                "results/validate-boundary") if Path(p).exists()])
    ap.add_argument("--stack", default="newreno-2008", choices=["newreno-2008", "linux-default"])
    ap.add_argument("--figure", type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    pts = points(a.results, a.stack)
    if a.figure:
        figure(pts, a.figure, a.stack)
    if a.json:
        def finite(v):
            return None if isinstance(v, float) and not np.isfinite(v) else v
        print(json.dumps([{k: finite(v) for k, v in p.items() if not k.startswith("_")} for p in pts], indent=1))
        return
    print(f"Fig 23 ({a.stack}): late fraction, measured / model, at a fixed playout delay")
    head = " | ".join(f"{x:g} s" for x in PLAYOUTS_S)
    print(f"| profile | RTT ms | drop % | packets | {head} | L+RTT+3/f |")
    print("|---|---|---|---|" + "---|" * (len(PLAYOUTS_S) + 1))
    for p in pts:
        cells = " | ".join(f"{m:.3f} / {mo:.3f}" for m, mo in zip(p["late_measured"], p["late_model"]))
        print(f"| {p['profile']} | {p['rtt_s']*1e3:.0f} | {p['loss']*100:g} | {p['packets']} | {cells} "
              f"({p['recommended_playout_s']:.3f} s) |")
    print()
    print(f"§6.1 working region ({a.stack}): VoIP 95th pct ≤ 200 ms, video max ≤ 5 s (model: 99.9th pct)")
    print("| profile | RTT ms | drop % | measured 95% / max s | model 95% / 99.9% s | in region: measured / model |")
    print("|---|---|---|---|---|---|")

    def s(x):
        if x is None:
            return "unstable"
        return "not delivered" if not np.isfinite(x) else f"{x:.3f}"
    for p in pts:
        yn = lambda b: "yes" if b else "no"  # noqa: E731
        print(f"| {p['profile']} | {p['rtt_s']*1e3:.0f} | {p['loss']*100:g} | {s(p['p95_s'])} / {s(p['max_s'])} "
              f"| {s(p['model_p95_s'])} / {s(p['model_p999_s'])} | {yn(p['in_region_measured'])} / {yn(p['in_region_model'])} |")


if __name__ == "__main__":
    main()

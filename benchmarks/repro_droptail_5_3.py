"""Reproduction 2: Brosh et al., "The Delay-Friendliness of TCP for Real-Time Traffic", §5.3
(Tables 3-4) — CBR-TCP flows against FTP and web flows behind a drop-tail router.

Reads a sweep directory of ``experiments/droptail-5.3*.toml`` and prints, per cell (queue ×
web flows), what Table 3 reports: the CBR-TCP flows' network loss rate, RTT, 95th percentile
delay and jitter (mean ± std over the five flows), next to the delay model's 95th percentile at
the measured loss and RTT. Usage::

    .venv/bin/python benchmarks/repro_droptail_5_3.py results/droptail-5.3 [--warmup-s 10]
        [--figure docs/experiments/img/droptail-5.3.png] [--json]

Definitions (ours where the paper gives none):
- loss rate: the CBR flow's retransmitted segments / its packets (TCP_INFO ``total_retrans``;
  one CBR packet is one segment with TCP_NODELAY), summed over the five flows;
- RTT: the flows' smoothed RTT (TCP_INFO ``rtt_us``) at the end of the run, averaged;
- 95% delay: the 95th percentile of the one-way delay (send call to receive) of packets sent
  after ``--warmup-s`` (the first seconds hold the FTP flows' slow-start overshoot, which a 5-min
  run of the paper averages away and a 30-s run does not), per flow, then mean ± std over flows;
- 95% jitter: the 95th percentile of |D(i) - D(i-1)| between consecutive packets of a flow, the
  same way;
- model: ``tcpdelay.model.delay.predict`` with the measured loss and RTT, ``loss_model
  "correlated"`` (as the paper ran it in this environment, Appendix A.1) and ``"random"``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from repro_common import (  # noqa: E402
    emulator_lateness_us, flows_table, media_delays, run_json, runs, save_figure, sweep_script_args,
)

from tcpdelay.errors import ParameterError  # noqa: E402
from tcpdelay.model.delay import predict  # noqa: E402

# Table 3 (VoIP) and Table 4 (video) of the paper: web flows -> (loss %, RTT s, 95% jitter s,
# 95% delay s) for the packet queue and the byte queue.
PAPER = {
    "voip": {"packets": {0: (1.02, 0.317, 0.027, 0.410), 10: (1.60, 0.380, 0.034, 0.498),
                         15: (2.31, 0.371, 0.041, 0.644), 20: (3.39, 0.383, 0.052, 1.335),
                         25: (5.61, 0.385, 0.089, 6.173)},
             "bytes": {0: (0.20, 0.172, 0.014, 0.135), 10: (0.55, 0.178, 0.019, 0.183),
                       15: (0.81, 0.180, 0.022, 0.233), 20: (1.24, 0.182, 0.028, 0.308),
                       25: (2.41, 0.185, 0.040, 3.057)}},
    "video": {"packets": {0: (0.75, 0.101, 0.020, 0.215), 10: (0.81, 0.101, 0.018, 0.265),
                          25: (0.90, 0.101, 0.018, 0.289), 50: (1.20, 0.101, 0.022, 0.608),
                          100: (2.91, 0.101, 0.062, 4.880)},
              "bytes": {0: (1.25, 0.101, 0.030, 0.460), 10: (1.28, 0.101, 0.032, 0.594),
                        25: (1.34, 0.101, 0.035, 0.914), 50: (1.79, 0.101, 0.046, 1.890),
                        100: (3.18, 0.101, 0.109, 5.978)}},
}


def _queue(overrides: dict, scenario_forward: dict | None = None) -> tuple[str, int]:
    fwd = overrides.get("path.forward") or scenario_forward or {}
    if "queue_bytes" in fwd:
        return "bytes", int(fwd["queue_bytes"])
    return "packets", int(fwd.get("queue_packets", 0))


def _model_p95(profile: str, rtt_s: float, loss: float, loss_model: str) -> float | None:
    if loss <= 0:
        return None
    try:
        pred = predict(profile, rtt_s=rtt_s, loss=loss, loss_model=loss_model, stack="paper")
    except ParameterError:
        return None
    return None if pred.unstable else float(pred.quantile(0.95))


def evaluate(sweep_dir: Path, warmup_s: float) -> list[dict]:
    delays = media_delays(sweep_dir)
    rows = []
    for r in runs(sweep_dir):
        flows = flows_table(r["dir"])
        media = [f for f in flows if f["kind"] == "media"]
        profile = media[0]["name"].split("#")[0]
        profile = "video" if "video" in profile else "voip"
        stats = run_json(r["dir"])["tcp_stats"]
        sent = sum(f["packets_sent"] for f in media)
        retrans = sum(s["total_retrans"] for s in stats)
        rtos = sum(s["total_rto"] for s in stats)
        rtt_s = float(np.mean([s["rtt_us"] for s in stats])) / 1e6
        min_rtt_s = float(np.min([s["min_rtt_us"] for s in stats])) / 1e6
        sel = delays.filter(pc.and_(pc.equal(delays["cell_id"], r["cell_id"]),
                                    pc.equal(delays["seed"], r["seed"])))
        p95, jit = [], []
        for f in media:
            t = sel.filter(pc.equal(sel["flow_id"], f["flow_id"]))
            d = t["delay_s"].to_numpy()[t["send_time_s"].to_numpy() >= warmup_s]
            d = d[np.isfinite(d)]
            p95.append(float(np.percentile(d, 95)))
            jit.append(float(np.percentile(np.abs(np.diff(d)), 95)))
        queue, limit = _queue(r["overrides"])
        web = int(r["overrides"].get("cross[1].count", 0))
        bulk = [f for f in flows if f["kind"] == "bulk"]
        loss = retrans / sent if sent else 0.0
        rows.append({
            "cell_id": r["cell_id"], "seed": r["seed"], "profile": profile, "queue": queue,
            "queue_limit": limit, "web_flows": web, "loss": loss, "rtos": rtos,
            "rtt_s": rtt_s, "min_rtt_s": min_rtt_s,
            "p95_delay_s": float(np.mean(p95)), "p95_delay_std_s": float(np.std(p95)),
            "p95_jitter_s": float(np.mean(jit)),
            "ftp_goodput_bps": float(np.mean([f["goodput_bps"] for f in bulk])) if bulk else None,
            "model_p95_correlated_s": _model_p95(profile, rtt_s, loss, "correlated"),
            "model_p95_random_s": _model_p95(profile, rtt_s, loss, "random"),
            "lateness_p99_us": emulator_lateness_us(r["dir"])[0],
            "lateness_max_us": emulator_lateness_us(r["dir"])[1],
            # the paper's byte queue: 50 000 B for VoIP (Table 3), 100 000 B for video (Table 4)
            "paper": PAPER[profile][queue].get(web)
            if queue == "packets" or limit == {"voip": 50000, "video": 100000}[profile] else None,
        })
    return rows


def _f(x, scale=1.0, fmt="{:.3f}"):
    return "—" if x is None else fmt.format(x * scale)


def figure(rows: list[dict], path: Path) -> None:
    """95th percentile delay and loss against web flows, per queue: measured (markers and
    lines), the paper's (open markers, dashed), the model's (crosses)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.6))
    colors = {}
    for r in rows:
        key = f"{r['queue_limit']} {'pkts' if r['queue'] == 'packets' else 'B'}"
        colors.setdefault(key, f"C{len(colors)}")
    for key, c in colors.items():
        sel = [r for r in rows if f"{r['queue_limit']} {'pkts' if r['queue'] == 'packets' else 'B'}" == key]
        web = [r["web_flows"] for r in sel]
        axes[0].plot(web, [r["p95_delay_s"] for r in sel], "o-", color=c, label=f"{key} measured")
        axes[0].plot(web, [r["model_p95_correlated_s"] or np.nan for r in sel], "x", color=c, ms=8)
        axes[1].plot(web, [r["loss"] * 100 for r in sel], "o-", color=c)
        paper = [(r["web_flows"], r["paper"]) for r in sel if r["paper"]]
        pweb = sorted({w for w in PAPER[sel[0]["profile"]][sel[0]["queue"]]}) if paper else []
        if paper:
            tab = PAPER[sel[0]["profile"]][sel[0]["queue"]]
            axes[0].plot(pweb, [tab[w][3] for w in pweb], "s--", mfc="none", color=c, label=f"{key} paper")
            axes[1].plot(pweb, [tab[w][0] for w in pweb], "s--", mfc="none", color=c)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("95th pct delay (s); x: model")
    axes[1].set_ylabel("CBR-TCP loss rate (%)")
    for ax in axes:
        ax.set_xlabel("web flows")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    save_figure(fig, path)


def main() -> None:
    a = sweep_script_args(__doc__)
    rows = evaluate(a.sweep_dir, a.warmup_s)
    if a.figure:
        figure(rows, a.figure)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{a.sweep_dir}: packets sent after {a.warmup_s:g} s; paper values in brackets")
    print("| queue | web | loss % | RTT s (min) | 95% jitter s | 95% delay s (±std over flows) | model 95% s corr / random | FTP goodput kb/s | emulator late p99 / max µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        p = r["paper"]
        q = f"{r['queue_limit']} {'pkts' if r['queue'] == 'packets' else 'B'}"
        print(f"| {q} | {r['web_flows']} "
              f"| {r['loss']*100:.2f} [{_f(p and p[0], fmt='{:.2f}')}] "
              f"| {r['rtt_s']:.3f} ({r['min_rtt_s']:.3f}) [{_f(p and p[1])}] "
              f"| {r['p95_jitter_s']:.3f} [{_f(p and p[2])}] "
              f"| {r['p95_delay_s']:.3f} ± {r['p95_delay_std_s']:.3f} [{_f(p and p[3])}] "
              f"| {_f(r['model_p95_correlated_s'])} / {_f(r['model_p95_random_s'])} "
              f"| {_f(r['ftp_goodput_bps'], 1e-3, '{:.0f}')} "
              f"| {r['lateness_p99_us']:.0f} / {r['lateness_max_us']:.0f} |")


if __name__ == "__main__":
    main()

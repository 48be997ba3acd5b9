"""Reproduction 3, part 2: Brosh et al., "The Delay-Friendliness of TCP for Real-Time Traffic",
§7 (Figs 26 and 28): split-N and parallel connections (blind, intelligent) for a video flow in
the drop-tail environment of §5.3, and the throughput of the background FTP flows.

    .venv/bin/python benchmarks/repro_split_parallel_7.py results/split-parallel-7 [--warmup-s 10]
        [--figure docs/experiments/img/split-parallel-7.png] [--json]

Per cell (web flows × heuristic): the video's 95th percentile and mean one-way delay (packets
sent after ``--warmup-s``; a packet split into N pieces counts when its last piece arrives), its
reduction against the plain flow of the same web load (Figs 26a, 28a), the mean goodput of the
five FTP flows and its change (Figs 26b, 28b), the loss the video's connections saw
(retransmitted bytes / acknowledged bytes, TCP_INFO) and the model's 95th percentile at that loss
and RTT with the same split / blind connections (``predict(..., split=N, connections=N)``; the
model has no 'intelligent' scheduler).
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


def _heuristic(h: dict) -> tuple[str, int, int, str]:
    split = int(h.get("split", 1))
    conns = int(h.get("connections", 1))
    sched = h.get("scheduler", "blind")
    if conns > 1:
        return f"{conns} conn {sched}", split, conns, sched
    return ("plain" if split == 1 else f"split-{split}"), split, conns, sched


def evaluate(sweep_dir: Path, warmup_s: float) -> list[dict]:
    delays = media_delays(sweep_dir)
    rows = []
    for r in runs(sweep_dir):
        ov = r["overrides"]
        scen = (r["dir"] / "scenario.toml").read_text()
        import tomllib
        sc = tomllib.loads(scen)
        h = sc["flows"][0].get("heuristics", {})
        label, split, conns, sched = _heuristic(h)
        web = sum(c.get("count", 1) for c in sc.get("cross", []) if c["kind"] == "web_onoff")
        flows = flows_table(r["dir"])
        media = [f for f in flows if f["kind"] == "media"]
        bulk = [f for f in flows if f["kind"] == "bulk"]
        stats = run_json(r["dir"])["tcp_stats"]
        acked = sum(s["bytes_acked"] for s in stats)
        loss = sum(s["bytes_retrans"] for s in stats) / acked if acked else 0.0
        rtt_s = float(np.mean([s["rtt_us"] for s in stats])) / 1e6
        sel = delays.filter(pc.and_(pc.equal(delays["cell_id"], r["cell_id"]),
                                    pc.equal(delays["seed"], r["seed"])))
        d = sel["delay_s"].to_numpy()[sel["send_time_s"].to_numpy() >= warmup_s].astype(float)
        d = np.where(np.isnan(d), np.inf, d)
        model = None
        if loss > 0 and not (conns > 1 and sched == "intelligent"):  # the model is blind only
            try:
                pred = predict("video", rtt_s=rtt_s, loss=loss, split=split, connections=conns, stack="paper")
                model = None if pred.unstable else float(pred.quantile(0.95))
            except ParameterError:
                model = None
        rows.append({"cell_id": r["cell_id"], "seed": r["seed"], "web_flows": web,
                     "heuristic": label, "split": split, "connections": conns, "scheduler": sched,
                     "media_flows": len(media), "p95_s": float(np.percentile(d, 95)),
                     "mean_s": float(np.mean(d)), "late_400ms": float(np.mean(d > 0.4)),
                     "loss": loss, "rtt_s": rtt_s, "rtos": sum(s["total_rto"] for s in stats),
                     "ftp_goodput_bps": float(np.mean([f["goodput_bps"] for f in bulk])),
                     "model_p95_s": model,
                     "lateness_p99_us": emulator_lateness_us(r["dir"])[0],
                     "lateness_max_us": emulator_lateness_us(r["dir"])[1]})
    base = {(r["web_flows"], r["seed"]): r for r in rows if r["heuristic"] == "plain"}
    for r in rows:
        b = base.get((r["web_flows"], r["seed"]))
        r["p95_reduction"] = None if b is None else 1 - r["p95_s"] / b["p95_s"]
        r["ftp_change"] = None if b is None else r["ftp_goodput_bps"] / b["ftp_goodput_bps"] - 1
    return rows


def figure(rows: list[dict], path: Path) -> None:
    """Per heuristic (and web load): the mean over seeds of the video's 95th percentile (bars,
    min..max as error bars) beside the model's, and the FTP flows' mean goodput."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = list(dict.fromkeys((r["web_flows"], r["heuristic"]) for r in rows))
    many_web = len({k[0] for k in keys}) > 1
    labels = [f"{h}, web {w}" if many_web else h for w, h in keys]

    def agg(field):
        out = []
        for k in keys:
            v = [r[field] for r in rows if (r["web_flows"], r["heuristic"]) == k and r[field] is not None]
            out.append((np.mean(v), np.mean(v) - min(v), max(v) - np.mean(v)) if v else (0.0, 0.0, 0.0))
        return np.array(out)
    x = np.arange(len(keys))
    meas, model, ftp = agg("p95_s"), agg("model_p95_s"), agg("ftp_goodput_bps") / [1e3, 1e3, 1e3]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    axes[0].bar(x - 0.2, meas[:, 0], 0.4, yerr=meas[:, 1:].T, capsize=3, label="measured (min..max over seeds)")
    axes[0].bar(x + 0.2, model[:, 0], 0.4, label="model (no intelligent scheduler)")
    axes[0].set_ylabel("video 95th pct delay (s)")
    axes[1].bar(x, ftp[:, 0], 0.5, yerr=ftp[:, 1:].T, capsize=3, color="tab:green")
    axes[1].set_ylabel("mean FTP goodput (kb/s)")
    for ax in axes:
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
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

    def f(x, fmt="{:.3f}"):
        return "—" if x is None else fmt.format(x)
    print(f"{a.sweep_dir}: video packets sent after {a.warmup_s:g} s")
    print("| web | heuristic | 95% delay s | vs plain | mean s | late > 0.4 s | loss % | RTT s | RTOs | model 95% s | FTP goodput kb/s | vs plain | emulator late p99 / max µs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['web_flows']} | {r['heuristic']} | {r['p95_s']:.3f} | {f(r['p95_reduction'] and -r['p95_reduction'], '{:+.0%}')} "
              f"| {r['mean_s']:.3f} | {r['late_400ms']:.3f} | {r['loss']*100:.2f} | {r['rtt_s']:.3f} | {r['rtos']} "
              f"| {f(r['model_p95_s'])} | {r['ftp_goodput_bps']/1e3:.0f} | {f(r['ftp_change'], '{:+.0%}')} "
              f"| {r['lateness_p99_us']:.0f} / {r['lateness_max_us']:.0f} |")
    seeds = sorted({r["seed"] for r in rows})
    if len(seeds) > 1:
        print()
        print(f"Mean over seeds {', '.join(map(str, seeds))} (min..max in brackets)")
        print("| web | heuristic | runs | 95% delay s | change vs plain (per seed, averaged) | model 95% s | FTP goodput change |")
        print("|---|---|---|---|---|---|---|")
        for key in dict.fromkeys((r["web_flows"], r["heuristic"]) for r in rows):
            g = [r for r in rows if (r["web_flows"], r["heuristic"]) == key]

            def span(vals, fmt):
                vals = [v for v in vals if v is not None]
                if not vals:
                    return "—"
                return f"{fmt.format(np.mean(vals))} [{fmt.format(min(vals))}..{fmt.format(max(vals))}]"
            print(f"| {key[0]} | {key[1]} | {len(g)} | {span([r['p95_s'] for r in g], '{:.3f}')} "
                  f"| {span([r['p95_reduction'] and -r['p95_reduction'] for r in g], '{:+.0%}')} "
                  f"| {span([r['model_p95_s'] for r in g], '{:.3f}')} "
                  f"| {span([r['ftp_change'] for r in g], '{:+.0%}')} |")


if __name__ == "__main__":
    main()

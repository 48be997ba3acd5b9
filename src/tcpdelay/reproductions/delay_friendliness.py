"""Brosh, Baset, Misra, Rubenstein and Schulzrinne, "The Delay-Friendliness of TCP for Real-Time
Traffic" (SIGMETRICS 2008 / ToN 2010): the analysis of its reproductions on the testbed.

- §5.3 (Tables 3-4; docs/experiments/droptail-5.3.md): CBR-TCP flows against FTP and web flows
  behind a drop-tail router. :func:`droptail_rows`, per run of a sweep of
  ``experiments/droptail-5.3*.toml``: the CBR-TCP flows' network loss rate, RTT, 95th percentile
  delay and jitter (mean ± std over the five flows), next to the delay model's 95th percentile at
  the measured loss and RTT. Definitions (ours where the paper gives none):

  - loss rate: the CBR flow's retransmitted segments / its packets (TCP_INFO ``total_retrans``;
    one CBR packet is one segment with TCP_NODELAY), summed over the five flows;
  - RTT: the flows' smoothed RTT (TCP_INFO ``rtt_us``) at the end of the run, averaged;
  - 95% delay: the 95th percentile of the one-way delay (send call to receive) of packets sent
    after the warm-up (:data:`WARMUP_S`: the first seconds hold the FTP flows' slow-start
    overshoot, which a 5-min run of the paper averages away and a 30-s run does not), per flow,
    then mean ± std over flows;
  - 95% jitter: the 95th percentile of |D(i) - D(i-1)| between consecutive packets of a flow, the
    same way;
  - model: ``tcpdelay.model.delay.predict`` with the measured loss and RTT, ``loss_model
    "correlated"`` (as the paper ran it in this environment, Appendix A.1) and ``"random"``.

- §6.1 and §6.6 (Figs 14, 23; docs/experiments/playout-6.md): :func:`playout_points` reads the
  §5.1 validation results (``validation-delays.parquet`` of ``tcpdelay validate``; every packet's
  one-way delay, NaN = not delivered within the run) of one stack. Lateness is counted against
  the one-way delay; a packet not delivered is late at any playout delay. Fig 23: the late
  fraction at playout delays 0.1, 0.2, 0.4, 1 and 5 s and at the paper's "loss recovery latency"
  L + RTT + 3/f (= 1.5 RTT + 60 ms here), measured and model (random loss, the configured drop
  rate); §6.1: whether each point lies in the working region — VoIP: 95th percentile ≤ 200 ms;
  video: maximum ≤ 5 s (measured maximum; for the model, whose distribution has an unbounded
  tail, its 99.9th percentile, the 0.1 % late bound the paper cites for video).

- §7 (Figs 26, 28; docs/experiments/split-parallel-7.md): split-N and parallel connections
  (blind, intelligent) for a video flow in the drop-tail environment of §5.3, and the throughput
  of the background FTP flows. :func:`split_rows`, per run: the video's 95th percentile and mean
  one-way delay (packets sent after the warm-up; a packet split into N pieces counts when its
  last piece arrives), its reduction against the plain flow of the same web load and seed (Figs
  26a, 28a), the mean goodput of the five FTP flows and its change (Figs 26b, 28b), the loss the
  video's connections saw (retransmitted bytes / acknowledged bytes, TCP_INFO), the packets the
  forward link took in (every flow's; beside the plain run's: the extra segments of split-N) and
  the model's 95th percentile at that loss and RTT with the same split / blind connections
  (``predict(..., split=N, connections=N)``; the model has no 'intelligent' scheduler).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tcpdelay.errors import ParameterError
from tcpdelay.model.delay import predict
from tcpdelay.model.delay.playout import recommended_playout_s
from tcpdelay.model.delay.profiles import PROFILES
from tcpdelay.reproductions.sweep_data import (
    emulator_lateness_us, flows_table, media_delays, run_json, runs, save_figure,
)

#: The warm-up cut of §5.3 and §7 (s): packets sent before it are not counted.
WARMUP_S = 10.0


# --- §5.3: drop-tail router (Tables 3-4) ------------------------------------------------------

# Table 3 (VoIP) and Table 4 (video) of the paper: web flows -> (loss %, RTT s, 95% jitter s,
# 95% delay s) for the packet queue and the byte queue.
DROPTAIL_PAPER = {
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


def droptail_rows(sweep_dir: Path, warmup_s: float = WARMUP_S) -> list[dict]:
    """§5.3: one row per run of a drop-tail sweep (Table 3 / 4's measures, the model beside them)."""
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
            "paper": DROPTAIL_PAPER[profile][queue].get(web)
            if queue == "packets" or limit == {"voip": 50000, "video": 100000}[profile] else None,
        })
    return rows


def droptail_figure(rows: list[dict], path: Path) -> None:
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
        pweb = sorted({w for w in DROPTAIL_PAPER[sel[0]["profile"]][sel[0]["queue"]]}) if paper else []
        if paper:
            tab = DROPTAIL_PAPER[sel[0]["profile"]][sel[0]["queue"]]
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


# --- §6.1 and §6.6: working regions and playout delay (Figs 14, 23) -----------------------

PLAYOUTS_S = (0.1, 0.2, 0.4, 1.0, 5.0)


def playout_points(results: list[Path], stack: str) -> list[dict]:
    """§6.1 and §6.6: per (profile, RTT, drop rate) of the validation results, the late fraction at
    fixed playout delays and at L + RTT + 3/f, measured and model, and the working region."""
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


def playout_figure(pts: list[dict], path: Path, stack: str) -> None:
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


# --- §7: split-N and parallel connections (Figs 26, 28) ---------------------------------------

def _heuristic(h: dict) -> tuple[str, int, int, str]:
    split = int(h.get("split", 1))
    conns = int(h.get("connections", 1))
    sched = h.get("scheduler", "blind")
    if conns > 1:
        return f"{conns} conn {sched}", split, conns, sched
    return ("plain" if split == 1 else f"split-{split}"), split, conns, sched


def _forward_packets(run_dir: Path) -> int | None:
    """The packets the emulator took in on the data direction (``a_to_b``) over the run, every
    flow's: set beside the plain run of the same seed, it shows how many more segments split-N
    put on the wire (a 1448-byte packet sent as N segments adds N - 1)."""
    link = run_json(run_dir)["run"].get("link_counters") or {}
    n = (link.get("a_to_b") or {}).get("packets_in")
    return None if n is None else int(n)


def split_rows(sweep_dir: Path, warmup_s: float = WARMUP_S) -> list[dict]:
    """§7: one row per run of a split / parallel sweep, with its change against the plain flow."""
    delays = media_delays(sweep_dir)
    rows = []
    for r in runs(sweep_dir):
        ov = r["overrides"]
        scen = (r["dir"] / "scenario.toml").read_text()
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
                     "lateness_max_us": emulator_lateness_us(r["dir"])[1],
                     "link_packets": _forward_packets(r["dir"])})
    base = {(r["web_flows"], r["seed"]): r for r in rows if r["heuristic"] == "plain"}
    for r in rows:
        b = base.get((r["web_flows"], r["seed"]))
        r["p95_reduction"] = None if b is None else 1 - r["p95_s"] / b["p95_s"]
        r["ftp_change"] = None if b is None else r["ftp_goodput_bps"] / b["ftp_goodput_bps"] - 1
    return rows


def split_figure(rows: list[dict], path: Path) -> None:
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


def playout_json(pts: list[dict]) -> list[dict]:
    """The points as kept in ``results/playout-6/<stack>.json``: without the arrays, an
    unbounded value (not delivered) as null."""
    def finite(v):
        return None if isinstance(v, float) and not np.isfinite(v) else v
    return [{k: finite(v) for k, v in p.items() if not k.startswith("_")} for p in pts]


# --- the page's tables (docs/experiments/droptail-5.3.md) ------------------------------------

#: Each table of the §5.3 page: its marker, and the sweep (in the results directory) it shows.
DROPTAIL_PAGE = (("<!-- table-3 -->", "droptail-5.3"), ("<!-- table-3-long -->", "droptail-5.3-long"),
                 ("<!-- table-4 -->", "droptail-5.3-video"))


def _queue_label(row: dict) -> str:
    if row["queue"] == "packets":
        return f"{row['queue_limit']} packets"
    return f"{row['queue_limit']:,} B".replace(",", " ")


def droptail_table(rows: list[dict]) -> str:
    """The page's table of a §5.3 sweep: measured, the paper's value in brackets where it has
    one, the model at the measured loss and RTT, and the FTP flows' mean goodput."""
    def num(x, fmt="{:.3f}"):
        return "—" if x is None else fmt.format(x)

    def paper(p, i, fmt="{:.3f}"):
        return "" if p is None else f" [{fmt.format(p[i])}]"
    out = ["| queue | web | loss % | RTT s (min) | 95 % jitter s | 95 % delay s (± std over flows) "
           "| model 95 % s: correlated / random | FTP goodput kb/s per flow |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r["paper"]
        out.append(f"| {_queue_label(r)} | {r['web_flows']} | {r['loss'] * 100:.2f}{paper(p, 0, '{:.2f}')} "
                   f"| {r['rtt_s']:.3f} ({r['min_rtt_s']:.3f}){paper(p, 1)} | {r['p95_jitter_s']:.3f}{paper(p, 2)} "
                   f"| {r['p95_delay_s']:.3f} ± {r['p95_delay_std_s']:.3f}{paper(p, 3)} "
                   f"| {num(r['model_p95_correlated_s'])} / {num(r['model_p95_random_s'])} "
                   f"| {num(r['ftp_goodput_bps'] and r['ftp_goodput_bps'] / 1e3, '{:.0f}')} |")
    return "\n".join(out)


def droptail_page_tables(results: Path) -> dict[str, str]:
    """Every measured table of the §5.3 page, by its marker line, from the sweeps' committed
    summaries (``summary.json``, which :func:`droptail_rows` recomputes from the runs)."""
    import json

    return {marker: droptail_table(json.loads((results / name / "summary.json").read_text()))
            for marker, name in DROPTAIL_PAGE}


# --- the page's table (docs/experiments/split-parallel-7.md) ---------------------------------

#: The paper's statements (§7, Figs 26 and 28) set beside a (web flows, heuristic) row of the page:
#: (its change of the 95th percentile, its change of the FTP flows' throughput).
SPLIT_PAPER = {
    (0, "split-2"): ("up to −30 %", "grows with N"),
    (0, "split-4"): ("diminishing or worse", "−27 % on average"),
    (0, "5 conn blind"): ("−90 % on average", "negligible"),
    (0, "5 conn intelligent"): ("better than blind", "negligible"),
}
SPLIT_PAGE = (("<!-- table -->", "split-parallel-7"),)


def _signed_percent(x: float) -> str:
    """``+12 %``, ``−46 %`` (a true minus sign, as the pages write it)."""
    return f"{x * 100:+.0f} %".replace("-", "−")


def split_table(rows: list[dict]) -> str:
    """The page's table of a §7 sweep: per web load and heuristic, the mean over seeds [min..max]
    of the video's 95th percentile, its change against the plain flow of the same seed, the
    model's 95th percentile and the FTP flows' goodput change, the paper's statement beside."""
    out = ["| web | heuristic | video 95 % delay s | change vs plain (paper) | model 95 % s | FTP goodput vs plain (paper) |",
           "|---|---|---|---|---|---|"]
    for web, heuristic in dict.fromkeys((r["web_flows"], r["heuristic"]) for r in rows):
        g = [r for r in rows if (r["web_flows"], r["heuristic"]) == (web, heuristic)]
        p95 = [r["p95_s"] for r in g]
        paper = SPLIT_PAPER.get((web, heuristic))
        name = heuristic.replace("5 conn ", "5 connections, ")
        if heuristic == "plain":
            change = "—"
            ftp = f"{np.mean([r['ftp_goodput_bps'] for r in g]) / 1e3:.0f} kb/s per flow"
        else:
            red = [-r["p95_reduction"] for r in g]
            change = (f"**{_signed_percent(np.mean(red))}** [{_signed_percent(min(red)).removesuffix(' %')}.."
                      f"{_signed_percent(max(red))}]" + (f" ({paper[0]})" if paper else ""))
            ftp = _signed_percent(np.mean([r["ftp_change"] for r in g])) + (f" ({paper[1]})" if paper else "")
        models = [r["model_p95_s"] for r in g if r["model_p95_s"] is not None]
        if g[0]["scheduler"] == "intelligent" and g[0]["connections"] > 1:
            model = "—"
        elif not models:
            model = "unstable"
        elif len(models) == 1:
            model = f"{models[0]:.3f} (one seed)"
        else:
            model = f"{np.mean(models):.3f} [{min(models):.3f}..{max(models):.3f}]"
        out.append(f"| {web} | {name} | {np.mean(p95):.3f} [{min(p95):.3f}..{max(p95):.3f}] | {change} | {model} "
                   f"| {ftp} |")
    return "\n".join(out)


def split_page_tables(results: Path) -> dict[str, str]:
    """The §7 page's table, by its marker line, from the sweep's committed ``summary.json``."""
    import json

    return {marker: split_table(json.loads((results / name / "summary.json").read_text()))
            for marker, name in SPLIT_PAGE}


# --- the page's table of Fig 23 (docs/experiments/playout-6.md) ---------------------------------

#: The points of the page's Fig 23 table (profile, RTT s, drop rate, from the boundary runs: †),
#: in its order, and those whose measured late fraction at the bound the page marks (video at
#: RTT 100 ms, 1-2 %: the paper's rule covers them, the measurement does not hold it).
PLAYOUT_FIG23_ROWS = (
    ("voip", 0.02, 0.01, False), ("voip", 0.02, 0.05, False), ("voip", 0.1, 0.005, False),
    ("voip", 0.1, 0.01, False), ("voip", 0.1, 0.02, False), ("voip", 0.1, 0.05, False),
    ("voip", 0.3, 0.01, False), ("voip", 0.3, 0.05, False), ("video", 0.02, 0.05, False),
    ("video", 0.1, 0.005, False), ("video", 0.1, 0.01, False), ("video", 0.1, 0.02, False),
    ("video", 0.1, 0.05, False), ("video", 0.3, 0.001, False), ("video", 0.3, 0.01, False),
    ("voip", 0.1, 0.03, True), ("voip", 0.3, 0.005, True), ("video", 0.1, 0.03, True), ("video", 0.3, 0.005, True))
PLAYOUT_FIG23_MARKED = {("video", 0.1, 0.01), ("video", 0.1, 0.02)}


def _late(x: float) -> str:
    """A late fraction as the page writes it: exactly none ``0``, all ``1``, else three decimals."""
    return "0" if x == 0 else "1" if x == 1 else f"{x:.3f}"


def playout_fig23_table(points: list[dict]) -> str:
    """Fig 23's table: the late fraction, measured / model, at 0.1, 0.2, 0.4 and 1 s and at
    L + RTT + 3/f, for the page's points (``points``: the kept ``results/playout-6/<stack>.json``)."""
    by = {(p["profile"], round(p["rtt_s"], 4), round(p["loss"], 5)): p for p in points}
    out = ["| profile | RTT | drop | 0.1 s | 0.2 s | 0.4 s | 1 s | at L + RTT + 3/f |", "|---|---|---|---|---|---|---|---|"]
    for profile, rtt, loss, boundary in PLAYOUT_FIG23_ROWS:
        p = by[(profile, rtt, loss)]
        fixed = [p["playouts_s"].index(x) for x in (0.1, 0.2, 0.4, 1.0)]
        cells = [f"{_late(p['late_measured'][i])} / {_late(p['late_model'][i])}" for i in fixed]
        bound = _late(p["late_measured"][-1])
        if (profile, rtt, loss) in PLAYOUT_FIG23_MARKED:
            bound = f"**{bound}**"
        cells.append(f"{bound} / {_late(p['late_model'][-1])} ({p['recommended_playout_s'] * 1000:.0f} ms)")
        out.append(f"| {profile} | {rtt * 1000:.0f} ms | {loss * 100:g} %{' †' if boundary else ''} | "
                   + " | ".join(cells) + " |")
    return "\n".join(out)


def playout_page_tables(results: Path) -> dict[str, str]:
    """The §6 page's generated table, by its marker line, from ``results/playout-6/newreno-2008.json``."""
    import json

    return {"<!-- table fig23 -->": playout_fig23_table(
        json.loads((results / "playout-6" / "newreno-2008.json").read_text()))}

"""Audio quality during page loads and a bulk download (the HSPA audio study).

After *Interactive audio vs. concurrent TCP on a cellular (HSPA) access link*, §II (Figs 2-3).
Reads the sweep directories of ``experiments/hspa-audio-web.toml`` and
``experiments/hspa-audio-bulk.toml`` and prints, per cell, the audio's delay and Table I quality
levels *during the TCP transfer* (from the transfer's start to its last byte, as the paper's Fig 2
filters), the share of acceptable quality (levels 0-1) pooled over n = 1, 2, 6 for several jitter
buffers (Fig 3), and the audio's one-way delay percentiles during the bulk download.

Per run it keeps the audio's packets (sequence order: send time relative to the TCP start, one-way
delay, NaN if lost) in ``DIR/audio-packets.parquet``, so the figures can be recomputed from the
committed results without the per-packet record sets. The jitter filter and the levels are
``tcpdelay.metrics.jitter_filter`` and ``tcpdelay.metrics.quality`` (base delay: the minimum over
the 2 s before the TCP start).

:func:`summary` is the table of the page (docs/experiments/hspa-audio.md), kept as
``hspa-audio.json`` in the first sweep directory; :func:`plot` draws Figs 2-3 and the bulk delay.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tcpdelay.errors import ParameterError
from tcpdelay.metrics import jitter_filter, quality
from tcpdelay.results.layout import find_runs
from tcpdelay.results.packets import load_flows
from tcpdelay.records import read_run_metadata

PACKETS_FILE = "audio-packets.parquet"
JITTER_BUFFERS_S = (0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3)
FIG_BUFFER_S = 0.040          # the paper's Fig 2
BIN_S = 0.1
INTERVAL_S = 0.020            # the audio-16k profile's packet interval


def _transfer(meta: dict) -> tuple[str, float, float | None]:
    """(kind, start on the monotonic clock, duration to the last byte or None if incomplete)."""
    c = meta["run"]["cross"][0]
    r = c["result"]
    if c["kind"] == "page_load":
        return "page_load", float(r["start_s"]), r.get("page_load_time_s")
    return c["kind"], float(r["start_s"]), (float(r["duration_s"]) if r.get("bytes", 0) >= 28e6 * 0.999
                                             else None)


def collect(sweep_dir: Path) -> pa.Table:
    """The audio packets of every run (from the run directories' records when they are there,
    else from the committed ``audio-packets.parquet``)."""
    cached = sweep_dir / PACKETS_FILE
    cells = find_runs(sweep_dir).cells
    rows: dict[str, list] = {k: [] for k in ("cell_id", "seed", "transport", "connections", "iw",
                                             "kind", "seq", "send_rel_s", "delay_s",
                                             "transfer_s", "transfer_complete")}
    found = 0
    for cell in cells:
        ov = cell.entry["overrides"]
        for run in cell.runs:
            if not (run / "received").is_dir() or not (run / "run.json").exists():
                continue
            meta = read_run_metadata(run)
            if "run" not in meta or not meta["run"].get("cross"):
                continue
            flows, _ = load_flows(run)
            f = next(x for x in flows if x.flow_id == 0)
            kind, start, dur = _transfer(meta)
            rel = f.send_time_s - start
            # page loads: keep the base delay's 2 s before and 5 s after the last byte (the
            # queue has drained by then, so no loss period crosses the cut); bulk: everything
            keep = ((rel >= -2.5) & (rel <= (dur if dur is not None else np.inf) + 5.0)
                    if kind == "page_load" else np.ones(rel.size, bool))
            n = int(keep.sum())
            found += 1
            rows["cell_id"] += [cell.id] * n
            rows["seed"] += [int(run.name.split("-")[1])] * n
            rows["transport"] += [ov.get("flows[0].transport", "udp")] * n
            rows["connections"] += [int(ov.get("cross[0].connections", 1))] * n
            rows["iw"] += [int(ov.get("cross[0].tcp.initcwnd_segments", 10))] * n
            rows["kind"] += [kind] * n
            rows["seq"] += f.seq[keep].astype(np.int64).tolist()
            rows["send_rel_s"] += rel[keep].tolist()
            rows["delay_s"] += f.delay_s[keep].tolist()
            rows["transfer_s"] += [np.nan if dur is None else dur] * n
            rows["transfer_complete"] += [dur is not None] * n
    if found == 0:
        if not cached.exists():
            raise ParameterError(f"{sweep_dir}: no run with records and no {PACKETS_FILE}")
        return pq.read_table(cached)
    # float32 keeps microseconds over the run's length and halves the committed file
    table = pa.table({k: (np.asarray(v, np.float32) if k in ("send_rel_s", "delay_s") else v)
                      for k, v in rows.items()})
    pq.write_table(table, cached, compression="zstd")
    return table


def runs(table: pa.Table) -> list[dict]:
    """One dict per run: its parameters and arrays in sequence order."""
    d = {k: table.column(k).to_numpy(zero_copy_only=False) for k in table.column_names}
    key = np.char.add(d["cell_id"].astype(str), d["seed"].astype(str))
    out = []
    for k in dict.fromkeys(key.tolist()):
        m = key == k
        o = np.argsort(d["seq"][m])
        r = {c: d[c][m][o].astype(float) if c != "seq" else d[c][m][o]
             for c in ("seq", "send_rel_s", "delay_s")}
        r.update({c: d[c][m][0] for c in ("cell_id", "seed", "transport", "connections", "iw",
                                          "kind", "transfer_s", "transfer_complete")})
        out.append(r)
    return out


def levels(r: dict, buffer_s: float) -> tuple[np.ndarray, float]:
    base = jitter_filter.base_delay_s(r["send_rel_s"], r["delay_s"], 0.0)
    st = jitter_filter.classify(r["delay_s"], base, buffer_s)
    return quality.loss_period_levels(st != jitter_filter.ON_TIME, INTERVAL_S), base


def window(r: dict) -> np.ndarray:
    """Packets sent during the transfer (its start to its last byte; the run's end if it did not
    finish)."""
    end = r["transfer_s"] if np.isfinite(r["transfer_s"]) else np.inf
    return (r["send_rel_s"] >= 0) & (r["send_rel_s"] <= end)


def _pct(x, q):
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else float("nan")


def group_rows(rs: list[dict]) -> list[dict]:
    out = []
    groups: dict[tuple, list] = {}
    for r in rs:
        groups.setdefault((r["kind"], r["transport"], int(r["iw"]), int(r["connections"])), []).append(r)
    for (kind, tr, iw, n), g in sorted(groups.items()):
        lv = np.concatenate([levels(r, FIG_BUFFER_S)[0][window(r)] for r in g])
        delay = np.concatenate([r["delay_s"][window(r)] for r in g])
        s = quality.level_summary(lv)
        out.append({
            "kind": kind, "transport": tr, "iw": iw, "connections": n, "runs": len(g),
            "transfer_s_mean": float(np.nanmean([r["transfer_s"] for r in g])),
            "transfers_incomplete": int(sum(not r["transfer_complete"] for r in g)),
            "packets_in_transfer": int(lv.size),
            "delay_p25_s": _pct(delay, 25), "delay_p50_s": _pct(delay, 50),
            "delay_p95_s": _pct(delay, 95), "delay_max_s": float(np.nanmax(delay)),
            "lost": int(np.count_nonzero(~np.isfinite(delay))),
            "acceptable_fraction": s["acceptable_fraction"], "worst_level": s["worst_level"],
            "level_counts": s["level_counts"],
            "acceptable_by_buffer": {f"{b:g}": quality.level_summary(np.concatenate(
                [levels(r, b)[0][window(r)] for r in g]))["acceptable_fraction"]
                for b in JITTER_BUFFERS_S},
        })
    return out


def fig3(rs: list[dict]) -> list[dict]:
    """Acceptable share during the transfer pooled over n = 1, 2, 6, per transport and IW."""
    out = []
    for tr in sorted({r["transport"] for r in rs}):
        for iw in sorted({int(r["iw"]) for r in rs}):
            g = [r for r in rs if r["transport"] == tr and int(r["iw"]) == iw]
            if not g:
                continue
            acc = {f"{b:g}": quality.level_summary(np.concatenate(
                [levels(r, b)[0][window(r)] for r in g]))["acceptable_fraction"]
                for b in JITTER_BUFFERS_S}
            out.append({"transport": tr, "iw": iw, "runs": len(g), "acceptable_by_buffer": acc})
    return out


def series(g: list[dict], t_max: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per 100 ms bin since the TCP start: share of packets at each level, and packets."""
    nb = int(np.ceil(t_max / BIN_S))
    counts = np.zeros((6, nb))
    for r in g:
        lv = levels(r, FIG_BUFFER_S)[0]
        w = window(r) & (r["send_rel_s"] < t_max)
        b = np.floor(r["send_rel_s"][w] / BIN_S).astype(int)
        np.add.at(counts, (lv[w].astype(int), b), 1)
    total = counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, counts / total, np.nan)
    return np.arange(nb) * BIN_S, share, total


def plot(web: list[dict], bulk: list[dict], img: Path, prefix: str = "hspa-audio") -> list[Path]:
    from matplotlib.figure import Figure

    img.mkdir(parents=True, exist_ok=True)
    written = []
    colors = ["#1a9850", "#91cf60", "#fee08b", "#fc8d59", "#d73027", "#7f0000"]
    for tr in sorted({r["transport"] for r in web}):
        wr = [r for r in web if r["transport"] == tr]
        ns, iws = sorted({int(r["connections"]) for r in wr}), sorted({int(r["iw"]) for r in wr})
        t_max = max(np.nanmax([r["transfer_s"] for r in wr]), 0.5) + BIN_S
        fig = Figure(figsize=(3.0 * len(ns), 2.3 * len(iws)), dpi=80, layout="constrained")
        axes = fig.subplots(len(iws), len(ns), squeeze=False, sharex=True, sharey=True)
        for i, iw in enumerate(iws):
            for j, n in enumerate(ns):
                ax = axes[i][j]
                g = [r for r in wr if int(r["iw"]) == iw and int(r["connections"]) == n]
                t, share, total = series(g, t_max)
                ax.stackplot(t + BIN_S / 2, np.nan_to_num(share), colors=colors, step="mid",
                             labels=[f"level {k}" for k in range(6)])
                ax2 = ax.twinx()
                ax2.plot(t + BIN_S / 2, total, "k-", lw=0.8, drawstyle="steps-mid")
                ax2.set_ylim(0, max(1, total.max()) * 1.05)
                ax2.tick_params(labelsize=7)
                ax.set_title(f"{tr.upper()} audio, n = {n}, IW{iw} ({len(g)} runs)", fontsize=8)
                ax.set_ylim(0, 1)
                ax.tick_params(labelsize=7)
                if i == len(iws) - 1:
                    ax.set_xlabel("time since the TCP start (s)", fontsize=7)
                if j == 0:
                    ax.set_ylabel("share of packets", fontsize=7)
                if j == len(ns) - 1:
                    ax2.set_ylabel("packets per bin (line)", fontsize=7)
        axes[0][0].legend(fontsize=6, loc="lower right", ncol=2)
        fig.suptitle("Audio quality level during the page load, jitter buffer 40 ms, 100 ms bins",
                     fontsize=9)
        p = img / f"{prefix}-fig2-{tr}.png"
        fig.savefig(p)
        written.append(p)
    fig = Figure(figsize=(4.6, 3.0), dpi=80, layout="constrained")
    ax = fig.subplots()
    for row in fig3(web):
        xs = [float(b) * 1000 for b in row["acceptable_by_buffer"]]
        ys = [100 * v for v in row["acceptable_by_buffer"].values()]
        ax.plot(xs, ys, "o-" if row["transport"] == "udp" else "s--",
                label=f"{row['transport'].upper()} audio, IW{row['iw']} ({row['runs']} runs)")
    ax.set_xlabel("jitter buffer (ms)", fontsize=8)
    ax.set_ylabel("acceptable quality (levels 0-1), %", fontsize=8)
    ax.set_title("Audio+n (n = 1, 2, 6 pooled), during the page load", fontsize=9)
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7)
    p = img / f"{prefix}-fig3.png"
    fig.savefig(p)
    written.append(p)
    if bulk:
        fig = Figure(figsize=(5.0, 2.8), dpi=80, layout="constrained")
        ax = fig.subplots()
        for r in bulk:
            ax.plot(r["send_rel_s"], r["delay_s"], lw=0.6, label=f"{r['transport'].upper()} audio")
            if np.isfinite(r["transfer_s"]):
                ax.axvline(r["transfer_s"], color="grey", lw=0.6, ls=":")
        ax.axvline(0, color="grey", lw=0.6, ls=":")
        ax.set_xlabel("time since the bulk download's start (s)", fontsize=8)
        ax.set_ylabel("audio one-way delay (s)", fontsize=8)
        ax.set_title("Audio+Bulk: 28 MB download (dotted: its start and end)", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        p = img / f"{prefix}-bulk-delay.png"
        fig.savefig(p)
        written.append(p)
    return written


#: The summary file :func:`write_summary` keeps in the first sweep directory.
SUMMARY_FILE = "hspa-audio.json"


def summary(dirs: list[Path]) -> dict:
    """Per cell of the sweeps (web and bulk) the audio during the TCP transfer, and Fig 3's
    acceptable share per jitter buffer (``jitter_buffer_s``, ``cells``, ``fig3``)."""
    rs = [r for d in dirs for r in runs(collect(d))]
    web = [r for r in rs if r["kind"] == "page_load"]
    return {"jitter_buffer_s": FIG_BUFFER_S, "cells": group_rows(rs), "fig3": fig3(web)}


def write_summary(dirs: list[Path]) -> list[Path]:
    """Keep :func:`summary` as ``hspa-audio.json`` in the first directory; the files written
    (with each sweep's ``audio-packets.parquet``, which :func:`collect` keeps)."""
    out = dirs[0] / SUMMARY_FILE
    out.write_text(json.dumps(summary(dirs), indent=1) + "\n")
    return [out] + [d / PACKETS_FILE for d in dirs]


# --- the page's tables (docs/experiments/hspa-audio.md) ---------------------------------------

#: The paths of the summaries, as the page's Fig 3 table names them.
PATHS = {"hspa-audio-web": "4 Mb/s, RTT 60 ms", "hspa-audio-web-8m": "8 Mb/s, RTT 100 ms (n = 1, 6)"}


def _share(v: float) -> str:
    return "100" if v >= 1 else f"{100 * v:.1f}"


def _page_load_rows(doc: dict, audio: bool) -> list[str]:
    out = []
    cells = [c for c in doc["cells"] if c["kind"] == "page_load"]
    for c in sorted(cells, key=lambda c: (c["transport"] != "udp", c["iw"], c["connections"])):
        delay = " / ".join(f"{1000 * c[k]:.0f}" for k in ("delay_p25_s", "delay_p50_s", "delay_p95_s", "delay_max_s"))
        cols = ([c["transport"].upper()] if audio else []) + [
            str(c["iw"]), str(c["connections"]), f"{c['transfer_s_mean']:.2f}", delay,
            f"{100 * c['acceptable_fraction']:.1f} %", str(c["worst_level"]),
            " ".join(str(v) for v in c["level_counts"].values())]
        out.append("| " + " | ".join(cols) + " |")
    return out


def audio_n_table(doc: dict, audio: bool = True) -> str:
    """Audio+n per cell during the page load (jitter buffer 40 ms); ``audio``: with the audio's
    transport as the first column."""
    head = (["audio"] if audio else []) + ["IW", "n", "page load s", "delay p25 / p50 / p95 / max ms", "acceptable",
                                           "worst", "packets at level 0 1 2 3 4 5"]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + _page_load_rows(doc, audio))


def fig3_table(docs: dict[str, dict]) -> str:
    """Fig 3: the acceptable share (%) per jitter buffer, n pooled, of each path's summary."""
    head = ["path", "audio", "IW", "runs"] + [f"**{1000 * b:g} ms**" if b == FIG_BUFFER_S else f"{1000 * b:g} ms"
                                              for b in JITTER_BUFFERS_S]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, doc in docs.items():
        for row in sorted(doc["fig3"], key=lambda r: (r["transport"] != "udp", r["iw"])):
            shares = [f"**{_share(v)}**" if float(b) == FIG_BUFFER_S else _share(v)
                      for b, v in row["acceptable_by_buffer"].items()]
            out.append("| " + " | ".join([PATHS[name], row["transport"].upper(), str(row["iw"]), str(row["runs"])]
                                         + shares) + " |")
    return "\n".join(out)


def page_tables(results: Path) -> dict[str, str]:
    """The page's tables, by marker line, from the committed ``hspa-audio.json`` summaries."""
    docs = {name: json.loads((results / name / SUMMARY_FILE).read_text()) for name in PATHS}
    return {"<!-- table audio+n -->": audio_n_table(docs["hspa-audio-web"]),
            "<!-- table fig3 -->": fig3_table(docs),
            "<!-- table 8m -->": audio_n_table(docs["hspa-audio-web-8m"], audio=False)}

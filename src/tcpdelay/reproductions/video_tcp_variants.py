"""Watanabe, Kumazoe, Cavendish, Nobayashi, Ikenaga and Oie, "Performance
Characterization of Streaming Video over TCP Variants" (INTERNET 2013), Sec. V: per TCP variant, picture
discards, playout-buffer underflow events and TCP retransmissions (mean ± std over trials), from
the runs of a sweep of experiments/video-tcp-variants-*.toml, and the congestion window over
time of three trials per variant (the paper's Fig 5).

:func:`write_summary` keeps the table in ``SWEEP_DIR/summary.json`` and the plotted windows in
``SWEEP_DIR/cwnd.parquet`` (the runs' TCP state records are not committed; this is what the
figure needs). Without the records (a fresh clone) the figure is drawn from ``cwnd.parquet``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tcpdelay.reproductions.sweep_data import runs, save_figure

MEASURES = ("picture_discards", "underflow_events", "retransmits")
CWND_FILE = "cwnd.parquet"


def variant_label(overrides: dict) -> str:
    """``reno``, ``CCP(1)``, ``CCPD(1,2000)`` — the paper's names for the choices."""
    cc = overrides.get("streams[0].tcp.congestion_control")
    if isinstance(cc, dict):
        name = cc.get("name")
        if name == "ccpd":
            return f"CCPD({cc.get('kp', 1):g},{cc.get('kd', 2000):g})"
        if name == "ccp":
            return f"CCP({cc.get('kp', 1):g})"
        return name + "(" + ",".join(f"{k}={v}" for k, v in cc.items() if k != "name") + ")"
    return {"ccp": "CCP(1)", "ccpd": "CCPD(1,2000)", "compound": "Compound", "reno": "Reno",
            "cubic": "Cubic"}.get(cc, str(cc))


def _mean_std(xs: list) -> tuple[float | None, float | None]:
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    a = np.asarray(xs, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0


def path_label(overrides: dict) -> str:
    """The cell's swept keys other than the variant, e.g. ``rtt 10 ms, loss 0.01 %`` ('' when
    the sweep varies only the variant)."""
    parts = []
    for k, v in overrides.items():
        if k == "streams[0].tcp.congestion_control":
            continue
        if k == "path.rtt_s":
            parts.append(f"RTT {v * 1e3:g} ms")
        elif k.endswith(".loss"):
            parts.append("no loss" if v.get("model") == "none" else f"loss {v.get('p', 0) * 100:g} %")
        else:
            parts.append(f"{k}={v}")
    return ", ".join(parts)


def evaluate(sweep_dir: Path) -> list[dict]:
    """One row per cell (variant): each measure's mean and standard deviation over its trials."""
    cells: dict[str, dict] = {}
    for r in runs(sweep_dir):
        m = json.loads((r["dir"] / "metrics.json").read_text()) if (r["dir"] / "metrics.json").exists() else None
        if not m or not m.get("streams"):
            continue
        s = m["streams"][0]
        c = cells.setdefault(r["cell_id"], {"cell_id": r["cell_id"], "variant": variant_label(r["overrides"]),
                                            "path": path_label(r["overrides"]), "trials": []})
        c["trials"].append({"seed": r["seed"], **{k: s.get(k) for k in MEASURES},
                            "underflow_s": s.get("underflow_s"), "startup_s": s.get("startup_s")})
    out = []
    for c in cells.values():
        row = {"cell_id": c["cell_id"], "variant": c["variant"], "path": c["path"], "trials": len(c["trials"])}
        for k in MEASURES + ("underflow_s",):
            row[f"{k}_mean"], row[f"{k}_std"] = _mean_std([t[k] for t in c["trials"]])
        row["per_trial"] = c["trials"]
        out.append(row)
    return out


def cwnd_series(sweep_dir: Path, trials: int = 3) -> pa.Table:
    """The server's cwnd over time (s from its first sample, bytes = segments x MSS) of the first
    ``trials`` runs of each variant (of its first cell in grid order, when the sweep varies the path
    too), from the runs' ``tcp_state`` records, else ``cwnd.parquet``."""
    from tcpdelay.records import read_records

    rows = {"variant": [], "seed": [], "time_s": [], "cwnd_bytes": []}
    have = False
    per_cell: dict[str, int] = {}
    for r in runs(sweep_dir):
        if not (r["dir"] / "tcp_state").is_dir():
            continue
        label = variant_label(r["overrides"])
        if per_cell.get(label, 0) >= trials:
            continue
        t = read_records(r["dir"], "tcp_state").to_pydict()
        if not t["time_s"]:
            continue
        have = True
        per_cell[label] = per_cell.get(label, 0) + 1
        t0 = min(t["time_s"])
        n = len(t["time_s"])
        rows["variant"] += [variant_label(r["overrides"])] * n
        rows["seed"] += [r["seed"]] * n
        rows["time_s"] += [round(x - t0, 3) for x in t["time_s"]]
        rows["cwnd_bytes"] += [int(c * m) for c, m in zip(t["cwnd_segments"], t["mss_bytes"])]
    if not have:
        return pq.read_table(sweep_dir / CWND_FILE)
    return pa.table(rows)


def figure(series: pa.Table, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = series.to_pydict()
    variants = list(dict.fromkeys(t["variant"]))
    cols = 3
    rows = math.ceil(len(variants) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3.2 * rows), squeeze=False, sharey=True)
    var = np.asarray(t["variant"])
    seed = np.asarray(t["seed"])
    time_s = np.asarray(t["time_s"])
    cwnd = np.asarray(t["cwnd_bytes"])
    for ax, v in zip(axes.flat, variants):
        for i, s in enumerate(sorted(set(seed[var == v]))):
            sel = (var == v) & (seed == s)
            ax.plot(time_s[sel], cwnd[sel] / 1e3, lw=0.7, label=f"trial {i + 1}")
        ax.set_title(v)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("cwnd (kB)")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(variants):]:
        ax.axis("off")
    save_figure(fig, path)


def write_summary(sweep_dir: Path) -> list[Path]:
    """Keep the sweep's table as ``SWEEP_DIR/summary.json`` and the plotted windows as
    ``SWEEP_DIR/cwnd.parquet``; the files written."""
    rows = evaluate(sweep_dir)
    (sweep_dir / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    pq.write_table(cwnd_series(sweep_dir), sweep_dir / CWND_FILE)
    return [sweep_dir / "summary.json", sweep_dir / CWND_FILE]


#: The page's tables (docs/experiments/video-tcp-variants.md) of the model player's sweeps: the
#: marker, the sweep, and its columns (``frozen``: the time frozen in underflows; ``per_trial``:
#: each trial's retransmissions after the mean).
PAGE_TABLES = (("<!-- table V-A -->", "video-tcp-variants-5a-reduced", {"frozen": True, "per_trial": False}),
               ("<!-- table V-B -->", "video-tcp-variants-5b-reduced", {"frozen": False, "per_trial": True}),
               ("<!-- table V-C -->", "video-tcp-variants-5c-reduced", {"frozen": False, "per_trial": True}),
               ("<!-- table V-D -->", "video-tcp-variants-5d-reduced", {"frozen": True, "per_trial": True}))


def table(rows: list[dict], *, frozen: bool, per_trial: bool) -> str:
    """A sweep's table as the page shows it: per cell (path, variant) the measures' mean ± std
    over trials."""
    def ms(r, k):
        return f"{r[k + '_mean']:.1f} ± {r[k + '_std']:.1f}"
    with_path = any(r["path"] for r in rows)
    head = (["path"] if with_path else []) + ["variant", "picture discards", "underflow events"] \
        + (["frozen (s)"] if frozen else []) + ["TCP retransmissions" + (" (per trial)" if per_trial else "")]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = ([r["path"]] if with_path else []) + [r["variant"], ms(r, "picture_discards"),
                                                         ms(r, "underflow_events")]
        if frozen:
            cells.append(ms(r, "underflow_s"))
        retx = ms(r, "retransmits")
        if per_trial:
            retx += " (" + ", ".join(str(t["retransmits"]) for t in r["per_trial"]) + ")"
        out.append("| " + " | ".join(cells + [retx]) + " |")
    return "\n".join(out)


def page_tables(results: Path) -> dict[str, str]:
    """The page's tables, by marker line, from the sweeps' committed ``summary.json``."""
    return {marker: table(json.loads((results / name / "summary.json").read_text()), **cols)
            for marker, name, cols in PAGE_TABLES}

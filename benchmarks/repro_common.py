"""Shared reading for the reproduction scripts (``repro_*.py``): a sweep directory's cells and
runs, and every media packet's one-way delay.

The per-packet record sets (``sent/``, ``received/``) are not committed (results/.gitignore);
each run's ``packets.parquet`` is (:mod:`tcpdelay.metrics.run_packets`). :func:`media_delays`
reads the media packets' delays of a whole sweep from the records when they are there, else from
the runs' ``packets.parquet``, and keeps them in ``delays.parquet`` in the sweep directory (a
cache, not committed: it is rebuilt from what is).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

DELAYS_FILE = "delays.parquet"


def sweep_script_args(doc: str) -> argparse.Namespace:
    """The command line every sweep-reading script shares: ``SWEEP_DIR [--warmup-s S]
    [--figure PNG] [--json]``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("sweep_dir", type=Path)
    ap.add_argument("--warmup-s", type=float, default=10.0)
    ap.add_argument("--figure", type=Path)
    ap.add_argument("--json", action="store_true")
    return ap.parse_args()


def save_figure(fig, path: Path) -> None:
    """Lay out and write a script's figure (80 dpi, the size the docs embed)."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)


def runs(sweep_dir: Path) -> list[dict]:
    """Every run of the sweep: ``{"cell_id", "label", "overrides", "seed", "dir"}``, in the sweep's
    cell order; only runs that have ``run.json`` (finished)."""
    index = json.loads((sweep_dir / "sweep.json").read_text())
    out = []
    for cell in index["cells"]:
        for seed_dir in sorted((sweep_dir / "cells" / cell["id"]).glob("seed-*")):
            if (seed_dir / "run.json").exists():
                out.append({"cell_id": cell["id"], "label": cell.get("label", ""),
                            "overrides": cell.get("overrides", {}),
                            "seed": int(seed_dir.name.split("-", 1)[1]), "dir": seed_dir})
    return out


def _delays_from_records(run_dir: Path) -> pa.Table:
    """flow_id, send_time_s (from the run's first send), delay_s of every received media packet,
    plus one row per packet never received (delay NaN)."""
    sent = ds.dataset(run_dir / "sent", format="parquet").to_table(
        columns=["flow_id", "seq", "send_time_s"])
    recv = ds.dataset(run_dir / "received", format="parquet").to_table(
        columns=["flow_id", "seq", "send_time_s", "recv_time_s"])
    t0 = float(pc.min(sent["send_time_s"]).as_py())
    got = {}
    for f, s, r in zip(recv["flow_id"].to_numpy(), recv["seq"].to_numpy(), recv["recv_time_s"].to_numpy()):
        key = (int(f), int(s))
        got[key] = min(got.get(key, np.inf), float(r))  # split/parallel: first full arrival
    flows = sent["flow_id"].to_numpy()
    seqs = sent["seq"].to_numpy()
    sends = sent["send_time_s"].to_numpy()
    delay = np.array([got.get((int(f), int(s)), np.nan) for f, s in zip(flows, seqs)]) - sends
    return pa.table({"flow_id": flows.astype(np.int32), "seq": seqs, "send_time_s": sends - t0,
                     "delay_s": delay})


def _delays_from_packets(run_dir: Path) -> pa.Table:
    """The same columns as :func:`_delays_from_records`, from the run's ``packets.parquet``."""
    from tcpdelay.metrics.run_packets import read_run_packets

    stored = read_run_packets(run_dir)
    if stored.kind == "records":
        flows = [(f.flow_id, f.seq, f.send_time_s, f.delay_s) for f in stored.flows]
    else:  # delays kept of a run measured before packets.parquet: send times from the first packet
        flows = [(f.flow_id, f.seq if f.seq is not None else np.arange(f.delay_s.size), f.send_time_s, f.delay_s)
                 for f in stored.flows]
    t0 = min(float(np.nanmin(s)) for _, _, s, _ in flows)
    return pa.table({"flow_id": np.concatenate([np.full(len(d), fid, np.int32) for fid, _, _, d in flows]),
                     "seq": np.concatenate([q for _, q, _, _ in flows]),
                     "send_time_s": np.concatenate([s for _, _, s, _ in flows]) - t0,
                     "delay_s": np.concatenate([d for _, _, _, d in flows])})


def _pack(table: pa.Table) -> pa.Table:
    """The stored form: send time in whole ms, delay in whole µs (-1: not delivered), no seq
    (a quarter of the size of float columns)."""
    d = table["delay_s"].to_numpy()
    return pa.table({"cell_id": table["cell_id"], "seed": table["seed"], "flow_id": table["flow_id"],
                     "send_time_ms": np.round(table["send_time_s"].to_numpy() * 1e3).astype(np.int32),
                     "delay_us": np.where(np.isnan(d), -1, np.round(d * 1e6)).astype(np.int32)})


def _unpack(table: pa.Table) -> pa.Table:
    d = table["delay_us"].to_numpy().astype(float)
    return pa.table({"cell_id": table["cell_id"], "seed": table["seed"], "flow_id": table["flow_id"],
                     "send_time_s": table["send_time_ms"].to_numpy() / 1e3,
                     "delay_s": np.where(d < 0, np.nan, d / 1e6)})


def media_delays(sweep_dir: Path) -> pa.Table:
    """cell_id, seed, flow_id, send_time_s, delay_s (NaN: not delivered) for every media packet
    of the sweep (from the records when present, cached in ``delays.parquet`` at 1 ms / 1 µs
    resolution; the returned values are always the cached ones, so a fresh clone computes the
    same tables)."""
    cache = sweep_dir / DELAYS_FILE
    rs = runs(sweep_dir)
    have_records = all((r["dir"] / "received").is_dir() for r in rs) and rs
    have_packets = all((r["dir"] / "packets.parquet").is_file() for r in rs) and rs
    sources = [r["dir"] / ("received" if have_records else "packets.parquet") for r in rs]
    if cache.exists() and (have_records or have_packets) and cache.stat().st_mtime >= max(
            p.stat().st_mtime for p in sources):
        return _unpack(pq.read_table(cache))
    if not (have_records or have_packets):
        raise SystemExit(f"{sweep_dir}: the runs have neither their per-packet records nor packets.parquet")
    parts = []
    for r in rs:
        t = _delays_from_records(r["dir"]) if have_records else _delays_from_packets(r["dir"])
        n = t.num_rows
        parts.append(t.add_column(0, "seed", pa.array([r["seed"]] * n, pa.int32()))
                      .add_column(0, "cell_id", pa.array([r["cell_id"]] * n)))
    table = pa.concat_tables(parts)
    pq.write_table(_pack(table), cache, compression="zstd", compression_level=19,
                   use_dictionary=["cell_id"])
    return _unpack(pq.read_table(cache))


def flows_table(run_dir: Path) -> list[dict]:
    return pq.read_table(run_dir / "flows.parquet").to_pylist()


def run_json(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def emulator_lateness_us(run_dir: Path) -> tuple[float, float]:
    """The emulator's worst p99 and maximum lateness over both directions (µs): how far behind
    schedule it delivered packets — large values mean the machine disturbed the run."""
    link = run_json(run_dir)["run"].get("link_counters") or {}
    lat = [(link.get(d) or {}).get("lateness_us") or {} for d in ("a_to_b", "b_to_a")]
    return (max((x.get("p99") or 0.0) for x in lat), max((x.get("max") or 0.0) for x in lat))

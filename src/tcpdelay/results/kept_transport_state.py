"""The media senders' transport state a sweep keeps beside its runs: ``transport_state.parquet``
in the sweep directory, one row per sample of each run's media sender (flow 0): ``cell_id, seed,
time_s`` (from the run's first sample), ``cwnd_bytes``, ``srtt_s`` and ``bytes_in_flight``
(null where the transport does not give it: TCP_INFO has no bytes in flight). Written on the
machine that measured, from the runs' own ``quic_state`` (QUIC; :mod:`tcpdelay.transport.quic_state`)
or ``tcp_state`` records (TCP, flow 0's in the run's ``tcp_state``; ``cwnd_segments × mss_bytes``), which a committed result leaves out
(results/.gitignore) — as :mod:`.kept_tcp_state` keeps the reproductions' TCP windows.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)

__all__ = ["KEPT_TRANSPORT_STATE_FILE", "keep_transport_state", "kept_transport_state"]

#: The file, in the sweep directory.
KEPT_TRANSPORT_STATE_FILE = "transport_state.parquet"

_SCHEMA = pa.schema([("cell_id", pa.string()), ("seed", pa.int32()), ("time_s", pa.float64()),
                     ("cwnd_bytes", pa.float64()), ("srtt_s", pa.float64()), ("bytes_in_flight", pa.float64())])


def _run_state(run_dir: Path) -> dict[str, np.ndarray] | None:
    """The media sender's samples of one run (flow 0), or None when the run kept no records."""
    from tcpdelay.records import read_records

    flow = run_dir / "flows" / "0"
    if (flow / "quic_state").is_dir():
        t = read_records(flow, "quic_state")
        return {"time_s": t["time_s"].to_numpy(), "cwnd_bytes": t["cwnd_bytes"].to_numpy().astype(float),
                "srtt_s": np.asarray(t["srtt_s"].to_pylist(), dtype=float),
                "bytes_in_flight": t["bytes_in_flight"].to_numpy().astype(float)}
    # TCP: the run's sampler writes the media connections' TCP_INFO in the run directory (flow 0's)
    tcp = [t for t in (read_records(d, "tcp_state") for d in (run_dir, flow) if (d / "tcp_state").is_dir())
           if t.num_rows]
    if tcp:
        t = tcp[0]
        t = t.filter(pa.compute.equal(t["flow_id"], 0))
        cwnd = t["cwnd_segments"].to_numpy().astype(float) * t["mss_bytes"].to_numpy().astype(float)
        return {"time_s": t["time_s"].to_numpy(), "cwnd_bytes": cwnd,
                "srtt_s": np.asarray(t["srtt_s"].to_pylist(), dtype=float),
                "bytes_in_flight": np.full(cwnd.size, np.nan)}
    return None


def keep_transport_state(sweep_dir: str | os.PathLike, runs: list[dict]) -> int:
    """Write ``transport_state.parquet`` in ``sweep_dir`` from ``runs`` (``{"cell_id", "seed",
    "dir"}``, every run of the sweep) and return its rows. A UDP run has no transport state and
    is left out; any other run without records is refused (FileNotFoundError, naming it): the
    file holds every run that has state, or is not written."""
    import json

    import pyarrow.parquet as pq

    parts = []
    for r in runs:
        state = _run_state(Path(r["dir"]))
        run = json.loads((Path(r["dir"]) / "run.json").read_text()).get("run", {})
        if state is None and all(m["sender"].get("transport") == "udp" for m in run.get("media", [])):
            continue
        if state is None:
            raise FileNotFoundError(f"{r['dir']}: no quic_state or tcp_state records of flow 0 "
                                    "(they stay on the machine that measured)")
        n = state["time_s"].size
        order = np.argsort(state["time_s"], kind="stable")
        t0 = float(state["time_s"].min()) if n else 0.0
        parts.append(pa.table({"cell_id": [str(r["cell_id"])] * n, "seed": np.full(n, int(r["seed"]), np.int32),
                               "time_s": state["time_s"][order] - t0,
                               **{k: state[k][order] for k in ("cwnd_bytes", "srtt_s", "bytes_in_flight")}},
                              schema=_SCHEMA))
    table = pa.concat_tables(parts) if parts else _SCHEMA.empty_table()
    pq.write_table(table, Path(sweep_dir) / KEPT_TRANSPORT_STATE_FILE, compression="zstd")
    return table.num_rows


def kept_transport_state(sweep_dir: str | os.PathLike) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    """Per ``(cell_id, seed)``: the kept samples (``time_s``, ``cwnd_bytes``, ``srtt_s``,
    ``bytes_in_flight``; NaN where unknown). {} without the file."""
    import pyarrow.parquet as pq

    path = Path(sweep_dir) / KEPT_TRANSPORT_STATE_FILE
    if not path.is_file():
        return {}
    t = pq.read_table(path)
    # Grouped by integer codes (cell's dictionary code, seed), not by comparing each row's
    # cell-id string per group: the rows of one (cell, seed) are one slice of a stable sort.
    encoded = t["cell_id"].combine_chunks().dictionary_encode()
    cells = encoded.dictionary.to_pylist()
    code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    seed = t["seed"].to_numpy().astype(np.int64)
    cols = {k: t[k].to_numpy(zero_copy_only=False).astype(float)
            for k in ("time_s", "cwnd_bytes", "srtt_s", "bytes_in_flight")}
    order = np.lexsort((seed, code))
    keys = np.stack([code[order], seed[order]], axis=1)
    starts = np.flatnonzero(np.r_[True, np.any(keys[1:] != keys[:-1], axis=1)]) if keys.size else np.array([], int)
    ends = np.r_[starts[1:], order.size]
    groups = {(str(cells[keys[a, 0]]), int(keys[a, 1])): order[a:b] for a, b in zip(starts, ends)}
    return {key: {k: v[np.sort(groups[key])] for k, v in cols.items()} for key in sorted(groups)}

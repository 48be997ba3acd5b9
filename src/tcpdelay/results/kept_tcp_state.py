"""The TCP state records a sweep keeps beside its runs: ``tcp_state.parquet`` in the sweep
directory (``cell_id, connection, time_s, cwnd_segments, bytes_acked, ca_state``), written by the
reproduction scripts from the runs' own ``tcp_state`` records, which a committed result leaves out
(results/.gitignore). One window series per cell and connection, for the report's figures.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["KEPT_TCP_STATE_FILE", "kept_tcp_state"]

#: The file, in the sweep directory.
KEPT_TCP_STATE_FILE = "tcp_state.parquet"


def kept_tcp_state(sweep_dir: str | os.PathLike) -> dict[str, list[tuple[int, np.ndarray, np.ndarray]]]:
    """Per cell id: ``(connection, t_s, cwnd_segments)`` sorted by connection, times from the
    cell's first sample. {} without the file, or when it lacks those columns or cannot be read."""
    path = Path(sweep_dir) / KEPT_TCP_STATE_FILE
    if not path.is_file():
        return {}
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(path, columns=["cell_id", "connection", "time_s", "cwnd_segments"])
    except Exception:  # noqa: BLE001 - a damaged or foreign file only loses the figures
        return {}
    cell = np.asarray(t.column("cell_id").to_pylist(), dtype=object)
    conn = t.column("connection").to_numpy(zero_copy_only=False).astype(np.int64)
    time_s = t.column("time_s").to_numpy(zero_copy_only=False).astype(float)
    cwnd = t.column("cwnd_segments").to_numpy(zero_copy_only=False).astype(float)
    out: dict[str, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for c in sorted(set(cell.tolist())):
        in_cell = cell == c
        origin = float(time_s[in_cell].min())
        for k in sorted(set(conn[in_cell].tolist())):
            m = in_cell & (conn == k)
            order = np.argsort(time_s[m], kind="stable")
            out.setdefault(str(c), []).append((int(k), time_s[m][order] - origin, cwnd[m][order]))
    return out

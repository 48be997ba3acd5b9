"""tcpdelay.reproductions.hspa_audio (reproduction 4) against the committed results: its levels
from the small audio-packets.parquet agree with `tcpdelay metrics` of the same runs, and the
transfer window holds what Fig 2 filters."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tcpdelay.reproductions import hspa_audio

ROOT = Path(__file__).resolve().parents[2]
BULK = ROOT / "results" / "hspa-audio-bulk"
WEB = ROOT / "results" / "hspa-audio-web"


@pytest.mark.skipif(not (BULK / "audio-packets.parquet").exists(), reason="results not present")
def test_levels_match_the_runs_metrics():
    h = hspa_audio
    runs = h.runs(pq.read_table(BULK / "audio-packets.parquet"))
    assert {r["transport"] for r in runs} == {"udp", "tcp"}
    for r in runs:
        metrics = json.loads((BULK / "cells" / r["cell_id"] / f"seed-{r['seed']}" / "metrics.json")
                             .read_text())["flows"][0]
        levels, base = h.levels(r, 0.040)
        assert base == pytest.approx(metrics["jitter_filter"]["base_delay_s"], abs=2e-6)
        counts = {str(k): int(np.count_nonzero(levels == k)) for k in range(6)}
        assert counts == metrics["quality"]["level_counts"]


@pytest.mark.skipif(not (WEB / "audio-packets.parquet").exists(), reason="results not present")
def test_transfer_window_and_fig3_pooling():
    h = hspa_audio
    runs = h.runs(pq.read_table(WEB / "audio-packets.parquet"))
    assert len(runs) == 24
    for r in runs:
        w = h.window(r)
        t = r["send_rel_s"][w]
        assert t.min() >= 0 and t.max() <= r["transfer_s"]
        # 20 ms packets over the page load, one more or less at either edge
        assert abs(w.sum() - r["transfer_s"] / 0.020) <= 2
    rows = h.fig3(runs)
    assert [(x["transport"], x["iw"], x["runs"]) for x in rows] == [
        ("tcp", 3, 6), ("tcp", 10, 6), ("udp", 3, 6), ("udp", 10, 6)]
    for x in rows:
        acc = list(x["acceptable_by_buffer"].values())
        assert all(a <= b + 1e-12 for a, b in zip(acc, acc[1:]))   # a larger buffer never hurts

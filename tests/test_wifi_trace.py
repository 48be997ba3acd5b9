"""The synthetic Wi-Fi delivery trace of papers/003 Sec. V-D (src/tcpdelay/wifi_trace.py): the
committed file is what the generator makes, its mean rate is the paper's 31.9 Mb/s, it comes in
aggregates with gaps, its rate varies, and the emulator's trace reader accepts it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.wifi_trace import (OPPORTUNITY_BYTES, PAPER_WIFI_RATE_BPS, rate_series_bps, read_mahimahi,
                                 wifi_opportunities_ms, write_mahimahi)

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "data" / "links" / "wifi-31.9mbps-30s.trace"


def test_the_committed_trace_is_what_the_generator_makes(tmp_path):
    ms = wifi_opportunities_ms(PAPER_WIFI_RATE_BPS, 30.0, seed=1)
    assert np.array_equal(read_mahimahi(COMMITTED), ms)
    assert write_mahimahi(tmp_path / "t", ms).read_text() == COMMITTED.read_text()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mean_rate_bursts_and_variation(seed):
    ms = wifi_opportunities_ms(31.9e6, 30.0, seed=seed)
    assert ms[-1] == 30_000 and np.all(np.diff(ms) >= 0) and ms[0] >= 1
    assert len(ms) * OPPORTUNITY_BYTES * 8 / 30.0 == pytest.approx(31.9e6, rel=1e-4)
    # aggregates: ~4 ms apart, ~10 packets each at 31.9 Mb/s
    slots, per_slot = np.unique(ms, return_counts=True)
    assert 3.0 < np.mean(np.diff(slots)) < 5.0 and 7 < per_slot.mean() < 14
    # the rate varies from second to second (a fixed-rate link would be flat)
    r = rate_series_bps(ms, 1.0)
    assert r.mean() == pytest.approx(31.9e6, rel=0.01) and r.std() / r.mean() > 0.1
    assert not np.array_equal(ms, wifi_opportunities_ms(31.9e6, 30.0, seed=seed + 10))


def test_a_steady_rate_without_variation():
    ms = wifi_opportunities_ms(12e6, 10.0, rate_log_sd=0.0, mean_txop_gap_ms=1.0)
    assert np.array_equal(np.unique(ms), np.arange(1, 10_001))      # a TXOP every millisecond
    assert np.ptp(rate_series_bps(ms, 1.0)) <= 2 * OPPORTUNITY_BYTES * 8


@pytest.mark.parametrize("kw, msg", [
    ({"mean_rate_bps": 0.0}, "mean_rate_bps: 0.0 is not in"),
    ({"duration_s": 0.5}, "duration_s: 0.5 is not in"),
    ({"rate_correlation": 1.0}, "rate_correlation: 1.0 is not in"),
    ({"mean_txop_gap_ms": 0.5}, "mean_txop_gap_ms: 0.5 is not in"),
])
def test_bad_parameters_are_named(kw, msg):
    with pytest.raises(ParameterError, match=msg):
        wifi_opportunities_ms(**kw)


def test_the_emulator_reads_it(tmp_path):
    import json
    import subprocess

    from tcpdelay.testbed.emulator import find_binary

    config = tmp_path / "link.json"
    config.write_text(json.dumps({"a": {"netns": "tdl-none-a", "tun": "t0"}, "b": {"netns": "tdl-none-b", "tun": "t1"},
                                  "a_to_b": {"trace_file": str(COMMITTED), "delay_s": 0.05}}))
    proc = subprocess.run([find_binary(), "--config", str(config), "--check"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["a_to_b"]["trace_mean_rate_bps"] == pytest.approx(31.9e6, rel=1e-3)

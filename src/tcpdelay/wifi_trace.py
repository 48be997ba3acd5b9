"""A synthetic Wi-Fi access link as a Mahimahi delivery trace (papers/003 Sec. V-D).

Watanabe, Kumazoe, Cavendish, Nobayashi, Ikenaga and Oie, *Performance Characterization of
Streaming Video over TCP Variants* (INTERNET 2013), Sec. V-D, attach the client through a real
Wi-Fi link whose available bandwidth iperf measured at 31.9 Mb/s; they give nothing else about it.
No public delivery trace of a Wi-Fi link was found, so tcpdelay makes one from what shapes a
Wi-Fi link's delivery as TCP sees it (docs/video-over-http.md, "The Wi-Fi access link"):

- **Frame aggregation and channel access.** An 802.11n/ac station sends in transmit
  opportunities (TXOPs): an aggregate of several packets at once, then nothing while the channel
  is contended or used by others. Here the gap between TXOPs is a geometric number of 1-ms
  slots (at least one, ``mean_txop_gap_ms`` on average), and each TXOP delivers what the current rate
  accrued since the previous one: bursts of about ``rate x gap`` (~10 packets of 1500 bytes at
  31.9 Mb/s and 4 ms).
- **Rate adaptation and fading.** The rate changes every ``epoch_s`` (100 ms): its logarithm is
  an AR(1) process with standard deviation ``rate_log_sd`` and lag-one correlation
  ``rate_correlation``; the levels are then scaled so that the trace's mean is exactly
  ``mean_rate_bps``.

Residual losses (what the MAC's retries do not repair) are not in the trace: the scenario adds
them as a Gilbert–Elliott loss on the same direction. The trace is a pure function of its
arguments (NumPy's PCG64 with ``seed``), so the committed file can be regenerated and checked.

Format: :mod:`emulator/src/trace.rs` and Netravali et al., *Mahimahi: Accurate Record-and-Replay
for HTTP* (USENIX ATC 2015): one line per 1500-byte delivery opportunity, its millisecond;
the trace loops with the last timestamp as its period.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tcpdelay.errors import ParameterError

#: Bytes per delivery opportunity of a Mahimahi trace.
OPPORTUNITY_BYTES = 1500

#: Available bandwidth of papers/003's Wi-Fi link as iperf measured it (Sec. V-D), b/s.
PAPER_WIFI_RATE_BPS = 31.9e6


def wifi_opportunities_ms(mean_rate_bps: float = PAPER_WIFI_RATE_BPS, duration_s: float = 60.0, *,
                          seed: int = 1, epoch_s: float = 0.1, rate_log_sd: float = 0.3,
                          rate_correlation: float = 0.9, mean_txop_gap_ms: float = 4.0) -> np.ndarray:
    """The delivery opportunities (ms, non-decreasing, int64) of a Wi-Fi link over ``duration_s``.

    Parameters are validated here; see the module doc for the model. The number of opportunities
    is ``round(mean_rate_bps x duration_s / 8 / 1500)``, so the trace's mean rate over its
    period (``duration_s``) is ``mean_rate_bps`` to within one packet.
    """
    if not (1e3 <= mean_rate_bps <= 10e9):
        raise ParameterError(f"mean_rate_bps: {mean_rate_bps!r} is not in [1e3, 1e10]")
    if not (1.0 <= duration_s <= 3600.0):
        raise ParameterError(f"duration_s: {duration_s!r} is not in [1, 3600]")
    if not (0.001 <= epoch_s <= duration_s):
        raise ParameterError(f"epoch_s: {epoch_s!r} is not in [0.001, duration_s]")
    if not (0.0 <= rate_log_sd <= 2.0):
        raise ParameterError(f"rate_log_sd: {rate_log_sd!r} is not in [0, 2]")
    if not (0.0 <= rate_correlation < 1.0):
        raise ParameterError(f"rate_correlation: {rate_correlation!r} is not in [0, 1)")
    if not (1.0 <= mean_txop_gap_ms <= 100.0):
        raise ParameterError(f"mean_txop_gap_ms: {mean_txop_gap_ms!r} is not in [1, 100]")
    rng = np.random.Generator(np.random.PCG64(seed))
    period_ms = int(round(duration_s * 1000))
    epoch_ms = max(1, int(round(epoch_s * 1000)))
    n_epochs = -(-period_ms // epoch_ms)

    # AR(1) in the log of the rate, stationary from the first epoch
    innov = rng.standard_normal(n_epochs) * rate_log_sd * np.sqrt(1 - rate_correlation ** 2)
    log_rate = np.empty(n_epochs)
    log_rate[0] = rng.standard_normal() * rate_log_sd
    for i in range(1, n_epochs):
        log_rate[i] = rate_correlation * log_rate[i - 1] + innov[i]
    level = np.exp(log_rate)
    per_ms = np.repeat(level, epoch_ms)[:period_ms]
    total_packets = int(round(mean_rate_bps * duration_s / 8 / OPPORTUNITY_BYTES))
    per_ms *= total_packets / per_ms.sum()            # packets each millisecond would carry

    # TXOPs a geometric number of slots apart; each carries what accrued since the last
    gaps = rng.geometric(1.0 / mean_txop_gap_ms, size=period_ms)   # >= 1 ms, mean mean_txop_gap_ms
    txop_ms = np.cumsum(gaps) - 1
    txop_ms = txop_ms[txop_ms < period_ms - 1]
    txop_ms = np.append(txop_ms, period_ms - 1)       # the last millisecond flushes the rest
    accrued = np.cumsum(per_ms)[txop_ms]
    packets = np.diff(np.floor(accrued + 1e-9).astype(np.int64), prepend=0)
    packets[-1] += total_packets - packets.sum()
    ms = np.repeat(txop_ms + 1, packets)               # timestamps 1..period_ms: the last is the period
    if ms.size == 0 or ms[-1] != period_ms:
        ms = np.append(ms, period_ms)                   # loop period (one more opportunity at its end)
    return ms.astype(np.int64)


def write_mahimahi(path: str | Path, opportunities_ms: np.ndarray) -> Path:
    """Write ``opportunities_ms`` as a Mahimahi trace (one integer per line)."""
    path = Path(path)
    path.write_text("".join(f"{int(v)}\n" for v in opportunities_ms))
    return path


def read_mahimahi(path: str | Path) -> np.ndarray:
    """The opportunities of a Mahimahi trace file (ms, int64)."""
    return np.array([int(x) for x in Path(path).read_text().split()], dtype=np.int64)


def rate_series_bps(opportunities_ms: np.ndarray, window_s: float = 1.0) -> np.ndarray:
    """The trace's delivery rate in consecutive windows of ``window_s`` (b/s)."""
    window_ms = int(round(window_s * 1000))
    n = int(opportunities_ms[-1]) // window_ms
    counts = np.bincount(np.minimum((opportunities_ms - 1) // window_ms, n), minlength=n + 1)[:n]
    return counts * OPPORTUNITY_BYTES * 8 / window_s

"""How fast does Linux's CUBIC window regrow after a recovery, for an application-limited
CBR sender? The delay model's ``linux`` chain grows a window-limited round by CUBIC's
Reno-friendly line (0.53 segments a round trip at RTT 100 ms, RFC 9438 §4.3); this measures
the kernel's. Plain script; prints its figures.

    sudo .venv/bin/python benchmarks/linux_cwnd_regrowth.py [--run-dir DIR]

Runs the scenario below on the testbed (video, 50 packets/s,
RTT 100 ms, 2 % drops, 60 s; the sender samples ``TCP_INFO`` every 10 ms into ``tcp_state``
records) unless ``--run-dir`` names a run already made, then takes every recovery that ends
(``ca_state`` 3 → 0) and prints how long the window took to gain its first, second and third
segment after it, in round trips; how many gained the first within a round trip; and the mean
window, round trip by round trip, after the recoveries that ended at 4 segments beside the
kernel's integer CUBIC arithmetic (:func:`kernel_cubic_window`). docs/experiments/model-fidelity.md
quotes it.
"""

from __future__ import annotations

import argparse
import glob
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = '''name = "fidelity-linux-cwnd-regrowth"
description = "video over Linux default TCP, RTT 100 ms, 2 % Bernoulli drops, 60 s: the sender cwnd over time (tcp_state), for benchmarks/linux_cwnd_regrowth.py"
duration_s = 60.0
repetitions = 1
seed = 7
cross = []
metrics = ["delay", "tcp"]

[path]
rtt_s = 0.1

[path.forward.loss]
model = "bernoulli"
p = 0.02

[path.reverse]

[[flows]]
name = "fidelity-linux-cwnd-regrowth"
profile = "video"
transport = "tcp"
count = 1
start_s = 0.0
direction = "forward"

[flows.tcp]
preset = "linux-default"
'''
RTT_S = 0.1


def _state(run_dir: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = sorted(glob.glob(str(run_dir / "tcp_state" / "*.parquet")))
    if not parts:
        sys.exit(f"linux_cwnd_regrowth: no tcp_state records under {run_dir}")
    d = pa.concat_tables([pq.read_table(p) for p in parts]).to_pydict()
    t = np.asarray(d["time_s"], float)
    o = np.argsort(t)
    return (t[o], np.asarray(d["cwnd_segments"], float)[o], np.asarray(d["ca_state"], int)[o])


def regrowth(t, cwnd, ca, gains=3):
    """For each recovery end (ca_state 3 -> 0): the times to the cwnd's k-th gain over the value
    it ended at, k = 1..gains, until the next recovery (None when it did not get there)."""
    out = []
    ends = np.flatnonzero((ca[1:] == 0) & (ca[:-1] == 3)) + 1
    for i in ends:
        nxt = np.flatnonzero(ca[i:] != 0)
        stop = i + (nxt[0] if nxt.size else len(ca) - i)
        base = cwnd[i]
        row = []
        for k in range(1, gains + 1):
            hit = np.flatnonzero(cwnd[i:stop] >= base + k)
            row.append(float(t[i + hit[0]] - t[i]) if hit.size else None)
        out.append((base, row))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", type=Path, help="a run directory with tcp_state/ (skip measuring)")
    a = ap.parse_args(argv)
    run_dir = a.run_dir
    if run_dir is None:
        out = Path(tempfile.mkdtemp(prefix="cwnd-regrowth-"))
        (out / "scenario.toml").write_text(SCENARIO)
        subprocess.run([str(ROOT / ".venv" / "bin" / "tcpdelay"), "run", str(out / "scenario.toml"),
                        "--out", str(out / "run")], check=True)
        run_dir = next((out / "run").glob("seed-*"))
    rows = regrowth(*_state(run_dir))
    print(f"run: {run_dir}")
    print(f"recoveries that ended: {len(rows)}")
    print("gain  reached   median round trips after the recovery: measured   the chain")
    for k in range(3):
        ts = [r[k] for _, r in rows if r[k] is not None]
        med = statistics.median(ts) / RTT_S if ts else float("nan")
        print(f"+{k + 1}    {len(ts):3d}/{len(rows):<3d}  {med:47.2f}   {chain_median_rounds(k + 1):9d}")
    t, cwnd, ca = _state(run_dir)
    starts = np.flatnonzero((ca[1:] == 3) & (ca[:-1] != 3)) + 1
    before = [int(cwnd[i - 1]) for i in starts]
    print("cwnd as a recovery starts:", ", ".join(f"{w}: {before.count(w)}" for w in sorted(set(before))))
    firsts = [r[0] for _, r in rows if r[0] is not None]
    within = sum(1 for x in firsts if x <= 1.2 * RTT_S)
    print(f"first gain within 1.2 round trips of the recovery's end: {within}/{len(rows)} measured; "
          f"the chain moves up with probability {0.53:.2f} a round, the kernel's integer target "
          f"(kernel_cubic_window) with 1")
    print("cwnd after a recovery that ended at 4 (cut from 7), every round trip: measured mean   "
          "kernel's integer CUBIC (W_max 7)")
    ends = np.flatnonzero((ca[1:] == 0) & (ca[:-1] == 3)) + 1
    for k in range(8):
        vals = []
        for i in ends:
            j = np.searchsorted(t, t[i] + k * RTT_S)
            if cwnd[i] == 4 and j < len(t) and not (ca[i:j + 1] == 3).any():
                vals.append(cwnd[j])
        if vals:
            print(f"  {k * RTT_S:4.1f} s  n={len(vals):3d}  {np.mean(vals):5.2f}   "
                  f"{kernel_cubic_window(7, 4, k * RTT_S, RTT_S):4d}")
    return 0


def kernel_cubic_window(w_max: int, w0: int, elapsed_s: float, rtt_s: float, c: float = 0.4) -> int:
    """The window CUBIC has reached ``elapsed_s`` after a cut from ``w_max`` to ``w0`` segments,
    by the kernel's integer arithmetic (``bictcp_update`` in net/ipv4/tcp_cubic.c): its target is
    ``W_max − ⌊C·(K − t)³⌋`` below ``W_max`` with ``t`` the time since the epoch plus the minimum
    RTT, so rounded *up* to a whole segment, and ``cnt = ⌊cwnd / (target − cwnd)⌋`` ACKs per
    segment reach it within one round trip of ACKs (the sender window-limited). Ignores the
    Reno-friendly line, which is below this target here."""
    k_s = ((w_max - w0) / c) ** (1 / 3)
    w = w0
    steps = int(round(elapsed_s / rtt_s))
    for n in range(steps):              # the target computed at the round's start, reached by its end
        tau = n * rtt_s + rtt_s          # time since the epoch + delay_min
        delta = int(c * (k_s - tau) ** 3) if tau < k_s else -int(c * (tau - k_s) ** 3)
        w = max(w, w_max - delta)
    return w


def chain_median_rounds(k: int, alpha: float = 0.53) -> int:
    """The chain's rounds to gain ``k`` segments: each round moves ``w + α`` to ``w + 1`` with
    probability ``α`` (its split of a fractional window between neighbours), so the median of
    the rounds until the ``k``-th success."""
    from scipy.stats import binom

    n = k
    while binom.sf(k - 1, n, alpha) < 0.5:
        n += 1
    return n


if __name__ == "__main__":
    raise SystemExit(main())

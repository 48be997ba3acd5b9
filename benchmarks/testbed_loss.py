#!/usr/bin/env python3
"""Benchmark 4 (issue 4): the emulator's loss processes, measured end to end.

left0 sends N numbered UDP datagrams to right0 across an unlimited, 1 ms link whose a_to_b
direction loses packets; right0 records which sequence numbers arrived.

1. Bernoulli p = 1 %: the measured loss ratio (receiver and emulator counters) must lie in the
   99 % binomial interval of N trials.
2. Gilbert-Elliott p = 1 %, r = 25 %, k = 1, h = 0: loss bursts (runs of missing sequence
   numbers) must have mean length 1/r = 4 packets (99 % interval from the geometric law), and
   the loss ratio p/(p+r) = 3.85 %.

A receiver that cannot keep up would look like loss; the emulator's counters (packets_out) are
checked against what the receiver got, so such a run is flagged rather than reported.

Run as root: .venv/bin/python benchmarks/testbed_loss.py [--packets N] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import struct
import sys
import time

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy import stats

from tcpdelay.testbed import BernoulliLoss, DirectionSpec, GilbertElliottLoss, LinkSpec, Testbed, TestbedSpec

PORT = 7100


def receive(port: int, count: int) -> bytes:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    s.bind(("0.0.0.0", port))
    s.settimeout(2.0)
    seen = bytearray(count)
    while True:
        try:
            data = s.recv(64)
        except socket.timeout:
            break
        seq = struct.unpack("!I", data[:4])[0]
        if seq == 0xFFFFFFFF:
            break
        seen[seq] = 1
    return bytes(seen)


def send(dst: str, port: int, count: int, burst: int = 50, gap_s: float = 0.001) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(count):
        s.sendto(struct.pack("!I", i) + b"\0" * 28, (dst, port))
        if i % burst == burst - 1:
            time.sleep(gap_s)


def run(loss, packets: int, seed: int) -> dict:
    link = LinkSpec(a_to_b=DirectionSpec(delay_s=0.001, loss=loss), b_to_a=DirectionSpec(delay_s=0.001))
    with Testbed(TestbedSpec(link=link, seed=seed)) as tb:
        left, right = tb.hosts["left0"], tb.hosts["right0"]
        rx = right.spawn(receive, PORT, packets)
        time.sleep(0.2)
        left.call(send, right.address, PORT, packets)
        time.sleep(0.1)
        c = tb.link_counters()["a_to_b"]
        # End marker: repeated until the receiver stops (it may itself be lost).
        for _ in range(200):
            left.call(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
                b"\xff\xff\xff\xff", (right.address, PORT)))
            try:
                seen = rx.result(timeout_s=0.05)
                break
            except TimeoutError:
                continue
        else:
            seen = rx.result(timeout_s=5)
    got = np.frombuffer(seen, dtype=np.uint8).astype(bool)
    lost = ~got
    # Runs of consecutive losses.
    edges = np.diff(np.concatenate(([0], lost.astype(np.int8), [0])))
    bursts = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    return {"packets": packets, "received": int(got.sum()), "lost": int(lost.sum()),
            "loss_ratio": float(lost.mean()),
            "emulator_in": c["packets_in"], "emulator_out": c["packets_out"], "emulator_loss_drops": c["drops"]["loss"],
            "bursts": int(bursts.size), "mean_burst_packets": float(bursts.mean()) if bursts.size else 0.0,
            "burst_std_packets": float(bursts.std(ddof=1)) if bursts.size > 1 else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    con = Console(stderr=True)
    n = a.packets
    con.print(f"[dim]Bernoulli 1 %, {n} packets ...[/dim]")
    b = run(BernoulliLoss(p=0.01), n, a.seed)
    lo, hi = stats.binom.interval(0.99, n, 0.01)
    b["interval_99"] = [lo / n, hi / n]
    # Everything the emulator delivered arrived, and it dropped exactly what the receiver missed.
    b["receiver_complete"] = b["received"] == b["emulator_out"] and b["lost"] == b["emulator_loss_drops"]
    b["pass"] = b["receiver_complete"] and lo / n <= b["loss_ratio"] <= hi / n

    ge_spec = GilbertElliottLoss(p=0.01, r=0.25)
    con.print(f"[dim]Gilbert-Elliott p=0.01 r=0.25, {n} packets ...[/dim]")
    g = run(ge_spec, n, a.seed)
    # Burst lengths are geometric with mean 1/r, variance (1-r)/r^2.
    mean, sd = 1 / ge_spec.r, math.sqrt(1 - ge_spec.r) / ge_spec.r
    half = stats.norm.ppf(0.995) * sd / math.sqrt(max(g["bursts"], 1))
    g["expected_mean_burst_packets"], g["burst_interval_99"] = mean, [mean - half, mean + half]
    g["expected_loss_ratio"] = ge_spec.loss_ratio
    g["receiver_complete"] = g["received"] == g["emulator_out"] and g["lost"] == g["emulator_loss_drops"]
    g["pass"] = g["receiver_complete"] and mean - half <= g["mean_burst_packets"] <= mean + half
    out = {"bernoulli": b, "gilbert_elliott": g}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    t = Table(title=f"Loss processes: {n} UDP datagrams per run, a_to_b", title_justify="left")
    for col in ("model", "measured", "expected (99 % interval)", "receiver = emulator out", "verdict"):
        t.add_column(col, justify="right")
    t.add_row("Bernoulli 1 %: loss ratio", f"{b['loss_ratio'] * 100:.3f} % ({b['lost']} lost)",
              f"1 % ({b['interval_99'][0] * 100:.3f} – {b['interval_99'][1] * 100:.3f} %)",
              f"{'yes' if b['receiver_complete'] else 'NO'} (counted {b['emulator_loss_drops']} loss drops)",
              "PASS" if b["pass"] else "FAIL")
    t.add_row("GE p=1 %, r=25 %: mean burst", f"{g['mean_burst_packets']:.3f} pkts ({g['bursts']} bursts)",
              f"4 ({g['burst_interval_99'][0]:.3f} – {g['burst_interval_99'][1]:.3f})",
              f"{'yes' if g['receiver_complete'] else 'NO'} (counted {g['emulator_loss_drops']} loss drops)",
              "PASS" if g["pass"] else "FAIL")
    t.add_row("GE: loss ratio", f"{g['loss_ratio'] * 100:.3f} %", f"{g['expected_loss_ratio'] * 100:.2f} %", "", "")
    Console(width=140).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())

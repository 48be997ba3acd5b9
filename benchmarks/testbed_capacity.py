#!/usr/bin/env python3
"""Benchmark 2 (issues 4, 28): capacity of the testbed beside its floor, with the delay precision.

One bulk cubic flow (``tcpdelay.traffic.bulk_transfer``, 64 MB socket buffers so the window is
not the limit) for --duration-s seconds, alternately over two paths, --rounds times each, so that
whatever else loads the machine loads both:

* **emulator**: the testbed's pair of hosts joined by ``tcpdelay-link`` (TUN devices), 1 ms each
  way (--one-way-s), no rate or queue limit;
* **emulator, per packet**: the same with a 100 Gb/s rate limit (never reached), which makes
  the link decide per packet and so keep one packet per read (docs/emulator.md "Segmentation
  offload": only delay-only links take GSO super-packets whole) — what links with a loss,
  rate or queue discipline can carry;
* **veth floor**: two namespaces this script creates, joined by a plain veth pair with every
  offload off (``ethtool -K`` tso, gso, gro, lro, tx/rx checksumming, sg off), no delay: what
  the kernel alone forwards when every packet is one MTU, as on the emulator's TUNs.

Printed: each path's median goodput, their ratio (issue 28's target: >= 0.8), the emulator's CPU
share (user+system CPU seconds over the transfer's wall time, 1.0 = a core) and, measured in
the same run, the delay precision: pipelined UDP probes (benchmarks/testbed_delay_accuracy.py's
prober and echo, SO_TIMESTAMPNS receive times) through the emulator at --probe-one-way-s each
way (error = RTT - 2 x one-way) and over the bare veth pair (its own RTT: the floor).

--soak-s S adds one emulator transfer of S seconds (issue 28 asks for 5 minutes) and prints
the emulator's resident memory (VmRSS) at its start and end, sampled every second: a pool or a
delay line that leaked would grow it.

Every namespace this script creates is deleted when it ends, fails or is interrupted (Ctrl-C,
SIGTERM); the testbed removes its own.

Run as root: .venv/bin/python benchmarks/testbed_capacity.py [--duration-s S] [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from tcpdelay.testbed import LinkSpec, TcpSettings, Testbed, TestbedSpec
from tcpdelay.testbed import netns as nsutil
from tcpdelay.testbed import tcp_settings as tcps
from tcpdelay.testbed.netns import process_cpu_s
from tcpdelay.traffic import bulk_transfer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testbed_delay_accuracy import PORT as PROBE_PORT  # noqa: E402  (a sibling benchmark)
from testbed_delay_accuracy import echo, probe  # noqa: E402

BUF = (4096, 1 << 20, 64 << 20)
TCP = TcpSettings(congestion_control="cubic", rmem_bytes=BUF, wmem_bytes=BUF)
PORT = 5001
OFFLOADS = ("tso", "gso", "gro", "lro", "tx", "rx", "sg")


def _one_line_exit(msg: str) -> None:
    print(f"testbed_capacity: {msg}", file=sys.stderr)
    sys.exit(2)


# -- the veth floor: two namespaces of our own ---------------------------------------------------

class VethPair:
    """Two namespaces joined by a veth pair without offloads, deleted on exit (whatever the exit)."""

    def __init__(self, mtu_bytes: int = 1500):
        tag = f"tdcap{os.getpid()}"
        self.ns = (f"{tag}-a", f"{tag}-b")
        self.addr = ("10.254.0.1", "10.254.0.2")
        self.mtu = mtu_bytes
        self._pools: list[cf.ProcessPoolExecutor] = []
        self.offloads_off: dict[str, list[str]] = {}

    def __enter__(self) -> "VethPair":
        try:
            for ns in self.ns:
                nsutil.add_netns(ns)
            nsutil.ip("link", "add", "cap0", "netns", self.ns[0], "mtu", str(self.mtu), "type", "veth",
                      "peer", "name", "cap1", "netns", self.ns[1], "mtu", str(self.mtu))
            for i, ns in enumerate(self.ns):
                dev = f"cap{i}"
                nsutil.ip_batch([f"addr add {self.addr[i]}/24 dev {dev}", f"link set dev {dev} up"], netns=ns)
                for feature in OFFLOADS:   # one at a time: a feature veth cannot change must not stop the rest
                    subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", dev, feature, "off"],
                                   capture_output=True, check=False)
                self.offloads_off[dev] = self._features_on(ns, dev)
                tcps.apply_sysctls(ns, TCP)
                self._pools.append(cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"),
                                                          initializer=nsutil.enter_for_good, initargs=(ns,)))
        except BaseException:
            self.__exit__()
            raise
        return self

    @staticmethod
    def _features_on(ns: str, dev: str) -> list[str]:
        """The offloads still on (``ethtool -k``), so the printout shows the floor is offload-free."""
        out = subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-k", dev], capture_output=True, text=True).stdout
        keys = ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload",
                "large-receive-offload", "scatter-gather", "tx-checksumming", "rx-checksumming")
        return [ln.split(":")[0].strip() for ln in out.splitlines()
                if ln.split(":")[0].strip() in keys and ln.split(":")[1].strip().startswith("on")]

    def __exit__(self, *exc) -> None:
        for p in self._pools:
            for proc in list(getattr(p, "_processes", {}).values()):
                with contextlib.suppress(Exception):
                    proc.kill()
            p.shutdown(wait=False, cancel_futures=True)
        self._pools.clear()
        for ns in self.ns:
            with contextlib.suppress(Exception):
                nsutil.kill_netns_processes(ns)
            nsutil.delete_netns(ns)

    def bulk(self, duration_s: float) -> dict:
        rx = self._pools[1].submit(bulk_transfer.receive, PORT)
        time.sleep(0.1)
        tx = self._pools[0].submit(bulk_transfer.send, self.addr[1], PORT, duration_s=duration_s,
                                   congestion_control="cubic")
        sent = tx.result(timeout=duration_s + 60)
        got = rx.result(timeout=30)
        return {"goodput_bps": got["bytes"] * 8 / got["duration_s"], "duration_s": got["duration_s"],
                "bytes": got["bytes"], "retransmitted_segments": sent["tcp_info"]["total_retrans"]}

    def probe(self, probes: int, interval_s: float, size_bytes: int) -> dict:
        srv = self._pools[1].submit(echo, PROBE_PORT, probes)
        time.sleep(0.1)
        got = self._pools[0].submit(probe, self.addr[1], PROBE_PORT, probes, interval_s, size_bytes).result(timeout=600)
        srv.result(timeout=30)
        return got


# -- the emulator --------------------------------------------------------------------------------

def rss_kib(pid: int) -> int | None:
    """A process's resident memory (VmRSS, KiB), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


PER_PACKET_RATE_BPS = 100e9


def emulator_bulk(one_way_s: float, duration_s: float, per_packet: bool = False) -> dict:
    """``per_packet``: with a rate limit no flow reaches, so the link keeps one packet per read."""
    rate = {"rate_bps": PER_PACKET_RATE_BPS} if per_packet else {}
    spec = TestbedSpec.dumbbell(1, 1, link=LinkSpec.symmetric(delay_s=one_way_s, **rate), tcp=TCP)
    with Testbed(spec) as tb:
        left, right = tb.hosts["left0"], tb.hosts["right0"]
        rx = right.spawn(bulk_transfer.receive, PORT)
        time.sleep(0.1)
        rss: list[tuple[float, int]] = []
        done = threading.Event()

        def sample() -> None:   # the emulator's memory every second while it carries the flow
            while True:
                v = rss_kib(tb.emulator_pid)
                if v is not None:
                    rss.append((time.monotonic() - t0, v))
                if done.wait(1.0):
                    return

        cpu0, t0 = process_cpu_s(tb.emulator_pid), time.monotonic()
        tx = left.spawn(bulk_transfer.send, right.address, PORT, duration_s=duration_s, congestion_control="cubic")
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        sent = tx.result(timeout_s=duration_s + 60)
        cpu1, t1 = process_cpu_s(tb.emulator_pid), time.monotonic()
        done.set()
        sampler.join()
        got = rx.result(timeout_s=30)
        counters = tb.link_counters()
    return {"goodput_bps": got["bytes"] * 8 / got["duration_s"], "duration_s": got["duration_s"],
            "bytes": got["bytes"], "retransmitted_segments": sent["tcp_info"]["total_retrans"],
            "emulator_cpu_share": (cpu1 - cpu0) / (t1 - t0),
            "emulator_packets_a_to_b": counters["a_to_b"]["packets_out"],
            "emulator_drops_a_to_b": counters["a_to_b"]["drops"],
            "emulator_lateness_us_a_to_b": counters["a_to_b"]["lateness_us"],
            "emulator_rss_kib": {"first": rss[0][1] if rss else None, "last": rss[-1][1] if rss else None,
                                 "max": max(v for _, v in rss) if rss else None,
                                 "after_10_s": next((v for t, v in rss if t >= 10), None), "samples": len(rss)}}


def emulator_probe(one_way_s: float, probes: int, interval_s: float, size_bytes: int) -> dict:
    spec = TestbedSpec(link=LinkSpec.symmetric(delay_s=one_way_s))
    with Testbed(spec) as tb:
        left, right = tb.hosts["left0"], tb.hosts["right0"]
        srv = right.spawn(echo, PROBE_PORT, probes)
        time.sleep(0.1)
        got = left.call(probe, right.address, PROBE_PORT, probes, interval_s, size_bytes, timeout_s=600)
        srv.kill()
    return got


def error_ms(rtt_s: list[float], target_s: float) -> dict:
    """RTT - target in ms: p50, p99, max over the probes answered."""
    x = np.asarray(rtt_s, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"answered": 0, "p50": None, "p99": None, "max": None}
    e = (x - target_s) * 1e3
    return {"answered": int(x.size), "p50": float(np.percentile(e, 50)), "p99": float(np.percentile(e, 99)),
            "max": float(e.max())}


# -- the run -------------------------------------------------------------------------------------

def run(a: argparse.Namespace, con: Console) -> dict:
    emu_runs, per_packet_runs, veth_runs = [], [], []
    with VethPair() as veth:
        for r in range(a.rounds):
            con.print(f"[dim]round {r + 1}/{a.rounds}: emulator ({a.one_way_s * 1e3:g} ms each way), "
                      f"{a.duration_s:g} s ...[/dim]")
            emu_runs.append(emulator_bulk(a.one_way_s, a.duration_s))
            if a.per_packet:
                con.print(f"[dim]round {r + 1}/{a.rounds}: emulator, one packet per read "
                          f"({PER_PACKET_RATE_BPS / 1e9:g} Gb/s rate), {a.duration_s:g} s ...[/dim]")
                per_packet_runs.append(emulator_bulk(a.one_way_s, a.duration_s, per_packet=True))
            con.print(f"[dim]round {r + 1}/{a.rounds}: veth pair without offloads, {a.duration_s:g} s ...[/dim]")
            veth_runs.append(veth.bulk(a.duration_s))
        precision = None
        if a.probes > 0:
            con.print(f"[dim]delay precision: {a.probes} probes through the emulator "
                      f"({a.probe_one_way_s * 1e3:g} ms each way) and over the veth pair ...[/dim]")
            through = emulator_probe(a.probe_one_way_s, a.probes, a.probe_interval_s, a.probe_size_bytes)
            bare = veth.probe(a.probes, a.probe_interval_s, a.probe_size_bytes)
            precision = {
                "one_way_delay_s": a.probe_one_way_s, "probes": a.probes, "interval_s": a.probe_interval_s,
                "emulator_error_ms": error_ms(through["rtt_s"], 2 * a.probe_one_way_s),
                "emulator_error_without_turnaround_ms": error_ms(through["rtt_without_turnaround_s"], 2 * a.probe_one_way_s),
                "veth_rtt_ms": error_ms(bare["rtt_s"], 0.0),
                "veth_rtt_without_turnaround_ms": error_ms(bare["rtt_without_turnaround_s"], 0.0),
            }
        offloads_on = veth.offloads_off
    soak = None
    if a.soak_s > 0:
        con.print(f"[dim]soak: one emulator transfer of {a.soak_s:g} s, its memory sampled every second ...[/dim]")
        soak = emulator_bulk(a.one_way_s, a.soak_s)
    emu = statistics.median(r["goodput_bps"] for r in emu_runs)
    floor = statistics.median(r["goodput_bps"] for r in veth_runs)
    per_packet = statistics.median(r["goodput_bps"] for r in per_packet_runs) if per_packet_runs else None
    return {
        "one_way_delay_s": a.one_way_s, "duration_s": a.duration_s, "rounds": a.rounds,
        "emulator_goodput_bps": emu, "veth_goodput_bps": floor, "ratio": emu / floor if floor > 0 else None,
        "target_ratio": 0.8,
        "per_packet_goodput_bps": per_packet,
        "per_packet_ratio": per_packet / floor if per_packet is not None and floor > 0 else None,
        "emulator_cpu_share": statistics.median(r["emulator_cpu_share"] for r in emu_runs),
        "veth_offloads_left_on": offloads_on,
        "emulator_runs": emu_runs, "per_packet_runs": per_packet_runs, "veth_runs": veth_runs, "delay_precision": precision, "soak": soak,
    }


def _fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:+.2f} ms"


def print_table(res: dict) -> None:
    con = Console(width=140)
    t = Table(title=f"Capacity: one cubic flow, {res['duration_s']:g} s, median of {res['rounds']} round(s) "
                    "alternating", title_justify="left")
    for col in ("path", "goodput", "per round", "retransmitted", "emulator CPU share"):
        t.add_column(col, justify="right")
    t.add_row(f"emulator, {res['one_way_delay_s'] * 1e3:g} ms each way (delay only: super-packets whole)", f"{res['emulator_goodput_bps'] / 1e9:.2f} Gb/s",
              " ".join(f"{r['goodput_bps'] / 1e9:.2f}" for r in res["emulator_runs"]),
              str(sum(r["retransmitted_segments"] for r in res["emulator_runs"])),
              f"{res['emulator_cpu_share'] * 100:.0f} % of a core")
    if res["per_packet_runs"]:
        pp = res["per_packet_runs"]
        t.add_row(f"emulator, one packet per read ({PER_PACKET_RATE_BPS / 1e9:g} Gb/s rate)",
                  f"{res['per_packet_goodput_bps'] / 1e9:.2f} Gb/s",
                  " ".join(f"{r['goodput_bps'] / 1e9:.2f}" for r in pp),
                  str(sum(r["retransmitted_segments"] for r in pp)),
                  f"{statistics.median(r['emulator_cpu_share'] for r in pp) * 100:.0f} % of a core")
    t.add_row("veth pair, no offloads, no delay", f"{res['veth_goodput_bps'] / 1e9:.2f} Gb/s",
              " ".join(f"{r['goodput_bps'] / 1e9:.2f}" for r in res["veth_runs"]),
              str(sum(r["retransmitted_segments"] for r in res["veth_runs"])), "-")
    con.print(t)
    ratio = res["ratio"]
    con.print(f"ratio emulator / veth floor: [bold]{ratio:.2f}[/bold] (target >= {res['target_ratio']:g})"
              if ratio is not None else "ratio: - (the floor measured 0)")
    if res["per_packet_ratio"] is not None:
        con.print(f"ratio with one packet per read: {res['per_packet_ratio']:.2f}")
    if res["veth_offloads_left_on"] and any(res["veth_offloads_left_on"].values()):
        con.print(f"[yellow]offloads ethtool could not turn off: {res['veth_offloads_left_on']}[/yellow]")
    p = res["delay_precision"]
    if p:
        d = Table(title=f"Delay precision, {p['probes']} UDP probes every {p['interval_s'] * 1e3:g} ms",
                  title_justify="left")
        for col in ("path", "p50", "p99", "max", "answered"):
            d.add_column(col, justify="right")
        for label, key in ((f"emulator {p['one_way_delay_s'] * 1e3:g} + {p['one_way_delay_s'] * 1e3:g} ms: RTT error",
                            "emulator_error_ms"),
                           ("  same, without the echo's turnaround", "emulator_error_without_turnaround_ms"),
                           ("veth pair: its own RTT", "veth_rtt_ms"),
                           ("  same, without the echo's turnaround", "veth_rtt_without_turnaround_ms")):
            e = p[key]
            d.add_row(label, _fmt_ms(e["p50"]), _fmt_ms(e["p99"]), _fmt_ms(e["max"]), str(e["answered"]))
        con.print(d)
    soak = res["soak"]
    if soak:
        m = soak["emulator_rss_kib"]
        con.print(f"soak, {soak['duration_s']:.0f} s at {soak['goodput_bps'] / 1e9:.2f} Gb/s: emulator RSS "
                  f"{m['first']} KiB at the start, {m['after_10_s']} KiB after 10 s, {m['last']} KiB at the end "
                  f"(max {m['max']} KiB, {m['samples']} samples)")
    con.print("Sender, receiver and emulator share the machine's cores with other jobs; the rounds alternate "
              "so both paths see the same load.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=8.0, help="length of each bulk transfer")
    ap.add_argument("--rounds", type=int, default=3, help="transfers per path, alternating")
    ap.add_argument("--one-way-s", type=float, default=0.001, help="the emulator's one-way delay")
    ap.add_argument("--no-per-packet", dest="per_packet", action="store_false",
                    help="leave out the emulator run that keeps one packet per read")
    ap.add_argument("--probes", type=int, default=1000, help="delay probes per path (0: no precision run)")
    ap.add_argument("--probe-one-way-s", type=float, default=0.050)
    ap.add_argument("--probe-interval-s", type=float, default=0.005)
    ap.add_argument("--probe-size-bytes", type=int, default=100)
    ap.add_argument("--soak-s", type=float, default=0.0, help="one more emulator transfer this long, its memory "
                    "sampled (0: none)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not a.duration_s > 0 or a.rounds < 1 or a.one_way_s < 0 or a.probes < 0 or not a.probe_interval_s > 0 \
            or not 24 <= a.probe_size_bytes <= 1400 or a.probe_one_way_s < 0 or a.soak_s < 0:
        _one_line_exit("--duration-s and --probe-interval-s must be > 0, --rounds >= 1, --probes >= 0, "
                       "delays and --soak-s >= 0, --probe-size-bytes in [24, 1400]")
    if os.geteuid() != 0:
        _one_line_exit("needs root (network namespaces)")
    if shutil.which("ethtool") is None:
        _one_line_exit("needs ethtool to turn the veth pair's offloads off (apt-get install ethtool)")
    # SIGTERM unwinds like Ctrl-C, so the namespaces go either way.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    con = Console(stderr=True)
    try:
        res = run(a, con)
    except KeyboardInterrupt:
        con.print("interrupted: the namespaces it created are removed")
        return 130
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())

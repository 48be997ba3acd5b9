"""What per-host access links cost on the testbed (docs/testbed.md): N flows with papers/004's
topology have 2N + 1 emulated links (the bottleneck and an access link per host), all served by
the testbed's one emulator process.

    sudo .venv/bin/python benchmarks/testbed_access_links.py [--flows 20 40 80] [--duration-s 10]

For each N: N VoIP flows over UDP (64 kb/s each), each from a sender of its own to a sink of its
own, every host on a 10-Mb/s 10-ms access link, the shared bottleneck 100 Mb/s 25 ms (papers/004's
wired setting); a real scenario run. Prints per N: the testbed's build time (namespaces, devices,
the emulator ready with its 2N + 1 links), the emulator's resident memory and CPU over the run, and the media
packets' one-way delay against the configured 45 ms (the three links) plus serialization: mean,
p99 and max of (measured - configured), and the p99 without the flows' first 2 s (when every
program writes its first records at once); and the emulator's own lateness (how late it wrote
packets against their due times, the worst link's p99 and max from the run's counters), which
separates the emulator's share of the error from the endpoints'; and the CPU the real-time
processes (the emulator and every media program, SCHED_FIFO/RR) took, in cores, the mean and the
busiest 1-s window while the media programs ran (2 cores here: near 1.9 the kernel's real-time
throttling, 95 % of each second, stops them all for the rest of that second). What "faithful" means for papers/004's runs (the delay
error small against its 100-ms real-time threshold) is decided in its reproduction.

Wall times and CPU are this machine's and vary with its load: rerun on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_cpu import stat_fields  # noqa: E402  (a sibling module: /proc parsing shared with endpoint_cpu.py)


#: A link direction that carried at least this many packets carried media (a VoIP flow: 50 a
#: second); fewer is the control exchange alone, whose p99 is its max.
MEDIA_DIRECTION_PACKETS = 500


def scenario(n: int, duration_s: float) -> dict:
    return {"name": f"access-{n}", "duration_s": duration_s, "seed": 1,
            "path": {"rate_bps": 100e6, "delay_s": 0.025, "queue_packets": 150},
            "access": {"rate_bps": 10e6, "delay_s": 0.01},
            "flows": [{"name": "voip", "profile": "voip", "transport": "udp", "count": n}]}


class RealtimeCpu:
    """Samples, every second, the CPU time of the machine's real-time threads (scheduling
    policy SCHED_FIFO or SCHED_RR in /proc/PID/task/TID/stat: grouped endpoints are a thread per
    flow end) in a thread; ``cores`` holds, per 1-s window in which at least ``min_procs`` of
    them ran, the cores they used."""

    def __init__(self, min_procs: int):
        self.min_procs, self.cores = min_procs, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _snapshot() -> dict[str, int]:
        out = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                fields = stat_fields(f"/proc/{pid}/task/{tid}/stat")
                if fields is None:
                    continue
                if int(fields[38]) in (1, 2):           # policy: SCHED_FIFO, SCHED_RR
                    out[tid] = int(fields[11]) + int(fields[12])   # utime + stime, ticks
        return out

    def _run(self) -> None:
        hz = os.sysconf("SC_CLK_TCK")
        before, t0 = self._snapshot(), time.monotonic()
        while not self._stop.wait(1.0):
            now, t1 = self._snapshot(), time.monotonic()
            common = [p for p in now if p in before]
            if len(common) >= self.min_procs:
                self.cores.append(sum(now[p] - before[p] for p in common) / hz / (t1 - t0))
            before, t0 = now, t1

    def __enter__(self) -> "RealtimeCpu":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class EndpointCpu:
    """Samples, every 0.1 s, the CPU time (user + system, all threads) of the media endpoints:
    this process's forked children that are Python (the grouped or per-flow endpoints: the
    testbed forks them) and every ``tcpdelay-endpoint`` below it (the native endpoint), the
    emulator not included. ``cpu_s``: the sum of each one's last reading, so a process's last
    0.1 s before it exits may be missed (an undercount of at most that per process)."""

    COMMS = ("python", "python3", "tcpdelay-endpoi")

    def __init__(self):
        self.last: dict[int, float] = {}
        self.comm: dict[int, str] = {}
        self.series: list[tuple[float, float, bool]] = []   # (time, CPU so far, a native endpoint alive)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._hz = os.sysconf("SC_CLK_TCK")

    def _sample(self) -> None:
        parent: dict[int, int] = {}
        stat: dict[int, list[str]] = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                head, rest = open(f"/proc/{pid}/stat").read().rsplit(")", 1)
            except OSError:
                continue
            fields = rest.split()
            parent[int(pid)] = int(fields[1])
            stat[int(pid)] = [head.split("(", 1)[1], *fields]
        me = os.getpid()
        for pid, f in stat.items():
            p, ok = pid, False
            while p in parent and p > 1:
                p = parent[p]
                if p == me:
                    ok = True
                    break
            if ok and f[0] in self.COMMS:
                self.last[pid] = (int(f[12]) + int(f[13])) / self._hz   # utime + stime
                self.comm[pid] = f[0]
        alive = any(f[0] == "tcpdelay-endpoi" for f in stat.values())
        self.series.append((time.monotonic(), self.cpu_s, alive))

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    @property
    def cpu_s(self) -> float:
        return sum(self.last.values())

    def steady_cores(self) -> float:
        """Cores the endpoints used over the middle half of the time a native endpoint (else any
        endpoint) was alive: the media flowing, set-up and records' conversion left out."""
        alive = [x for x in self.series if x[2]] or self.series
        if len(alive) < 4:
            return float("nan")
        t0, t1 = alive[0][0], alive[-1][0]
        mid = [x for x in alive if t0 + 0.25 * (t1 - t0) <= x[0] <= t0 + 0.75 * (t1 - t0)]
        if len(mid) < 2:
            return float("nan")
        return (mid[-1][1] - mid[0][1]) / (mid[-1][0] - mid[0][0])

    @property
    def native_cpu_s(self) -> float:
        return sum(v for p, v in self.last.items() if self.comm[p] == "tcpdelay-endpoi")

    def __enter__(self) -> "EndpointCpu":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def measure(n: int, duration_s: float) -> dict:
    from tcpdelay.experiments.plan import plan_run
    from tcpdelay.experiments.scenario import parse_scenario
    from tcpdelay.results.packets import load_flows
    from tcpdelay.testbed import Testbed

    sc = parse_scenario(scenario(n, duration_s))
    spec = plan_run(sc, 1).testbed_spec(1)
    t = time.monotonic()
    with Testbed(spec) as tb:                       # the build alone
        build_s = time.monotonic() - t
        rss = [_rss_bytes(tb.emulator_pid)]
    from tcpdelay.experiments.run import run_scenario

    with tempfile.TemporaryDirectory() as tmp:
        rd = Path(tmp)
        with RealtimeCpu(min_procs=2 if os.environ.get("TCPDELAY_MEDIA_ENDPOINTS") == "native" else 2 * n) as rt_cpu, \
                EndpointCpu() as ep_cpu:
            run_scenario(sc, 1, rd)
        env = json.loads((rd / "environment.json").read_text())
        flows, _meta = load_flows(rd)
        err, late = [], []
        t_first = min(float(np.min(f.send_time_s)) for f in flows if len(f.send_time_s))
        for f in flows:
            ok = np.isfinite(f.recv_time_s)
            wire = f.size_bytes[ok] + 28                 # IP/UDP headers on the packet
            configured = 0.045 + wire * 8 / 10e6 * 2 + wire * 8 / 100e6   # 3 links + serializations
            err.append(f.recv_time_s[ok] - f.send_time_s[ok] - configured)
            late.append(f.send_time_s[ok] - t_first >= 2.0)
        err = np.concatenate(err) if err else np.array([np.nan])
        late = np.concatenate(late) if late else np.array([False])
        meta = json.loads((rd / "run.json").read_text())
        run = meta["run"]
        counters = run.get("link_counters") or meta.get("link_counters") or {}
        links = [counters, *(counters.get("access") or {}).values()]
        lateness = [c[d]["lateness_us"] for c in links if c for d in ("a_to_b", "b_to_a") if d in c]
        # the same per link and direction with its name and packet count: the worst p99 is often a
        # direction that carried only the control exchange (a few dozen packets: its p99 is its max)
        named = [(f"{name} {d}", int(c[d].get("packets_out", 0)), c[d]["lateness_us"])
                 for name, c in [("bottleneck", counters), *((f"access-{h}", c) for h, c in (counters.get("access") or {}).items())]
                 if c for d in ("a_to_b", "b_to_a") if d in c]
        worst = max(named, key=lambda x: x[2]["p99"], default=None)
        media_dirs = [x for x in named if x[1] >= MEDIA_DIRECTION_PACKETS]
    cpu = env.get("emulator_cpu_s")
    return {"flows": n, "endpoints": env.get("media_endpoints", "per-flow"), "links": 2 * n + 1, "build_s": build_s, "rss_mb_total": sum(rss) / 2**20,
            "emulator_cpu_s": cpu, "delay_err_mean_ms": 1e3 * float(np.mean(err)),
            "delay_err_p99_ms": 1e3 * float(np.percentile(err, 99)), "delay_err_max_ms": 1e3 * float(np.max(err)),
            "delay_err_p99_after_2s_ms": 1e3 * float(np.percentile(err[late], 99)) if late.any() else float("nan"),
            "lateness_p99_us": max((x["p99"] for x in lateness), default=float("nan")),
            "lateness_max_us": max((x["max"] for x in lateness), default=float("nan")),
            "lateness_worst_link": f"{worst[0]} ({worst[1]} packets)" if worst else None,
            "lateness_p99_media_us": max((x[2]["p99"] for x in media_dirs), default=float("nan")),
            "realtime_cpu_cores_mean": float(np.mean(rt_cpu.cores)) if rt_cpu.cores else float("nan"),
            "realtime_cpu_cores_max": max(rt_cpu.cores, default=float("nan")),
            "received": int(sum(np.isfinite(f.recv_time_s).sum() for f in flows)),
            "sent": int(sum(len(f.send_time_s) for f in flows)),
            "endpoint_cpu_s": ep_cpu.cpu_s,
            "native_endpoint_cpu_s": ep_cpu.native_cpu_s,
            "endpoint_cores_steady": ep_cpu.steady_cores(),
            "endpoint_us_per_packet": 1e6 * ep_cpu.cpu_s / max(1, sum(len(f.send_time_s) for f in flows)),
            "lost_parts": run.get("lost") or []}


def _rss_bytes(pid: int) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, nargs="+", default=[20, 40, 80])
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--endpoints", choices=("auto", "grouped", "per-flow", "native"), default="auto",
                    help="media flow ends: a process each (per-flow), one process for the senders and one "
                         "for the receivers (grouped), grouped with the packets in tcpdelay-endpoint (native), "
                         "or the run's own choice (auto; tcpdelay.testbed.grouped_endpoints)")
    args = ap.parse_args()
    from tcpdelay.testbed.grouped_endpoints import ENDPOINTS_ENV

    os.environ[ENDPOINTS_ENV] = args.endpoints
    print(f"{'flows':>5} {'endpoints':>9} {'links':>9} {'build s':>8} {'RSS MB':>7} {'delay - configured, ms: mean':>29} "
          f"{'p99':>6} {'max':>7} {'p99 after 2 s':>13} {'emulator lateness us: p99':>25} {'max':>7}"
          f" {'real-time CPU, cores: mean':>26} {'max':>5} {'endpoint CPU s':>14} {'of it native':>12} {'us/packet':>9} {'cores, mid-run':>14}")
    for n in args.flows:
        r = measure(n, args.duration_s)
        print(f"{r['flows']:>5} {r['endpoints']:>9} {r['links']:>9} {r['build_s']:>8.2f} {r['rss_mb_total']:>7.1f} "
              f"{r['delay_err_mean_ms']:>29.3f} {r['delay_err_p99_ms']:>6.3f} {r['delay_err_max_ms']:>7.3f}"
              f" {r['delay_err_p99_after_2s_ms']:>13.3f} {r['lateness_p99_us']:>25.0f} {r['lateness_max_us']:>7.0f}"
              f" {r['realtime_cpu_cores_mean']:>26.2f} {r['realtime_cpu_cores_max']:>5.2f}"
              f" {r['endpoint_cpu_s']:>14.2f} {r['native_endpoint_cpu_s']:>12.2f} {r['endpoint_us_per_packet']:>9.1f}"
              f" {r['endpoint_cores_steady']:>14.3f}"
              + f"  lateness: worst p99 on {r['lateness_worst_link']}; worst p99 of directions with >= {MEDIA_DIRECTION_PACKETS} packets {r['lateness_p99_media_us']:.0f} us"
              + (f"  lost: {r['lost_parts']}" if r["lost_parts"] else ""))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

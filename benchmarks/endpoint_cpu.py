"""What the testbed's endpoints cost per packet (docs/testbed.md, "What the testbed costs";
issue 49 item 0): CPU per packet, cores, and the emulator's share, per endpoint kind, from real
scenario runs.

    .venv/bin/python benchmarks/endpoint_cpu.py [--kinds udp tcp ...] [--flows 20] [--duration-s 10]
        [--repeats 3] [--json] [--profile DIR]        (as root, like the other testbed benchmarks)

One run per kind and repeat, papers/004's topology as `testbed_access_links.py` builds it (every
host behind its own 10 Mb/s 10 ms access link, the bottleneck 100 Mb/s 25 ms):

- media kinds ``udp``, ``tcp`` (RFC 4571 framing), ``quic-stream``, ``quic-datagram``: ``--flows``
  VoIP flows (64 kb/s, 50 packets/s each); the unit is the *media packet* (sent, received and
  recorded: the senders' and receivers' CPU over the packets sent);
- cross kinds ``bulk``, ``web_onoff`` (on/off responses, a connection each), ``web_poisson`` (one
  connection, 512-byte messages at Poisson instants), ``page_load`` (6 connections, 372 kB, one
  load per flow at a random instant of the steady window),
  ``transfers`` (64 kB each, 0.1 s apart), ``udp_background`` (1 Mb/s of 1200-byte datagrams):
  ``--flows`` flows of the kind alone; the unit is the *wire packet* (every segment, data and
  ACKs, both directions, as the emulator's bottleneck counted it: ``packets_in``), and where
  the kind has them the application's messages (responses, page loads, transfers) beside it.
  The *response server* (the sending end of bulk, web and page loads: one process per server
  host, a thread per connection) is shown as its own row under those kinds.

CPU is user + system time of the endpoint processes (every thread; /proc, sampled every 0.2 s;
what a process used after its last sample is added from the run's reaped children's rusage),
each filed by the network namespaces its threads run in: the sending side (media senders, cross
servers, UDP background senders), the receiving side, or both (one program serving every flow
end, as a native endpoint may: then no split is shown). "Per packet" counts from the run's
start instant t0 to the processes' end: sending, receiving, records written (Parquet parts,
the final flush, the summaries); set-up (imports, connections, before t0) is shown apart.
"Cores" is the mean over the traffic's [t0, t0 + duration]; "busiest" the worst 1-s window.
The emulator's CPU is its own row (same window). The mode of the media endpoints
(``TCPDELAY_MEDIA_ENDPOINTS``: per-flow, grouped, native, as the run's environment.json says) is
printed with every row; QUIC flows keep a process each whatever it says.

Conditions: the machine is shared; each run records the load average and the share of its wall
time in which some task waited for a CPU (``/proc/pressure/cpu``, ``some`` total). CPU per
packet is much less sensitive to that than delay is, not insensitive: rerun with ``--repeats``.

``--profile DIR`` also runs ``py-spy record`` (``--native --idle``, raw folded stacks) on the
busiest sending and receiving process of each kind for most of the traffic, and ``perf record
-g`` on them and on the emulator (kernel and user stacks); ``endpoint_profile.py DIR`` sums them
up. Not for CPU figures: py-spy stops its target at every sample, and the profilers take CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_cpu import CpuByRole, Proc  # noqa: E402  (sibling modules)
from testbed_access_links import scenario as access_scenario  # noqa: E402

MEDIA_KINDS = ("udp", "tcp", "quic-stream", "quic-datagram")
CROSS_KINDS = {
    "bulk": {"kind": "bulk"},
    "web_onoff": {"kind": "web_onoff"},
    "web_poisson": {"kind": "web_onoff", "mode": "poisson", "gap_mean_s": 0.05, "packet_size_bytes": 512},
    "page_load": {"kind": "page_load", "connections": 6, "total_bytes": 372_000, "start_s": 0.0,
                  "start_spread_s": 0.5},
    "transfers": {"kind": "transfers", "size_bytes": 65_536, "transfers": 1000, "gap_s": 0.1},
    "udp_background": {"kind": "udp", "rate_bps": 1e6, "packet_size_bytes": 1200},
}
KINDS = (*MEDIA_KINDS, *CROSS_KINDS)
#: The two sides' names, per kind.
SIDES = {"tx": "senders", "rx": "receivers"}
CROSS_SIDES = {"bulk": ("response server", "clients"), "web_onoff": ("response server", "clients"),
               "web_poisson": ("response server", "clients"), "page_load": ("response server", "clients"),
               "transfers": ("transfer servers", "clients"), "udp_background": ("senders", "sinks")}
#: Programs a testbed runs to set itself up (never endpoints).
#: The steady window: from this long after the run's start instant t0 (the programs' first
#: records, QUIC's imports and handshakes, which come after t0) to this long before its end.
WINDOW_SKIP_S = 2.0
WINDOW_END_S = 0.5
HELPERS = {"ip", "sysctl", "tc", "ethtool", "bpftool", "sh", "bash", "modprobe", "sleep", "nft",
           "iptables", "py-spy", "perf", "tcpdump"}


def scenario(kind: str, n: int, duration_s: float) -> dict:
    sc = access_scenario(n, duration_s)
    sc["name"] = f"cpu-{kind}-{n}"
    if kind in MEDIA_KINDS:
        sc["flows"] = [{"name": "voip", "profile": "voip", "transport": kind, "count": n}]
    else:
        sc["flows"] = []
        sc["cross"] = [{**CROSS_KINDS[kind], "count": n}]
        if kind == "page_load":       # one load per flow, spread over the steady window
            sc["cross"][0].update(start_s=WINDOW_SKIP_S + 0.5, start_spread_s=max(0.5, duration_s - WINDOW_SKIP_S - 2.5))
    return sc


def sides(plan) -> tuple[set[str], set[str]]:
    """The plan's sending hosts and receiving hosts."""
    tx = {m.sender for m in plan.media} | {c.server for c in plan.cross}
    rx = {m.receiver for m in plan.media} | {c.client for c in plan.cross}
    return tx, rx


def classifier(plan, own_comm: str):
    tx, rx = sides(plan)

    def classify(p: Proc, netns: str | None) -> str:
        if p.comm == "tcpdelay-link":
            return "emulator"
        if p.comm in HELPERS or not netns or not netns.startswith("td-"):
            return "other"
        host = netns.split("-", 2)[2]
        return "tx" if host in tx else "rx" if host in rx else "other"

    return classify


def _psi_some_us() -> int | None:
    try:
        for line in open("/proc/pressure/cpu"):
            if line.startswith("some "):
                return int(line.split("total=")[1])
    except (OSError, IndexError, ValueError):
        pass
    return None


#: py-spy records this many of a side's processes at most (the busiest).
PYSPY_PROCESSES = 4


class Profiler(threading.Thread):
    """Once the run's traffic flows, ``perf record -g`` on every process of each side and on the
    emulator, and ``py-spy record`` on each side's busiest processes, for ``seconds``."""

    def __init__(self, cpu: CpuByRole, out: Path, tag: str, seconds: float, after_s: float):
        super().__init__(daemon=True)
        self.cpu, self.out, self.tag, self.seconds, self.after_s = cpu, out, tag, seconds, after_s
        self.procs: list[subprocess.Popen] = []

    def run(self) -> None:
        deadline = time.monotonic() + 120.0       # the traffic has started: its hosts' packets grow
        while time.monotonic() < deadline and (len(self.cpu.packets) < 2 or self.cpu.packets[-1] - self.cpu.packets[0] < 100):
            time.sleep(0.2)
        time.sleep(self.after_s)
        pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        for role in ("tx", "rx", "ends", "emulator"):
            live = sorted(((s.cpu[-1], pid) for pid, s in self.cpu.series.items() if s.role == role and not s.gone),
                          reverse=True)
            if not live:
                continue
            pids = [pid for _, pid in live]
            base = self.out / f"{self.tag}-{role}"
            # perf on every process of the side (a per-flow process alone is mostly asleep: too
            # few samples); py-spy (one process each) on the busiest few
            self._start(["perf", "record", "-g", "-F", "499", "-p", ",".join(map(str, pids)),
                         "-o", f"{base}.perf.data", "--", "sleep", str(self.seconds)])
            if role == "emulator":          # (a Rust program: perf sees all of it)
                continue
            for pid in pids[:PYSPY_PROCESSES]:
                self._start([pyspy, "record", "--pid", str(pid), "--duration", str(int(self.seconds)), "--rate", "250",
                             "--native", "--idle", "--threads", "--format", "raw", "--output",
                             f"{base}-{pid}.pyspy.txt"])

    def _start(self, argv: list[str]) -> None:
        log = open(self.out / "profilers.log", "a")
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True))

    def wait(self) -> None:
        self.join()
        for p in self.procs:
            try:
                p.wait(self.seconds + 30)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGINT)
                p.wait()


def measure(kind: str, n: int, duration_s: float, profile_dir: Path | None = None) -> dict:
    from tcpdelay.experiments.plan import plan_run
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.scenario import parse_scenario

    sc = parse_scenario(scenario(kind, n, duration_s))
    plan = plan_run(sc, 1)
    with open("/proc/self/comm") as f:
        own_comm = f.read().strip()
    load0, psi0, wall0 = os.getloadavg(), _psi_some_us(), time.monotonic()
    own0 = time.process_time()
    failed = None
    with tempfile.TemporaryDirectory() as tmp:
        rd = Path(tmp)
        with CpuByRole(classifier(plan, own_comm), count_packets=("tx", "rx", "ends")) as cpu:
            prof = None
            if profile_dir is not None:
                # (from 1.5 s after the traffic starts, for most of it)
                prof = Profiler(cpu, profile_dir, f"{kind}-{n}", max(3.0, duration_s - 3.0), after_s=1.5)
                prof.start()
            try:
                run_scenario(sc, 1, rd)
            except Exception as err:  # noqa: BLE001 - a lost part: reported, the numbers still read
                failed = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            if prof is not None:
                prof.wait()
        meta = json.loads((rd / "run.json").read_text())
        env = json.loads((rd / "environment.json").read_text())
        t0, dur = float(meta["run"]["t0_monotonic_s"]), float(meta["run"]["duration_s"])
        start, end = t0 + WINDOW_SKIP_S, t0 + dur - WINDOW_END_S
        media_in_window = None
        if kind in MEDIA_KINDS:
            from tcpdelay.results.packets import load_flows

            flows, _ = load_flows(rd)
            media_in_window = int(sum(((f.send_time_s >= start) & (f.send_time_s < end)).sum() for f in flows))
    wall1, psi1, own1 = time.monotonic(), _psi_some_us(), time.process_time()
    run = meta["run"]
    counters = run.get("link_counters") or {}
    wire = sum(int((counters.get(d) or {}).get("packets_in", 0)) for d in ("a_to_b", "b_to_a"))
    totals = run["totals"]
    media = kind in MEDIA_KINDS
    packets = int(totals["packets_sent"]) if media else wire
    out = {"kind": kind, "flows": n, "duration_s": dur, "t0": t0,
           "endpoints": env.get("media_endpoints") if media else "per-end",
           "endpoints_env": os.environ.get("TCPDELAY_MEDIA_ENDPOINTS", "auto"),
           "unit": "media packet" if media else "wire packet",
           "packets": packets, "media_received": int(totals["packets_received"]) if media else None,
           "wire_packets": wire, "messages": _messages(kind, run), "failed": failed,
           "loadavg_1m_before": load0[0], "loadavg_1m_after": os.getloadavg()[0],
           "cpu_pressure_some_pct": (100.0 * (psi1 - psi0) / 1e6 / (wall1 - wall0)) if psi0 is not None else None,
           "sampler_cpu_s": cpu.own_cpu_s, "run_process_cpu_s": own1 - own0}
    wire_in_window = cpu.packets_between(start, end) / 2      # (each packet: at its sender's host and its receiver's)
    window_packets = media_in_window if media else wire_in_window
    out.update(window_s=end - start, window_packets=window_packets, wire_packets_in_window=wire_in_window)
    for role in ("tx", "rx", "ends", "emulator"):      # ends: a process serving both sides
        out[role] = {"processes": cpu.processes(role),
                     "window_cpu_s": cpu.cpu_s(role, start, end),
                     "total_cpu_s": cpu.cpu_s(role),
                     "cores_mean": cpu.cpu_s(role, start, end) / (end - start),
                     "cores_busiest_1s": cpu.busiest_s(role, start, end)}
    out["emulator"]["total_cpu_s"] = cpu.cpu_s("emulator", t0, t0 + dur)   # (it lives past the traffic)
    out["other_cpu_s"] = cpu.cpu_s("other") + sum(cpu.unseen_s.values())

    def per(cpu_s: float, count: float) -> float:
        return 1e6 * cpu_s / count if count else float("nan")

    ends = sum(out[r]["window_cpu_s"] for r in ("tx", "rx", "ends"))
    total = sum(out[r]["total_cpu_s"] for r in ("tx", "rx", "ends"))
    split = out["ends"]["processes"] == 0     # (one process for both sides: no split)
    out["us_per_packet"] = per(ends, window_packets)
    out["us_per_packet_tx"] = per(out["tx"]["window_cpu_s"], window_packets) if split else float("nan")
    out["us_per_packet_rx"] = per(out["rx"]["window_cpu_s"], window_packets) if split else float("nan")
    out["us_per_wire_packet"] = per(ends, wire_in_window)
    # the whole life of every endpoint (forked, imports, connections, the last records and
    # summaries) over every packet of the run: the issue's "set-up and summaries included"
    out["us_per_packet_whole_run"] = per(total, packets)
    # what does not grow with packets: the whole minus the steady rate times the run's packets
    out["fixed_cpu_s_per_flow"] = (total - ends / window_packets * packets) / n if window_packets else float("nan")
    out["us_per_message"] = per(total, out["messages"]) if out["messages"] else None
    out["cores_mean"] = sum(out[r]["cores_mean"] for r in ("tx", "rx", "ends"))
    out["cores_per_flow"] = out["cores_mean"] / n
    out["flows_per_core"] = n / out["cores_mean"] if out["cores_mean"] > 0 else float("inf")
    # per packet of the kind's unit (media packets: the hosts' interface counts of a grouped
    # process's threads are read per thread, and miss some)
    out["emulator_us_per_packet"] = per(out["emulator"]["window_cpu_s"], window_packets)
    return out


def _messages(kind: str, run: dict) -> int | None:
    """The application's messages of a cross kind: responses (web on/off), page loads,
    transfers completed, datagrams; None for media and bulk."""
    rs = [c.get("result") or {} for c in run.get("cross", [])]
    if kind == "web_onoff":
        return sum(int(s.get("responses_completed", 0) or 0) for s in (run.get("cross_servers") or {}).values()
                   if isinstance(s, dict))
    if kind == "page_load":
        return sum(1 for r in rs if r and not r.get("error"))
    if kind == "transfers":
        return sum(sum(1 for t in r.get("transfers", []) if t.get("complete")) for r in rs)
    if kind == "udp_background":
        return sum(int(r.get("packets", 0) or 0) for r in rs)
    return None


def _median_spread(xs: list[float]) -> tuple[float, float, float]:
    xs = [x for x in xs if x == x]
    return (statistics.median(xs), min(xs), max(xs)) if xs else (float("nan"),) * 3


def summarize(rows: list[dict]) -> list[dict]:
    """Per kind (and flow count): the median and range over repeats of each figure."""
    out = []
    for key in dict.fromkeys((r["kind"], r["flows"]) for r in rows):
        rs = [r for r in rows if (r["kind"], r["flows"]) == key]
        s = {"kind": key[0], "flows": key[1], "repeats": len(rs), "endpoints": rs[0]["endpoints"], "unit": rs[0]["unit"]}
        for fig in ("us_per_packet", "us_per_packet_tx", "us_per_packet_rx", "us_per_wire_packet",
                    "us_per_packet_whole_run", "fixed_cpu_s_per_flow", "us_per_message", "cores_mean", "cores_per_flow", "flows_per_core", "emulator_us_per_packet",
                    "cpu_pressure_some_pct", "loadavg_1m_before"):
            vals = [r[fig] for r in rs if r[fig] is not None]
            s[fig] = _median_spread(vals)
        s["emulator_cores"] = _median_spread([r["emulator"]["cores_mean"] for r in rs])
        s["packets"] = _median_spread([r["window_packets"] for r in rs])
        s["failed"] = [r["failed"] for r in rs if r["failed"]]
        out.append(s)
    return out


def _fmt(t: tuple[float, float, float], digits: int = 0) -> str:
    m, lo, hi = t
    if m != m:
        return "-"
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})" if hi > lo else f"{m:.{digits}f}"


def print_table(summary: list[dict]) -> None:
    cols = (("kind", 14, None), ("flows", 5, None), ("endpoints", 10, None), ("unit", 12, None),
            ("packets/window", 14, ("packets", 0)), ("us/packet", 16, ("us_per_packet", 0)),
            ("senders", 14, ("us_per_packet_tx", 0)), ("receivers", 14, ("us_per_packet_rx", 0)),
            ("us/wire pkt", 14, ("us_per_wire_packet", 0)), ("whole run", 16, ("us_per_packet_whole_run", 0)),
            ("fixed s/flow", 16, ("fixed_cpu_s_per_flow", 3)), ("us/msg, whole", 16, ("us_per_message", 0)),
            ("cores", 16, ("cores_mean", 2)), ("flows/core", 14, ("flows_per_core", 0)),
            ("emu us/packet", 14, ("emulator_us_per_packet", 1)), ("emu cores", 14, ("emulator_cores", 2)),
            ("PSI some %", 12, ("cpu_pressure_some_pct", 0)))
    print("\n" + " ".join(f"{c:>{w}}" for c, w, _ in cols))
    for s in summary:
        head = [s["kind"], str(s["flows"]), str(s["endpoints"])[:10], s["unit"]]
        cells = head + [_fmt(s[k], d) for _, _, (k, d) in cols[4:]]
        names = CROSS_SIDES.get(s["kind"])
        print(" ".join(f"{c:>{w}}" for c, (_, w, _) in zip(cells, cols))
              + (f"   (senders = {names[0]}, receivers = {names[1]})" if names else "")
              + (f"   FAILED: {s['failed']}" if s["failed"] else ""))
    print("us/packet: endpoint CPU (both sides) per packet moved in the steady window "
          f"[t0 + {WINDOW_SKIP_S:g} s, end - {WINDOW_END_S:g} s]; median (min-max) over repeats. whole run: every "
          "endpoint's whole life over every packet (us/msg: over every message); fixed: what does not grow with packets, per flow.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--flows", type=int, nargs="+", default=[20])
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print every run's figures and the summary as JSON")
    ap.add_argument("--profile", type=Path, metavar="DIR",
                    help="also profile (py-spy, perf) the busiest process of each side into DIR")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("endpoint_cpu: the testbed needs root", file=sys.stderr)
        return 2
    from tcpdelay.testbed.grouped_endpoints import endpoints_mode

    from tcpdelay.errors import ParameterError

    try:
        endpoints_mode(0)     # a bad TCPDELAY_MEDIA_ENDPOINTS: one line before any run
    except ParameterError as err:
        print(f"endpoint_cpu: {err}", file=sys.stderr)
        return 2
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    rows = []
    for rep in range(args.repeats):           # repeats interleaved: a busy spell hits every kind
        for kind in args.kinds:
            for n in args.flows:
                r = measure(kind, n, args.duration_s, args.profile)
                r["repeat"] = rep
                rows.append(r)
                print(f"[{rep}] {kind:<14} {n:>3} flows {str(r['endpoints'])[:10]:<10} "
                      f"{r['window_packets']:>7.0f} {r['unit']}s in {r['window_s']:.1f} s: "
                      f"{r['us_per_packet']:6.0f} us/packet (senders {r['us_per_packet_tx']:.0f}, receivers "
                      f"{r['us_per_packet_rx']:.0f}; whole run {r['us_per_packet_whole_run']:.0f}, "
                      f"fixed {r['fixed_cpu_s_per_flow']:.3f} s/flow), {r['cores_mean']:.2f} cores "
                      f"(busiest 1 s: {sum(r[x]['cores_busiest_1s'] for x in ('tx', 'rx', 'ends')):.2f}); "
                      f"emulator {r['emulator_us_per_packet']:.1f} us/packet, {r['emulator']['cores_mean']:.2f} cores; "
                      f"load {r['loadavg_1m_before']:.1f}, PSI some {r['cpu_pressure_some_pct'] or 0:.0f} %"
                      + (f"  FAILED: {r['failed']}" if r["failed"] else ""),
                      file=sys.stderr if args.json else sys.stdout, flush=True)
    summary = summarize(rows)
    if args.json:
        print(json.dumps({"runs": rows, "summary": summary}, indent=1, default=str))
    else:
        print_table(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())

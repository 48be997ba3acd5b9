#!/usr/bin/env python3
"""Westwood+ as Linux's own code runs it against tcpdelay's BPF port (issue 32's table).

One bulk flow (iperf3, ``-C``), 10 Mb/s, RTT 100 ms (50 ms each way), Bernoulli loss 0.5 % in
each direction, a 200-packet drop-tail queue, through the testbed's emulator, for each seed:

- on this machine's kernel (6.18), sender and receiver in namespaces: the BPF port
  ``westwood+`` (``tdwestwoodp``) and the kernel's ``reno``;
- the sender a QEMU guest booting Debian's Linux 6.1 (``tcpdelay.testbed.guest``, TCG), the
  receiver a namespace: the kernel module ``westwood`` (net/ipv4/tcp_westwood.c, which is
  Westwood+: one bandwidth sample per RTT, EWMA 7/8) and ``reno``.

Prints goodput (the receiver's, iperf3 ``sum_received``), retransmissions and the sender's mean
smoothed RTT side by side. The guest's CPU is emulated (TCG) and niced; the reno pair (the same
kernel algorithm on both) is the control for what that costs. Figures: docs/testbed.md,
"Reference-kernel hosts".

``--variant vegas`` runs the same against Vegas (BPF ``tdvegas`` / module ``tcp_vegas``), and
``--loss 0`` on the clean path.

Run as root: .venv/bin/python benchmarks/reference_kernel_westwood.py [--duration-s 40]
[--seeds 1 2] [--variant westwood+|vegas] [--loss P] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess

from rich.console import Console
from rich.table import Table

from tcpdelay.testbed import BernoulliLoss, LinkSpec, Testbed, TestbedSpec
from tcpdelay.testbed.guest import attach_guest

PORT = 5301


def link(loss: float, rate_bps: float, one_way_s: float, queue_packets: int) -> LinkSpec:
    return LinkSpec.symmetric(delay_s=one_way_s, rate_bps=rate_bps, queue_packets=queue_packets,
                              loss=BernoulliLoss(p=loss))


def _summary(report: dict) -> dict:
    end = report["end"]
    rtts = [s["sender"].get("mean_rtt") for s in end.get("streams", []) if s.get("sender", {}).get("mean_rtt")]
    return {"goodput_bps": end["sum_received"]["bits_per_second"],
            "retransmits": end["sum_sent"].get("retransmits"),
            "mean_srtt_s": rtts[0] / 1e6 if rtts else None,
            "congestion_control": end.get("sender_tcp_congestion")}


def _server(tb: Testbed) -> subprocess.Popen:
    return tb.hosts["right0"].popen(["iperf3", "-s", "-1", "-p", str(PORT)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)


#: Each variant's kernel module name (what the guest runs).
MODULES = {"westwood+": "westwood", "vegas": "vegas"}


def host_runs(spec: TestbedSpec, duration_s: float, variant: str) -> dict[str, dict]:
    out = {}
    with Testbed(spec) as tb:
        port = tb.kernel_name(variant)
        for label, cc in ((f"{variant} (BPF {port}, 6.18)", port), ("reno (6.18)", "reno")):
            srv = _server(tb)
            res = tb.hosts["left0"].run(["iperf3", "-c", tb.hosts["right0"].address, "-p", str(PORT), "-t",
                                         str(duration_s), "-C", cc, "-J"], timeout_s=duration_s + 60)
            srv.wait(30)
            out[label] = _summary(json.loads(res.stdout))
    return out


def guest_runs(spec: TestbedSpec, duration_s: float, variant: str) -> tuple[dict[str, dict], dict]:
    out = {}
    with Testbed(spec) as tb:
        guest = attach_guest(tb, "left0")
        module = MODULES[variant]
        for label, cc in ((f"{module} (module, 6.1 guest)", module), ("reno (6.1 guest)", "reno")):
            srv = _server(tb)
            res = guest.exec(f"iperf3 -c {tb.hosts['right0'].address} -p {PORT} -t {duration_s:g} -C {cc} -J",
                             timeout_s=duration_s + 120)
            srv.wait(30)
            out[label] = _summary(json.loads(res.stdout))
        info = {"boot_s": guest.boot_s, "accelerator": guest.accel, "release": guest.kernel.release}
    return out, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=40.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--loss", type=float, default=0.005)
    ap.add_argument("--variant", choices=sorted(MODULES), default="westwood+")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    results: dict[str, list] = {}
    guests = []
    for seed in a.seeds:
        spec = TestbedSpec(link=link(a.loss, 10e6, 0.05, 200), seed=seed, congestion_controls=(a.variant,))
        for label, s in host_runs(spec, a.duration_s, a.variant).items():
            results.setdefault(label, []).append({"seed": seed, **s})
        g, info = guest_runs(spec.model_copy(update={"congestion_controls": ()}), a.duration_s, a.variant)
        guests.append({"seed": seed, **info})
        for label, s in g.items():
            results.setdefault(label, []).append({"seed": seed, **s})
    if a.json:
        print(json.dumps({"results": results, "guests": guests}, indent=1))
        return
    t = Table(title=f"one bulk flow, 10 Mb/s, RTT 100 ms, loss {a.loss:.1%} each way, 200-packet queue, "
                    f"{a.duration_s:g} s; seeds {' / '.join(map(str, a.seeds))}")
    for col in ("sender", "goodput (Mb/s)", "retransmits", "mean sRTT (ms)"):
        t.add_column(col)
    for label, rows in results.items():
        t.add_row(label, " / ".join(f"{r['goodput_bps'] / 1e6:.2f}" for r in rows),
                  " / ".join(str(r["retransmits"]) for r in rows),
                  " / ".join(f"{r['mean_srtt_s'] * 1e3:.0f}" if r["mean_srtt_s"] else "—" for r in rows))
    Console().print(t)
    Console().print(f"guests: {guests}")


if __name__ == "__main__":
    main()

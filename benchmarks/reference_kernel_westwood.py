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
``--loss 0`` on the clean path. ``--port-on-guest`` also runs the BPF port on the 6.1 guest
(``tcpdelay-cc-load`` registers it there without a BPF link, which 6.1 lacks): the port and the
module then see the same emulated CPU, so a difference left between them is the port's, and one
that goes is the guest's timing. Every run also gives its sender's congestion window and RTT
every 0.1 s (iperf3's intervals): the peak window and when it was reached are printed, the
series are in ``--json``.

Run as root: .venv/bin/python benchmarks/reference_kernel_westwood.py [--duration-s 40]
[--seeds 1 2] [--variant westwood+|vegas] [--loss P] [--port-on-guest] [--plot PNG [--replot JSON]] [--json]
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
#: The segment size on the emulated path (1500-byte MTU, timestamps): cwnd bytes -> segments.
MSS_BYTES = 1448


def link(loss: float, rate_bps: float, one_way_s: float, queue_packets: int) -> LinkSpec:
    return LinkSpec.symmetric(delay_s=one_way_s, rate_bps=rate_bps, queue_packets=queue_packets,
                              loss=BernoulliLoss(p=loss))


#: iperf3's reporting interval (its smallest): the cwnd / RTT series' step.
INTERVAL_S = 0.1


def _summary(report: dict) -> dict:
    end = report["end"]
    rtts = [s["sender"].get("mean_rtt") for s in end.get("streams", []) if s.get("sender", {}).get("mean_rtt")]
    series = [{"t_s": iv["sum"]["end"], "cwnd_bytes": iv["streams"][0].get("snd_cwnd"),
               "rtt_s": iv["streams"][0].get("rtt", 0) / 1e6, "retransmits": iv["streams"][0].get("retransmits")}
              for iv in report.get("intervals", []) if iv.get("streams")]
    peak = max(series, key=lambda r: r["cwnd_bytes"] or 0) if series else None
    return {"goodput_bps": end["sum_received"]["bits_per_second"],
            "retransmits": end["sum_sent"].get("retransmits"),
            "mean_srtt_s": rtts[0] / 1e6 if rtts else None,
            "congestion_control": end.get("sender_tcp_congestion"),
            "peak_cwnd_bytes": peak["cwnd_bytes"] if peak else None, "peak_at_s": peak["t_s"] if peak else None,
            "series": series}


def _client(server: str, cc: str, duration_s: float) -> str:
    return f"iperf3 -c {server} -p {PORT} -t {duration_s:g} -i {INTERVAL_S:g} -C {cc} -J"


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
            res = tb.hosts["left0"].run(_client(tb.hosts["right0"].address, cc, duration_s).split(),
                                        timeout_s=duration_s + 60)
            srv.wait(30)
            out[label] = _summary(json.loads(res.stdout))
    return out


#: The kernel name the BPF port is registered under on the guest.
GUEST_PORT_NAME = "tdguestport"


def guest_runs(spec: TestbedSpec, duration_s: float, variant: str,
               port_on_guest: bool = False) -> tuple[dict[str, dict], dict]:
    out = {}
    with Testbed(spec) as tb:
        guest = attach_guest(tb, "left0")
        module = MODULES[variant]
        runs = [(f"{module} (module, 6.1 guest)", module), ("reno (6.1 guest)", "reno")]
        if port_on_guest:
            guest.register_bpf_port(variant, GUEST_PORT_NAME)
            runs.insert(1, (f"{variant} (BPF port, 6.1 guest)", GUEST_PORT_NAME))
        for label, cc in runs:
            srv = _server(tb)
            res = guest.exec(_client(tb.hosts["right0"].address, cc, duration_s), timeout_s=duration_s + 120)
            srv.wait(30)
            out[label] = _summary(json.loads(res.stdout))
        info = {"boot_s": guest.boot_s, "accelerator": guest.accel, "release": guest.kernel.release}
    return out, info


def plot(results: dict[str, list], path: str, first_s: float = 3.0) -> None:
    """Each sender's runs: congestion window (segments) and RTT (ms) over the first ``first_s``
    seconds, one colour per sender, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for i, (label, rows) in enumerate(results.items()):
        for k, r in enumerate(rows):
            pts = [p for p in r["series"] if p["t_s"] <= first_s]
            t = [p["t_s"] for p in pts]
            kw = {"color": f"C{i}", "alpha": 0.8, "label": label if k == 0 else None}
            top.plot(t, [(p["cwnd_bytes"] or 0) / MSS_BYTES for p in pts], **kw)
            bottom.plot(t, [p["rtt_s"] * 1e3 for p in pts], **kw)
    top.set_ylabel("cwnd (segments)")
    bottom.set_ylabel("smoothed RTT (ms)")
    bottom.set_xlabel("time since the flow started (s)")
    top.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=40.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--loss", type=float, default=0.005)
    ap.add_argument("--variant", choices=sorted(MODULES), default="westwood+")
    ap.add_argument("--port-on-guest", action="store_true", help="also run the BPF port on the 6.1 guest")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--plot", metavar="PNG", help="also draw every run's cwnd and RTT over its first seconds")
    ap.add_argument("--replot", metavar="JSON", help="draw --plot from a saved --json output instead of running")
    a = ap.parse_args()
    if a.replot:
        if not a.plot:
            ap.error("--replot needs --plot PNG")
        with open(a.replot) as f:
            plot(json.load(f)["results"], a.plot)
        return
    results: dict[str, list] = {}
    guests = []
    for seed in a.seeds:
        spec = TestbedSpec(link=link(a.loss, 10e6, 0.05, 200), seed=seed, congestion_controls=(a.variant,))
        for label, s in host_runs(spec, a.duration_s, a.variant).items():
            results.setdefault(label, []).append({"seed": seed, **s})
        g, info = guest_runs(spec.model_copy(update={"congestion_controls": ()}), a.duration_s, a.variant,
                             a.port_on_guest)
        guests.append({"seed": seed, **info})
        for label, s in g.items():
            results.setdefault(label, []).append({"seed": seed, **s})
    if a.plot:
        plot(results, a.plot)
    if a.json:
        print(json.dumps({"results": results, "guests": guests}, indent=1))
        return
    t = Table(title=f"one bulk flow, 10 Mb/s, RTT 100 ms, loss {a.loss:.1%} each way, 200-packet queue, "
                    f"{a.duration_s:g} s; seeds {' / '.join(map(str, a.seeds))}")
    for col in ("sender", "goodput (Mb/s)", "retransmits", "mean sRTT (ms)", "peak cwnd (segments) at (s)"):
        t.add_column(col)
    for label, rows in results.items():
        t.add_row(label, " / ".join(f"{r['goodput_bps'] / 1e6:.2f}" for r in rows),
                  " / ".join(str(r["retransmits"]) for r in rows),
                  " / ".join(f"{r['mean_srtt_s'] * 1e3:.0f}" if r["mean_srtt_s"] else "—" for r in rows),
                  " / ".join(f"{r['peak_cwnd_bytes'] / MSS_BYTES:.0f} at {r['peak_at_s']:.1f}"
                             if r["peak_cwnd_bytes"] else "—" for r in rows))
    Console().print(t)
    Console().print(f"guests: {guests}")


if __name__ == "__main__":
    main()

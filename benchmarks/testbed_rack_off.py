#!/usr/bin/env python3
"""Does ``tcp.rack = false`` turn RACK loss detection off on this kernel? (issue 17)

``rack`` is bit 0 of the namespace's ``net.ipv4.tcp_recovery``. Linux 6.17 removed the
RFC 6675 (dupthresh) loss detection it fell back to (Neal Cardwell, "tcp: remove obsolete and
unused RFC3517/RFC6675 loss recovery code", net-next June 2025): since then the bit has no
effect and a SACK connection always detects losses with RACK (RFC 8985). This measures it:
bulk transfers over a lossy emulated link (Bernoulli loss on the data direction) with
``newreno-2008`` (Reno, SACK, RACK and TLP off), the same with ``rack = true``, and with SACK off
(a non-SACK connection uses NewReno's duplicate-ACK counting, never RACK), and prints the
sender namespace's ``TcpExt`` counters. Without RACK a lost retransmission is found only by a
timeout (``TCPTimeouts``); RACK finds it from later deliveries and counts it in
``TCPLostRetransmit`` without one (a timeout's marking also increments that counter). On Linux
6.18, 4 MB at 3 % and RTT 40 ms, four runs: with the bit set or cleared alike 72-75 recoveries,
3-7 retransmissions lost again and 0-1 timeouts (a tail loss, which only the probe repairs);
with SACK off 7-9 timeouts.

Run as root: .venv/bin/python benchmarks/testbed_rack_off.py [--size-bytes N] [--loss P] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform

from rich.console import Console
from rich.table import Table

from tcpdelay.testbed import BernoulliLoss, DirectionSpec, LinkSpec, Testbed, TestbedSpec
from tcpdelay.testbed.spec import HostSpec, TcpSettings, preset
from tcpdelay.traffic import bulk_transfer

PORT = 7200
COUNTERS = ("TCPLostRetransmit", "TCPTimeouts", "TCPSackRecovery", "TCPRenoRecovery", "TCPLossProbes",
            "TCPFastRetrans", "TCPSlowStartRetrans")
CASES = (("newreno-2008 (rack = false)", TcpSettings()), ("newreno-2008, rack = true", TcpSettings(rack=True)),
         ("newreno-2008, sack = false", TcpSettings(sack=False)))


def tcp_ext(host) -> dict[str, int]:
    lines = [ln.split() for ln in host.run(["cat", "/proc/net/netstat"]).stdout.splitlines()]
    for names, values in zip(lines[::2], lines[1::2]):
        if names[0] == "TcpExt:":
            return {k: int(v) for k, v in zip(names[1:], values[1:])}
    raise RuntimeError("no TcpExt line in /proc/net/netstat")


def run(settings: TcpSettings, size_bytes: int, loss: float, rtt_s: float, seed: int) -> dict:
    tcp = preset("newreno-2008").merged(settings)
    link = LinkSpec(a_to_b=DirectionSpec(delay_s=rtt_s / 2, loss=BernoulliLoss(p=loss)),
                    b_to_a=DirectionSpec(delay_s=rtt_s / 2))
    hosts = (HostSpec(name="left0", side="left", tcp=tcp), HostSpec(name="right0", side="right", tcp=tcp))
    with Testbed(TestbedSpec(link=link, hosts=hosts, seed=seed)) as tb:
        left, right = tb.hosts["left0"], tb.hosts["right0"]
        rx = right.spawn(bulk_transfer.receive, PORT)
        sent = left.call(bulk_transfer.send, right.address, PORT, size_bytes=size_bytes)
        got = rx.result(timeout_s=30)["bytes"]
        wall_s = sent["duration_s"]
        ext = tcp_ext(left)
        recovery = left.sysctl("net.ipv4.tcp_recovery")
        sack = left.sysctl("net.ipv4.tcp_sack")
    return {"tcp_recovery": int(recovery), "tcp_sack": int(sack), "received_bytes": got, "transfer_s": wall_s,
            **{k: ext.get(k, 0) for k in COUNTERS}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-bytes", type=int, default=4_000_000)
    ap.add_argument("--loss", type=float, default=0.03, help="Bernoulli loss of the data direction (default 0.03)")
    ap.add_argument("--rtt-s", type=float, default=0.04)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.size_bytes < 1 or not 0 < a.loss < 0.5 or not a.rtt_s > 0:
        raise SystemExit("--size-bytes must be >= 1, --loss in (0, 0.5), --rtt-s > 0")
    con = Console(stderr=True)
    rows = {}
    for name, settings in CASES:
        con.print(f"[dim]{name} ...[/dim]")
        rows[name] = run(settings, a.size_bytes, a.loss, a.rtt_s, a.seed)
    out = {"kernel": platform.release(), "size_bytes": a.size_bytes, "loss": a.loss, "rtt_s": a.rtt_s, "cases": rows}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    t = Table(title=f"Linux {out['kernel']}: {a.size_bytes} bytes, Bernoulli {a.loss} on the data, RTT "
                    f"{a.rtt_s * 1e3:.0f} ms — the sender's TcpExt counters", title_justify="left")
    for col in ("case", "tcp_recovery", "tcp_sack", "transfer (s)", *COUNTERS):
        t.add_column(col, justify="right")
    for name, r in rows.items():
        t.add_row(name, str(r["tcp_recovery"]), str(r["tcp_sack"]), f"{r['transfer_s']:.2f}",
                  *(str(r[k]) for k in COUNTERS))
    Console(width=200).print(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

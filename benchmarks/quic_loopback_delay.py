"""What the QUIC endpoints add to a packet's delay, beside TCP's, over loopback at the video rate.

For each transport (``tcp`` and the three QUIC mappings, docs/transports-quic.md) one run of the
"video" profile (1448-byte packets every 20 ms, 573 kb/s; ``--profile`` for another) for
``--duration-s``: ``run_sender`` here, ``run_receiver`` in another process, both on 127.0.0.1.
On loopback the path adds only microseconds, so a packet's one-way delay (receive time minus
send time, one CLOCK_MONOTONIC) is what the two endpoints add: the sender's hand-over to the
transport (aioquic's packetization, encryption and pacing for QUIC; a send() for TCP), the
kernel, and the receiver's read (aioquic's decryption and stream reassembly). Printed per
transport: packets sent/received, delay p50/p99/max, and CPU time per packet at each end.

Timings depend on the machine and on what else runs on it; say so when quoting them. The
metrics subtract nothing: these microseconds are in every QUIC run's delays.

    .venv/bin/python benchmarks/quic_loopback_delay.py [--duration-s 10] [--profile video] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import tempfile

import numpy as np

from tcpdelay.records import read_records
from tcpdelay.traffic import build_source
from tcpdelay.transport import ReceiverConfig, RunParams, SenderConfig, run_receiver, run_sender

TRANSPORTS = ("tcp", "quic-stream", "quic-frame-streams", "quic-datagram")


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _receiver_proc(out_dir: str, port_q, result_q) -> None:
    cpu0 = _cpu_s()
    r = run_receiver(ReceiverConfig(listen_host="127.0.0.1", listen_port=0, out_dir=out_dir, idle_timeout_s=10),
                     on_ready=lambda a: port_q.put(a[1]))[0]
    result_q.put({"cpu_s": _cpu_s() - cpu0, "status": r.status, "received_packets": r.received_packets})


def measure(transport: str, profile: str, duration_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="quic-bench-") as d:
        ctx = mp.get_context("spawn")
        port_q, result_q = ctx.Queue(), ctx.Queue()
        rx = ctx.Process(target=_receiver_proc, args=(f"{d}/rx", port_q, result_q))
        rx.start()
        port = port_q.get(timeout=30)
        cpu0 = _cpu_s()
        res = run_sender(SenderConfig("127.0.0.1", port, run=RunParams(transport=transport, duration_s=duration_s),
                                      out_dir=f"{d}/tx"), build_source(profile))
        tx_cpu = _cpu_s() - cpu0
        rr = result_q.get(timeout=60)
        rx.join(30)
        t = read_records(f"{d}/rx", "received")
        delay = t.column("recv_time_s").to_numpy() - t.column("send_time_s").to_numpy()
    n = max(1, res.packets)
    return {"transport": transport, "status": res.status, "receiver_status": rr["status"],
            "packets": res.packets, "received_packets": rr["received_packets"],
            "delay_p50_s": float(np.percentile(delay, 50)) if len(delay) else None,
            "delay_p99_s": float(np.percentile(delay, 99)) if len(delay) else None,
            "delay_max_s": float(delay.max()) if len(delay) else None,
            "sender_cpu_per_packet_s": tx_cpu / n, "receiver_cpu_per_packet_s": rr["cpu_s"] / n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--profile", default="video")
    ap.add_argument("--transports", default=",".join(TRANSPORTS))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rows = [measure(t, a.profile, a.duration_s) for t in a.transports.split(",")]
    if a.json:
        json.dump({"profile": a.profile, "duration_s": a.duration_s, "runs": rows}, sys.stdout, indent=2)
        print()
        return 0
    print(f"{a.profile} over loopback, {a.duration_s:g} s per transport (one-way delay = what the endpoints add)")
    print(f"{'transport':20} {'sent':>6} {'recv':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'tx cpu/pkt us':>14} {'rx cpu/pkt us':>14}")
    for r in rows:
        f = (lambda v: f"{v * 1e3:8.3f}" if v is not None else f"{'-':>8}")
        print(f"{r['transport']:20} {r['packets']:6d} {r['received_packets']:6d} {f(r['delay_p50_s'])} "
              f"{f(r['delay_p99_s'])} {f(r['delay_max_s'])} {r['sender_cpu_per_packet_s'] * 1e6:14.0f} "
              f"{r['receiver_cpu_per_packet_s'] * 1e6:14.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

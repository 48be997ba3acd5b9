"""CPU per media packet of the native endpoint (docs/native-endpoint.md), without the testbed:
N UDP (or TCP) VoIP-like flows (160-byte RTP packets every 20 ms) over loopback, every sender in
one ``tcpdelay-endpoint`` and every receiver in another, their control exchanges in this
process's threads, as a group's are.

    .venv/bin/python benchmarks/native_endpoint_cpu.py [--flows 80] [--duration-s 20] [--transport udp]

Prints the CPU (user + system) each side's endpoint used over the run, per packet, the CPU of
this process (the Python side: control, schedules, records' conversion), and the senders'
lateness and the receivers' read lag (p99 of the flows' p99s). Loopback has no emulator: the
numbers are the endpoints' own cost. Times vary with the machine's load: report it.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path


def cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=80)
    ap.add_argument("--duration-s", type=float, default=20.0)
    ap.add_argument("--transport", choices=("udp", "tcp"), default="udp")
    ap.add_argument("--port", type=int, default=43000)
    args = ap.parse_args()
    from tcpdelay.native.engine import NativeEngine
    from tcpdelay.native.receiver import run_native_receiver
    from tcpdelay.native.sender import run_native_sender
    from tcpdelay.traffic.cbr import CbrSource
    from tcpdelay.transport import ReceiverConfig, RunParams, SenderConfig

    tx_engine, rx_engine = NativeEngine(), NativeEngine()
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        def rx(i):
            cfg = ReceiverConfig(listen_host="127.0.0.1", listen_port=args.port + i, out_dir=f"{tmp}/{i}/rx",
                                 runs=1, idle_timeout_s=60.0)
            out[f"rx{i}"] = run_native_receiver(cfg, rx_engine)[0]

        def tx(i, start):
            cfg = SenderConfig(to_host="127.0.0.1", to_port=args.port + i, out_dir=f"{tmp}/{i}/tx", run_id=f"f{i}",
                               run=RunParams(transport=args.transport, duration_s=args.duration_s, flow_id=i),
                               keepalive=False, tcp_state_period_s=0.0)
            out[f"tx{i}"] = run_native_sender(cfg, CbrSource(160, 0.02), tx_engine, start_at=start)

        threads = [threading.Thread(target=rx, args=(i,)) for i in range(args.flows)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        before = {"tx": cpu_s(tx_engine.pid), "rx": cpu_s(rx_engine.pid)}
        me0 = resource.getrusage(resource.RUSAGE_SELF)
        start = time.monotonic() + 1.0 + 0.01 * args.flows
        senders = [threading.Thread(target=tx, args=(i, start + 0.02 * i / args.flows)) for i in range(args.flows)]
        for t in senders:
            t.start()
        for t in senders + threads:
            t.join()
        after = {"tx": cpu_s(tx_engine.pid), "rx": cpu_s(rx_engine.pid)}
        me1 = resource.getrusage(resource.RUSAGE_SELF)
        tx_engine.close()
        rx_engine.close()
    packets = sum(out[f"tx{i}"]["packets"] for i in range(args.flows))
    received = sum(out[f"rx{i}"]["received_packets"] for i in range(args.flows))
    py = (me1.ru_utime + me1.ru_stime) - (me0.ru_utime + me0.ru_stime)
    p99 = lambda key, side: max((out[f"{side}{i}"][key]["p99"] or 0) for i in range(args.flows))  # noqa: E731
    print(f"load average before/after: {os.getloadavg()}")
    print(f"{args.flows} {args.transport} flows, {args.duration_s:g} s: {packets} packets sent, {received} received")
    for side in ("tx", "rx"):
        used = after[side] - before[side]
        print(f"  {side} endpoint: {used:.2f} CPU-s, {1e6 * used / max(1, packets):.1f} us/packet, "
              f"{used / args.duration_s:.3f} cores")
    print(f"  python (control, schedules, conversion; this process): {py:.2f} CPU-s, "
          f"{1e6 * py / max(1, packets):.1f} us/packet")
    print(f"  worst flow's send lateness p99 {p99('send_lateness_us', 'tx'):.0f} us, "
          f"read lag p99 {p99('recv_lag_us', 'rx'):.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Can the receiver keep up with 100 Mb/s of 1448-byte packets on loopback while timestamping each?

Three measurements, printed as a table (``--json`` for one JSON object):

1. paced — ``run_sender`` sends the "video" profile's packets (1448 bytes on the wire over TCP:
   a 1446-byte RTP packet plus the 2-byte RFC 4571 length) at ``--rate-bps`` (default 100 Mb/s,
   8633 packets/s) for ``--duration-s`` to ``run_receiver`` in another process, which
   timestamps and records every packet (Parquet). Reported: packets sent and received, the
   received rate, the loopback delay (p50, p99, max, and the median over the first and the
   last fifth of the run: a receiver that falls behind shows a growing delay), and the
   receiver's CPU time per packet.
2. flood — the same receiver fed as fast as one TCP connection on loopback carries
   pre-encoded packets: the most packets per second it records (its headroom over 1.).
3. timestamp overhead — what taking a packet's timestamp costs (one CLOCK_MONOTONIC read) and
   what recording it costs (RecordWriter.append, Parquet flushes amortized), per packet and as
   a share of the receiver's CPU time per packet in 1.

Timings depend on the machine and on what else runs on it; say so when quoting them.

    .venv/bin/python benchmarks/receiver_rate.py [--rate-bps 100e6] [--duration-s 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import socket
import sys
import tempfile
import time

import numpy as np

from tcpdelay.records import RecordWriter, read_records
from tcpdelay.traffic import CbrSource
from tcpdelay.transport import ReceiverConfig, RunParams, SenderConfig, run_receiver, run_sender
from tcpdelay.transport import control, framing

WIRE_BYTES = 1448
RTP_BYTES = WIRE_BYTES - 2


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _receiver_proc(out_dir: str, port_q, result_q) -> None:
    cpu0 = _cpu_s()
    results = run_receiver(ReceiverConfig(listen_host="127.0.0.1", listen_port=0, out_dir=out_dir,
                                          idle_timeout_s=10),
                           on_ready=lambda a: port_q.put(a[1]))
    r = results[0]
    result_q.put({"cpu_s": _cpu_s() - cpu0, "received_packets": r.received_packets,
                  "first_s": r.first_recv_time_s, "last_s": r.last_recv_time_s, "status": r.status,
                  "elapsed_s": r.elapsed_s})


def _start_receiver(out_dir: str):
    ctx = mp.get_context("fork")
    port_q, result_q = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_receiver_proc, args=(out_dir, port_q, result_q), daemon=True)
    proc.start()
    return proc, port_q.get(timeout=10), result_q


def paced(rate_bps: float, duration_s: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        proc, port, result_q = _start_receiver(d)
        interval = WIRE_BYTES * 8 / rate_bps
        src = CbrSource(RTP_BYTES, interval, name="video-100M")
        res = run_sender(SenderConfig("127.0.0.1", port, run=RunParams(duration_s=duration_s)), src)
        rx = result_q.get(timeout=60)
        proc.join(10)
        t = read_records(d, "received")
        send = t.column("send_time_s").to_numpy()
        delay = t.column("recv_time_s").to_numpy() - send
        order = np.argsort(send)
        fifth = max(1, len(order) // 5)
        first_p50 = float(np.median(delay[order[:fifth]]))
        last_p50 = float(np.median(delay[order[-fifth:]]))
    span = (rx["last_s"] - rx["first_s"]) or float("nan")
    return {
        "rate_bps_asked": rate_bps, "packets_per_s_asked": rate_bps / (WIRE_BYTES * 8),
        "sent_packets": res.packets, "received_packets": rx["received_packets"],
        "received_packets_per_s": rx["received_packets"] / span,
        "received_rate_bps": rx["received_packets"] * WIRE_BYTES * 8 / span,
        "delay_p50_s": float(np.percentile(delay, 50)), "delay_p99_s": float(np.percentile(delay, 99)),
        "delay_max_s": float(delay.max()),
        "delay_p50_first_fifth_s": first_p50, "delay_p50_last_fifth_s": last_p50,
        "receiver_cpu_s": rx["cpu_s"], "receiver_cpu_per_packet_s": rx["cpu_s"] / max(1, rx["received_packets"]),
        "status": res.status,
    }


def flood(duration_s: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        proc, port, result_q = _start_receiver(d)
        ctl = socket.create_connection(("127.0.0.1", port))
        control.send(ctl, {"type": "hello", "protocol": control.PROTOCOL, "version": control.VERSION,
                           "run_id": "flood", "params": RunParams(duration_s=duration_s).to_dict()},
                     pad_to=control.REQUEST_PAD_BYTES)
        accept, _ = control.recv(ctl, 5)
        data = socket.create_connection(("127.0.0.1", port))
        data.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data.sendall(control.encode({"type": "data", "token": accept["token"], "connection": 0}))
        template = bytearray(framing.frame(framing.encode_media(
            flow_id=0, rtp_seq=0, rtp_timestamp=0, marker=True, seq=0, send_time_ns=0,
            size_bytes=RTP_BYTES)))
        batch = 512
        seq = 0
        t_end = time.monotonic() + duration_s
        while time.monotonic() < t_end:
            buf = bytearray(template * batch)
            now = time.monotonic_ns()
            for k in range(batch):   # patch media seq, send time and the header check into each copy
                off = k * WIRE_BYTES + 2 + framing.RTP_HEADER_BYTES
                buf[off:off + 16] = (seq + k).to_bytes(8, "big") + now.to_bytes(8, "big")
                rtp = k * WIRE_BYTES + 2
                buf[rtp + 30:rtp + 32] = framing.header_check(RTP_BYTES, buf[rtp:rtp + 30]).to_bytes(2, "big")
            data.sendall(buf)
            seq += batch
        data.close()
        control.send(ctl, {"type": "end"}, pad_to=control.REQUEST_PAD_BYTES)
        control.recv(ctl, 30)
        ctl.close()
        rx = result_q.get(timeout=60)
        proc.join(10)
    span = (rx["last_s"] - rx["first_s"]) or float("nan")
    return {"sent_packets": seq, "received_packets": rx["received_packets"],
            "received_packets_per_s": rx["received_packets"] / span,
            "received_rate_bps": rx["received_packets"] * WIRE_BYTES * 8 / span,
            "receiver_cpu_per_packet_s": rx["cpu_s"] / max(1, rx["received_packets"])}


def timestamp_overhead(n: int = 200_000) -> dict:
    clock = time.monotonic_ns
    t0 = time.perf_counter()
    for _ in range(n):
        clock()
    clock_s = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        pass
    loop_s = (time.perf_counter() - t0) / n
    with tempfile.TemporaryDirectory() as d:
        w = RecordWriter(d, "received", writer_id="bench")
        t0 = time.perf_counter()
        for i in range(n):
            w.append(flow_id=0, connection=0, seq=i, size_bytes=RTP_BYTES, send_time_s=1.0,
                     recv_time_s=1.001)
        w.close()
        record_s = (time.perf_counter() - t0) / n
    return {"clock_read_s": max(0.0, clock_s - loop_s), "record_append_s": record_s}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate-bps", type=float, default=100e6)
    ap.add_argument("--duration-s", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    out = {"cpus": os.cpu_count(), "loadavg_1min": os.getloadavg()[0],
           "paced": paced(a.rate_bps, a.duration_s), "flood": flood(a.duration_s),
           "timestamp": timestamp_overhead()}
    ts = out["timestamp"]
    per_pkt = out["paced"]["receiver_cpu_per_packet_s"]
    ts["share_of_receiver_cpu"] = (ts["clock_read_s"] + ts["record_append_s"]) / per_pkt
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    p, f = out["paced"], out["flood"]
    grew = p["delay_p50_last_fifth_s"] - p["delay_p50_first_fifth_s"]
    verdict = "keeps up: no growing backlog" if grew < 1e-3 else f"FALLS BEHIND: +{grew * 1e3:.1f} ms"
    rows = [
        ("machine", f"{out['cpus']} CPUs, load average {out['loadavg_1min']:.2f} (shared machine: noisy)"),
        ("paced: asked", f"{p['rate_bps_asked'] / 1e6:.1f} Mb/s = {p['packets_per_s_asked']:.0f} packets/s of {WIRE_BYTES} B"),
        ("paced: sent / received", f"{p['sent_packets']} / {p['received_packets']} ({p['status']})"),
        ("paced: received", f"{p['received_packets_per_s']:.0f} packets/s = {p['received_rate_bps'] / 1e6:.1f} Mb/s"),
        ("paced: delay p50 / p99 / max", f"{p['delay_p50_s'] * 1e3:.2f} / {p['delay_p99_s'] * 1e3:.2f} / {p['delay_max_s'] * 1e3:.2f} ms"),
        ("paced: delay p50, first / last fifth", f"{p['delay_p50_first_fifth_s'] * 1e3:.2f} / {p['delay_p50_last_fifth_s'] * 1e3:.2f} ms ({verdict})"),
        ("paced: receiver CPU per packet", f"{p['receiver_cpu_per_packet_s'] * 1e6:.1f} µs"),
        ("flood: received", f"{f['received_packets_per_s']:.0f} packets/s = {f['received_rate_bps'] / 1e6:.0f} Mb/s ({f['received_packets']} of {f['sent_packets']})"),
        ("flood: receiver CPU per packet", f"{f['receiver_cpu_per_packet_s'] * 1e6:.1f} µs"),
        ("timestamp: clock read", f"{ts['clock_read_s'] * 1e9:.0f} ns per packet"),
        ("timestamp: record append", f"{ts['record_append_s'] * 1e6:.2f} µs per packet (Parquet flushes included)"),
        ("timestamp: share of receiver CPU", f"{ts['share_of_receiver_cpu'] * 100:.1f} %"),
    ]
    w = max(len(k) for k, _ in rows)
    print("receiver_rate: the media receiver on loopback")
    for k, v in rows:
        print(f"  {k:<{w}}  {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

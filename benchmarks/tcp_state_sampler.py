"""What sampling the TCP state of 80 flows every 10 ms costs (docs/metrics.md, "TCP state over time").

Opens ``--flows`` TCP connections over loopback, keeps data moving on them (a trickle written
each period, read by the peer, so the kernel's estimators are live), and runs a
:class:`~tcpdelay.transport.tcp_state_sampler.TcpStateSampler` every ``--period-s`` for
``--duration-s`` into a :class:`~tcpdelay.records.RecordWriter` (Parquet parts flushed as in a
run). Printed: rows written, the CPU time spent in sampling (getsockopt(TCP_INFO) per
connection, parsing, appending, the Parquet flushes amortized) per connection sample and per
period, and as a share of one core — the cost a sender's loop carries for its flows. The
traffic's own cost is left out (it is timed separately and not counted).

With ``--cc VARIANT`` (a tcpdelay BPF congestion control, e.g. ``ccp``; root) the client sockets
run it and every sample also reads the four values it publishes from its ``tdcc_state`` map (one
``bpf(BPF_MAP_LOOKUP_ELEM)`` per connection): the cost with the variant's own state.

Timings depend on the machine and on what else runs on it; say so when quoting them.

    .venv/bin/python benchmarks/tcp_state_sampler.py [--flows 80] [--period-s 0.01] [--duration-s 5] [--cc VARIANT] [--json]
"""

from __future__ import annotations

import argparse
import json
import socket
import tempfile
import time

from tcpdelay.records import read_records, RecordWriter
from tcpdelay.transport.cc_state import CcStateMap
from tcpdelay.transport.tcp_state_sampler import TcpStateSampler


def _pairs(n: int, congestion_control: str | None) -> list[tuple[socket.socket, socket.socket]]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(n)
    out = []
    for _ in range(n):
        c = socket.socket()
        if congestion_control:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, congestion_control.encode())
        c.connect(srv.getsockname())
        s, _ = srv.accept()
        c.setblocking(False)
        s.setblocking(False)
        out.append((c, s))
    srv.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=80)
    ap.add_argument("--period-s", type=float, default=0.01)
    ap.add_argument("--duration-s", type=float, default=5.0)
    ap.add_argument("--cc", default=None, help="a tcpdelay BPF congestion control to run and read the state of")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    loaded = None
    if a.cc:
        from tcpdelay.testbed import bpf_cc, congestion
        alg = congestion.resolve(a.cc, available=())
        loaded = bpf_cc.load(alg.bpf_object, alg.kernel_name[:13] + "_b", alg.values)
    try:
        _run(a, loaded)
    finally:
        if loaded is not None:
            loaded.close()


def _run(a, loaded) -> None:
    pairs = _pairs(a.flows, loaded.kernel_name if loaded else None)
    cc_map = CcStateMap(loaded.state_map_id) if loaded is not None and loaded.state_map_id else None
    chunk = b"x" * 1448
    with tempfile.TemporaryDirectory() as tmp:
        writer = RecordWriter(tmp, "tcp_state", writer_id="bench")
        sampler = TcpStateSampler(writer, a.period_s, cc_map)
        socks = [(i, 0, c) for i, (c, _) in enumerate(pairs)]
        cpu_sampling = 0.0
        periods = 0
        start = time.monotonic()
        while time.monotonic() - start < a.duration_s:
            for c, s in pairs:               # traffic: not counted
                try:
                    c.send(chunk)
                    s.recv(65536)
                except BlockingIOError:
                    pass
            now = time.monotonic_ns()
            if now >= sampler.due_ns():
                t = time.thread_time()
                sampler.sample(socks, now)
                cpu_sampling += time.thread_time() - t
                periods += 1
            time.sleep(max(0.0, (sampler.due_ns() - time.monotonic_ns()) / 1e9))
        t = time.thread_time()
        writer.close()
        cpu_sampling += time.thread_time() - t
        wall = time.monotonic() - start
        rows = read_records(tmp, "tcp_state").num_rows
    for c, s in pairs:
        c.close()
        s.close()
    if cc_map is not None:
        cc_map.close()
    out = {"flows": a.flows, "period_s": a.period_s, "congestion_control": a.cc, "wall_s": round(wall, 3), "periods": periods,
           "rows": rows, "cpu_sampling_s": round(cpu_sampling, 4),
           "us_per_connection_sample": round(cpu_sampling / max(1, rows) * 1e6, 2),
           "ms_per_period": round(cpu_sampling / max(1, periods) * 1e3, 3),
           "cpu_share_of_one_core": round(cpu_sampling / wall, 4)}
    if a.json:
        print(json.dumps(out))
        return
    print(f"TCP state sampling: {a.flows} flows every {a.period_s * 1e3:g} ms for {wall:.2f} s "
          f"({periods} periods, {rows} rows)" + (f", {a.cc}'s own state read from its BPF map" if a.cc else ""))
    print(f"  CPU per connection sample : {out['us_per_connection_sample']:.2f} µs "
          "(getsockopt TCP_INFO, parse, append, Parquet flush amortized)")
    print(f"  CPU per period            : {out['ms_per_period']:.3f} ms")
    print(f"  CPU share of one core     : {out['cpu_share_of_one_core'] * 100:.2f} %")


if __name__ == "__main__":
    main()

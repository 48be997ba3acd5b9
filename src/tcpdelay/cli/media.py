"""``tcpdelay send`` and ``tcpdelay recv``: a media flow over real sockets (docs/transport.md).

Both ends write per-packet records (Parquet) as the run goes; an interrupted or cut-off run
keeps what it measured. Exit status: 0 when the run completed, 1 when it ended otherwise (the
result, with its ``status``, is still printed) or could not start because the receiver was
unreachable, silent or refused the run (one line on stderr), 2 on bad input.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from pathlib import Path

import click
import numpy as np

from tcpdelay.cli.common import POSITIVE, emit, fmt_s, json_option, key_value_table
from tcpdelay.errors import ParameterError
from tcpdelay.profiles import DELAY_MODEL_PROFILES

TRANSPORT_CHOICE = click.Choice(["tcp", "udp", "quic-stream", "quic-frame-streams", "quic-datagram"])


@contextlib.contextmanager
def _stop_on_sigterm():
    """SIGTERM ends the run like SIGINT does: cleanly, keeping the records."""
    stop = threading.Event()
    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        yield stop
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def _progress(enabled: bool, what: str, total_s: float):
    """A rich progress bar on stderr when it is a terminal; yields an on_progress callback."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.fields[info]}"), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task(what, total=total_s, info="")

        def update(p: dict) -> None:
            info = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in p.items()
                             if k.endswith("packets") or k.endswith("bytes"))
            prog.update(task, completed=min(total_s, p["elapsed_s"]), total=p.get("duration_s", total_s),
                        info=info)

        yield update


def delay_summary(run_dir: str | Path, clock_kind: str) -> dict:
    """Delay statistics of the "received" records of a run directory.

    With an unsynchronized clock the delays are relative to the run's minimum (the offset of the
    two clocks is unknown), and ``delay_reference`` says so."""
    from tcpdelay.records import read_records

    table = read_records(run_dir, "received")
    out = {"delay_reference": "one-way" if clock_kind == "shared-monotonic" else "relative-to-minimum",
           "packets": table.num_rows}
    if table.num_rows == 0:
        return out
    d = table.column("recv_time_s").to_numpy() - table.column("send_time_s").to_numpy()
    if out["delay_reference"] != "one-way":
        d = d - d.min()
    out.update(delay_min_s=float(d.min()), delay_mean_s=float(d.mean()),
               delay_p50_s=float(np.percentile(d, 50)), delay_p95_s=float(np.percentile(d, 95)),
               delay_p99_s=float(np.percentile(d, 99)), delay_max_s=float(d.max()))
    return out


def _source(profile: str, silences: bool, mpeg4_rate_bps: float | None, video_trace: str | None,
            fps: float | None):
    """The flags as a profile of :mod:`tcpdelay.profiles` (--mpeg4-rate-bps: mpeg4-tes,
    --video-trace: video-trace, else --profile), built by :func:`tcpdelay.traffic.build_source`."""
    from tcpdelay.traffic import build_source

    if mpeg4_rate_bps is not None and video_trace is not None:
        raise ParameterError("choose one of --mpeg4-rate-bps and --video-trace")
    if mpeg4_rate_bps is not None:
        return build_source("mpeg4-tes", rate_bps=mpeg4_rate_bps, fps=fps)
    if video_trace is not None:
        return build_source("video-trace", trace=video_trace, fps=fps)
    return build_source(profile, on_off=silences)


@click.command("send")
@click.option("--to", "to", required=True, metavar="HOST:PORT", help="The receiver (tcpdelay recv --listen).")
@click.option("--profile", default="voip", show_default=True,
              type=click.Choice(list(DELAY_MODEL_PROFILES)),
              help="CBR profile of the delay model (packet size and interval).")
@click.option("--silences", is_flag=True, help="VoIP talk spurts and silences (exponential on/off, 1.0 s / 1.35 s).")
@click.option("--mpeg4-rate-bps", type=POSITIVE, default=None, help="MPEG-4 TES video of this mean rate instead of a profile.")
@click.option("--video-trace", type=click.Path(exists=True, dir_okay=False), default=None,
              help="VBR video from a frame-size trace file instead of a profile.")
@click.option("--fps", type=POSITIVE, default=None, help="Frame rate of the video sources.")
@click.option("--transport", type=TRANSPORT_CHOICE, default="tcp", show_default=True)
@click.option("--duration-s", type=POSITIVE, default=60.0, show_default=True)
@click.option("--connections", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Parallel TCP connections (Brosh et al. §7.2).")
@click.option("--scheduler", type=click.Choice(["blind", "intelligent"]), default="blind", show_default=True,
              help="blind = round robin; intelligent = least unsent data, not in recovery/timeout.")
@click.option("--split", type=click.IntRange(1, 255), default=1, show_default=True,
              help="split-N: each packet as N smaller RTP packets (Brosh et al. §7.1).")
@click.option("--delivery", type=click.Choice(["read", "in-order"]), default="read", show_default=True,
              help="What the receiver records: read time, or in-order delivery across connections.")
@click.option("--proactive-drop-delay-s", type=POSITIVE, default=None,
              help="Skip a packet when the unsent backlog implies a delay above this (TCP).")
@click.option("--keepalive/--no-keepalive", default=False, show_default=True,
              help="3 small packets per RTT during silences (Brosh et al. §8.2).")
@click.option("--nagle", is_flag=True, help="Leave Nagle's algorithm on (TCP_NODELAY off) to measure its cost.")
@click.option("--congestion", default=None,
              help="TCP_CONGESTION of every media connection (reno, cubic, bbr, ...); QUIC: newreno "
                   "(default) or cubic (aioquic has no BBR).")
@click.option("--quic-deadline-s", type=POSITIVE, default=None,
              help="quic-frame-streams: reset a frame's stream not acknowledged this long after it opened; "
                   "quic-datagram: drop a DATAGRAM frame still queued this long after its packet was written.")
@click.option("--quic-streams-per", type=click.Choice(["frame", "gop"]), default="frame", show_default=True,
              help="quic-frame-streams: a stream per frame, or per group of pictures (from each I frame).")
@click.option("--quic-max-datagram-bytes", type=click.IntRange(1200, 65527), default=1200, show_default=True,
              help="QUIC: the largest UDP payload sent (aioquic does no path MTU discovery).")
@click.option("--notsent-lowat-bytes", type=click.IntRange(1, 2**31 - 1), default=None)
@click.option("--sndbuf-bytes", type=click.IntRange(1, 2**31 - 1), default=None)
@click.option("--rcvbuf-bytes", type=click.IntRange(1, 2**31 - 1), default=None)
@click.option("--flow-id", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True, help="RTP SSRC.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True)
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Run directory for the 'sent' records and run.json [default: results/<run id>].")
@click.option("--run-id", default=None, help="Name of the run [default: UTC time + random].")
@click.option("--connect-timeout-s", type=POSITIVE, default=5.0, show_default=True)
@click.option("--drain-timeout-s", type=POSITIVE, default=10.0, show_default=True)
@click.option("--max-queue-bytes", type=click.IntRange(65536, 2**40), default=64 * 2**20, show_default=True,
              help="Bound of each connection's application queue; packets beyond it are skipped.")
@click.option("--tcp-state-period-s", type=click.FloatRange(0, 60), default=0.01, show_default=True,
              help="Sample every TCP connection's TCP_INFO this often into the 'tcp_state' records (0 = off).")
@click.option("--cc-state-map-id", type=click.IntRange(1), default=None,
              help="Id of the tdcc_state map of the tcpdelay BPF congestion control in use: its "
                   "four published values are sampled too (needs CAP_BPF).")
@json_option
def send_cmd(to, profile, silences, mpeg4_rate_bps, video_trace, fps, transport, duration_s,
             connections, scheduler, split, delivery, proactive_drop_delay_s, keepalive, nagle,
             congestion, quic_deadline_s, quic_streams_per, quic_max_datagram_bytes,
             notsent_lowat_bytes, sndbuf_bytes, rcvbuf_bytes, flow_id, seed, out,
             run_id, connect_timeout_s, drain_timeout_s, max_queue_bytes, tcp_state_period_s,
             cc_state_map_id, as_json):
    """Send a media flow to a `tcpdelay recv` over TCP (RFC 4571), UDP (RTP) or QUIC."""
    from tcpdelay.transport import (RunParams, SenderConfig, SenderError, TcpOptions, parse_host_port,
                                    run_sender)
    import secrets

    from tcpdelay.transport.quic_config import QuicOptions, is_quic

    host, port = parse_host_port("--to", to)
    quic = QuicOptions(congestion=congestion or "newreno", deadline_s=quic_deadline_s,
                       streams_per=quic_streams_per, max_datagram_bytes=quic_max_datagram_bytes) \
        if is_quic(transport) else QuicOptions()
    if is_quic(transport):
        congestion = None       # QUIC's congestion control is the QUIC library's, not the kernel's
    elif quic_deadline_s is not None or quic_streams_per != "frame" or quic_max_datagram_bytes != 1200:
        raise ParameterError("--quic-deadline-s, --quic-streams-per and --quic-max-datagram-bytes "
                             "need a quic-* --transport")
    source = _source(profile, silences, mpeg4_rate_bps, video_trace, fps)
    run_id = run_id or f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"
    cfg = SenderConfig(
        host, port,
        run=RunParams(transport=transport, connections=connections, split=split,
                      duration_s=duration_s, flow_id=flow_id, delivery=delivery,
                      source=source.name[:64]),
        scheduler=scheduler,
        tcp=TcpOptions(nodelay=not nagle, congestion=congestion,
                       notsent_lowat_bytes=notsent_lowat_bytes, sndbuf_bytes=sndbuf_bytes,
                       rcvbuf_bytes=rcvbuf_bytes),
        proactive_drop_delay_s=proactive_drop_delay_s, keepalive=keepalive, seed=seed,
        out_dir=out or str(Path("results") / run_id), run_id=run_id,
        connect_timeout_s=connect_timeout_s, drain_timeout_s=drain_timeout_s,
        max_queue_bytes=max_queue_bytes, tcp_state_period_s=tcp_state_period_s,
        cc_state_map_id=cc_state_map_id, quic=quic)
    try:
        with _stop_on_sigterm() as stop, _progress(not as_json, f"send {run_id}", duration_s) as prog:
            res = run_sender(cfg, source, stop=stop, on_progress=prog)
    except SenderError as err:      # the input was fine; the receiver was not there for it
        click.echo(f"tcpdelay send: {err}", err=True)
        sys.exit(1)
    doc = res.to_dict()

    def human(console):
        rcv = res.receiver or {}
        rows = [("status", res.status), ("run directory", str(res.run_dir)),
                ("clock", res.clock), ("source", res.source),
                ("transport", f"{res.transport}, {res.connections} connection(s), {res.scheduler}, split-{res.split}"),
                ("packets", str(res.packets)), ("dropped (proactive)", str(res.dropped_packets)),
                ("dropped (queue full)", str(res.queue_full_packets)),
                ("keep-alives", str(res.keepalive_packets)),
                ("received (receiver)", str(rcv.get("received_packets", "—"))),
                ("elapsed", fmt_s(res.elapsed_s))]
        if res.error:
            rows.append(("error", res.error))
        console.print(key_value_table(f"tcpdelay send → {to}", rows))

    emit(doc, as_json, human)
    if res.status != "completed":
        sys.exit(1)


@click.command("recv")
@click.option("--listen", required=True, metavar="HOST:PORT",
              help="Address to listen on: TCP (control and media) and UDP (UDP and QUIC media), same port.")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Run directory (with --runs 1), else one sub-directory per run [default: results/<run id>].")
@click.option("--runs", type=click.IntRange(0), default=1, show_default=True, help="Runs to serve; 0 = until interrupted.")
@click.option("--idle-timeout-s", type=POSITIVE, default=10.0, show_default=True,
              help="End a run when the sender is silent this long.")
@click.option("--handshake-timeout-s", type=POSITIVE, default=5.0, show_default=True,
              help="Time an accepted connection has to send its first control message.")
@click.option("--max-pending", type=click.IntRange(1, 4096), default=128, show_default=True,
              help="Connections awaiting their first control message held at once; more close the oldest.")
@click.option("--udp-linger-s", type=POSITIVE, default=1.0, show_default=True,
              help="After the sender's end, how long UDP packets in flight are awaited.")
@click.option("--rcvbuf-bytes", type=click.IntRange(1, 2**31 - 1), default=None,
              help="SO_RCVBUF of the media sockets [default: the kernel's autotuning].")
@click.option("--max-run-duration-s", type=click.FloatRange(0, 86400, min_open=True), default=3600.0,
              show_default=True, help="Refuse a run that asks for longer (docs/transport.md, Security).")
@click.option("--max-runs-per-peer-per-minute", type=click.IntRange(1, 10**6), default=30, show_default=True,
              help="Runs accepted from one address in any minute; more are refused.")
@click.option("--max-run-bytes", type=click.IntRange(1, 2**50), default=32 * 2**30, show_default=True,
              help="Bytes a run may send; past them it ends as over-limit.")
@click.option("--max-run-packets", type=click.IntRange(1, 2**40), default=20_000_000, show_default=True,
              help="RTP packets a run may send; past them it ends as over-limit.")
@click.option("--max-control-messages", type=click.IntRange(1, 10**6), default=64, show_default=True,
              help="Control messages a run may send after its hello; past them it ends as over-limit.")
@click.option("--max-errors-kept", type=click.IntRange(1, 10**6), default=100, show_default=True,
              help="Error lines kept per run; later ones are only counted.")
@click.option("--quic-window-bytes", type=click.IntRange(65536, 2**30), default=8 * 2**20, show_default=True,
              help="QUIC flow-control window per connection and per stream, fixed (memory per QUIC run).")
@click.option("--min-free-disk-bytes", type=click.IntRange(0, 2**50), default=2**30, show_default=True,
              help="Refuse (or end) a run when the output folder's disk has less free.")
@json_option
def recv_cmd(listen, out, runs, idle_timeout_s, handshake_timeout_s, max_pending, udp_linger_s, rcvbuf_bytes,
             max_run_duration_s, max_runs_per_peer_per_minute, max_run_bytes, max_run_packets,
             max_control_messages, max_errors_kept, quic_window_bytes, min_free_disk_bytes, as_json):
    """Receive media flows from `tcpdelay send` and record every packet."""
    from tcpdelay.transport import ReceiverConfig, TcpOptions, parse_host_port, run_receiver

    host, port = parse_host_port("--listen", listen)
    cfg = ReceiverConfig(listen_host=host, listen_port=port,
                         out_dir=out if out is not None else "results",
                         per_run_dirs=True if out is None else None, runs=runs,
                         idle_timeout_s=idle_timeout_s, handshake_timeout_s=handshake_timeout_s,
                         max_pending=max_pending, udp_linger_s=udp_linger_s,
                         tcp=TcpOptions(rcvbuf_bytes=rcvbuf_bytes),
                         max_run_duration_s=max_run_duration_s,
                         max_runs_per_peer_per_minute=max_runs_per_peer_per_minute,
                         max_run_bytes=max_run_bytes, max_run_packets=max_run_packets,
                         max_control_messages=max_control_messages, max_errors_kept=max_errors_kept,
                         quic_window_bytes=quic_window_bytes, min_free_disk_bytes=min_free_disk_bytes)

    def ready(addr):   # on stderr even with --json: scripts can wait for this line
        click.echo(f"tcpdelay recv: listening on {addr[0]}:{addr[1]} (TCP and UDP)", err=True)

    with _stop_on_sigterm() as stop, _progress(not as_json, "recv", 1.0) as prog:
        results = run_receiver(cfg, stop=stop, on_ready=ready, on_progress=prog,
                               on_notice=lambda text: click.echo(f"tcpdelay recv: {text}", err=True))
    docs = []
    for r in results:
        d = r.to_dict()
        if r.run_dir:
            d["delay"] = delay_summary(r.run_dir, r.clock)
        docs.append(d)
    doc = {"listen": listen, "runs": docs}

    def human(console):
        if not docs:
            console.print("no run was served")
        for d in docs:
            dl = d.get("delay", {})
            rows = [("status", d["status"]), ("run directory", str(d["run_dir"])), ("peer", d["peer"]),
                    ("clock", d["clock"]), ("received packets", str(d["received_packets"])),
                    ("keep-alives", str(d["keepalive_packets"])),
                    ("incomplete (split)", str(d["incomplete_packets"]))]
            if dl.get("packets"):
                ref = "" if dl["delay_reference"] == "one-way" else " (relative to minimum)"
                rows += [(f"delay p50{ref}", fmt_s(dl["delay_p50_s"])),
                         (f"delay p95{ref}", fmt_s(dl["delay_p95_s"])),
                         (f"delay max{ref}", fmt_s(dl["delay_max_s"]))]
            if d.get("failure"):
                rows.append(("failed", d["failure"]))
            for e in d["errors"][:5]:
                rows.append(("error", e))
            console.print(key_value_table(f"tcpdelay recv: run {d['run_id']}", rows))

    emit(doc, as_json, human)
    if any(d["status"] != "completed" for d in docs) or (runs and len(docs) < runs):
        sys.exit(1)


COMMANDS = [send_cmd, recv_cmd]

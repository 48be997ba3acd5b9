"""``tcpdelay metrics``: every metric of a recorded run (delay, late fraction, jitter, loss,
the jitter filter and quality levels, RTPI, goodput and fairness, video discards and underflows,
E-model MOS; timed transfers, pulled streams, cross traffic, the bottleneck queue), from whatever
the run kept (:func:`tcpdelay.results.runs.summarize_run` says where each part came from)."""

from __future__ import annotations

import math

import click
from rich.table import Table

from tcpdelay.cli.common import NON_NEGATIVE, POSITIVE, DirPath, emit, fmt_bps, fmt_s, json_option
from tcpdelay.cli.testbed_warning import as_verdict, describe, warn
from tcpdelay.metrics import emodel
from tcpdelay.metrics.summary import DEFAULT_PLAYOUT_DELAYS_S, MetricOptions
from tcpdelay.results.runs import summarize_run


def _pct(x) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{100 * x:.2f} %"


def _int(x) -> str:
    return "—" if x is None else str(x)


def _name(f: dict) -> str:
    """A flow's or stream's name as the scenario gives it (as ``report`` shows it)."""
    return str(f.get("name") or f"flow{f.get('flow_id')}")


def _print(console, table: Table) -> None:
    """``table`` as it fits 80 columns: no side borders, numbers never wrapped or cut, a name
    folded rather than cut ("udpvoic…"), the title above it, broken between phrases."""
    from rich import box

    from tcpdelay.cli.text_layout import print_title

    table.box, table.pad_edge, table.show_edge, table.collapse_padding = box.SIMPLE_HEAD, False, False, True
    for c in table.columns:
        if c.justify == "right":
            c.no_wrap = True
        else:
            c.overflow = "fold"
    if table.title:
        print_title(console, str(table.title))
        table.title = None
    console.print(table)


def _packets_table(res: dict) -> Table:
    t = Table(title="Packets (dropped: by the sender, never sent; dups: received twice)", title_justify="left")
    for col in ("flow", "kind", "sent", "received", "lost", "loss rate", "dropped", "dups"):
        t.add_column(col, justify="left" if col in ("flow", "kind") else "right")
    for f in res["flows"]:
        p = f.get("packets") or {}
        t.add_row(_name(f), str(f.get("kind", "")), _int(p.get("packets", p.get("sent"))), _int(p.get("received")),
                  _int(p.get("lost")), _pct(p.get("loss_rate")), _int(p.get("dropped_by_sender")),
                  _int(p.get("duplicates")))
    return t


def _delay_table(res: dict) -> Table:
    rel = " (relative to the run's minimum: unsynchronized clocks)" \
        if res.get("delay_relative_to_min") else ""
    # the standard deviation is in --json (with eight columns the table no longer fits 80)
    t = Table(title=f"One-way delay and RFC 3550 jitter{rel}", title_justify="left")
    for col in ("flow", "mean", "p50", "p95", "p99", "max", "jitter"):
        t.add_column(col, justify="left" if col == "flow" else "right")
    for f in res["flows"]:
        d = f.get("delay") or {}
        t.add_row(_name(f), fmt_s(d.get("mean_s")), fmt_s(d.get("p50_s")), fmt_s(d.get("p95_s")),
                  fmt_s(d.get("p99_s")), fmt_s(d.get("max_s")), fmt_s(f.get("jitter_rfc3550_s")))
    return t


def _rate_table(res: dict) -> Table:
    thr = (res.get("options") or {}).get("rtpi_threshold_s")
    t = Table(title=f"Real-time performance (inter-arrival threshold {fmt_s(thr)}) and goodput",
              title_justify="left")
    for col in ("flow", "RTPI", "delayed pkts", "loss", "goodput", "TCP retrans"):
        t.add_column(col, justify="left" if col == "flow" else "right")
    for f in res["flows"]:
        r = f.get("rtpi") or {}
        t.add_row(_name(f), _pct(r.get("rtpi")), _pct(r.get("delayed_packets_rate")),
                  _pct(r.get("packet_loss_rate")), fmt_bps(f.get("goodput_bps")), _int(f.get("tcp_retransmissions")))
    return t


#: Flows per late-fraction table (two columns each: it fits 80 columns).
LATE_FLOWS_PER_TABLE = 3


def _late_tables(res: dict) -> list[Table]:
    """Late and missed fractions against the playout delay, :data:`LATE_FLOWS_PER_TABLE` flows
    a table."""
    flows = [f for f in res["flows"] if (f.get("late") or {}).get("late_fraction")]
    chunks = [flows[i:i + LATE_FLOWS_PER_TABLE] for i in range(0, len(flows), LATE_FLOWS_PER_TABLE)]
    out = []
    for k, chunk in enumerate(chunks):
        part = f" (flows {k * LATE_FLOWS_PER_TABLE + 1}–{k * LATE_FLOWS_PER_TABLE + len(chunk)} of {len(flows)})" \
            if len(chunks) > 1 else ""
        t = Table(title=f"Late (and missed) packets vs playout delay{part}", title_justify="left")
        t.add_column("playout\ndelay", justify="right")
        for f in chunk:   # the flow's name above "late" and "missed": three flows fit 80 columns
            t.add_column(f"{_name(f)}\nlate", justify="right")
            t.add_column(f"{_name(f)}\nmissed", justify="right")
        delays = chunk[0]["late"].get("playout_delay_s") or (res.get("options") or {}).get("playout_delays_s") or []
        for i, pd in enumerate(delays):
            row = [fmt_s(pd)]
            for f in chunk:
                late, miss = f["late"].get("late_fraction") or [], f["late"].get("miss_fraction") or []
                row += [_pct(late[i] if i < len(late) else None), _pct(miss[i] if i < len(miss) else None)]
            t.add_row(*row)
        out.append(t)
    return out


def _voice_table(flows: list[dict]) -> Table:
    jb = fmt_s(flows[0]["jitter_filter"].get("jitter_buffer_s"))
    codec = flows[0]["emodel"].get("codec_name") or flows[0]["emodel"].get("codec")
    t = Table(title=f"Voice: jitter filter (buffer {jb}); packets at quality levels 0–1 (of 0–5) and the "
                    f"worst level; E-model MOS ({codec}) at its best playout delay", title_justify="left")
    # two-line headers: with a 10-character flow name ("udpvoice#0") the table fits 80 columns
    for col in ("flow", "base\ndelay", "pure\nloss", "delayed\nloss", "levels\n0–1", "worst", "best\ndelay", "MOS"):
        t.add_column(col, justify="left" if col == "flow" else "right")
    for f in flows:
        jf, q, best = f["jitter_filter"], f.get("quality") or {}, f["emodel"].get("best") or {}
        mos = best.get("mos")
        t.add_row(_name(f), fmt_s(jf.get("base_delay_s")), _pct(jf.get("pure_loss_rate")),
                  _pct(jf.get("delayed_loss_rate")), _pct(q.get("acceptable_fraction")), _int(q.get("worst_level")),
                  fmt_s(best.get("playout_delay_s")), "—" if mos is None else f"{mos:.2f}")
    return t


def _video_table(flows: list[dict]) -> Table:
    st = fmt_s(flows[0]["video"].get("startup_delay_s"))
    t = Table(title=f"Video: playout against the frame schedule (startup delay {st}); discards: late, "
                    "partial (incomplete) and overflow frames; stalls: playout-buffer underflows, frozen "
                    "their time", title_justify="left")
    for col in ("flow", "fps", "frames", "discards", "late", "partial", "overflow", "stalls", "frozen"):
        t.add_column(col, justify="left" if col == "flow" else "right")
    for f in flows:
        v = f["video"]
        fps = v.get("fps")
        t.add_row(_name(f), "—" if fps is None else f"{fps:.3g}", _int(v.get("frames")), _int(v.get("picture_discards")),
                  _int(v.get("late_frames")), _int(v.get("incomplete_frames")), _int(v.get("overflow_discards")),
                  _int(v.get("underflow_events")), fmt_s(v.get("underflow_s")))
    return t


def _transfers_tables(transfers: list[dict]) -> list[Table]:
    """One table per timed-transfers flow: handshake, transfer (first write to the last byte's
    ACK) and their sum, over its complete transfers."""
    out = []
    for x in transfers:
        t = Table(title=f"Timed transfers of {_name(x)}: {x.get('complete')} of {x.get('transfers')} complete, "
                        f"{_int(x.get('retransmits'))} retransmissions, {_int(x.get('rtos'))} RTOs",
                  title_justify="left")
        for col in ("time", "count", "mean", "p50", "p95", "p99", "max"):
            t.add_column(col, justify="left" if col == "time" else "right")
        for key, label in (("handshake_s", "handshake"), ("transfer_s", "transfer"), ("latency_s", "total")):
            d = x.get(key) or {}
            t.add_row(label, _int(d.get("count")), fmt_s(d.get("mean_s")), fmt_s(d.get("p50_s")),
                      fmt_s(d.get("p95_s")), fmt_s(d.get("p99_s")), fmt_s(d.get("max_s")))
        out.append(t)
    return out


def _cross_table(cross: list[dict]) -> Table:
    t = Table(title="Cross traffic and other flows (flows.parquet)", title_justify="left")
    for col in ("flow", "kind", "bytes received", "goodput", "status"):
        t.add_column(col, justify="right" if col in ("bytes received", "goodput") else "left")
    for c in cross:
        kind = "/".join(str(c[k]) for k in ("kind", "transport") if c.get(k))
        t.add_row(_name(c), kind, _int(c.get("bytes_received")), fmt_bps(c.get("goodput_bps")),
                  str(c.get("status") or ""))
    return t


#: The rows of the pulled-streams table: (label, key of the model player, key of VLC's counters, is a time).
_STREAM_ROWS = (
    ("frames", "frames", "video_decoded", False),
    ("played", "played", "frames_displayed", False),
    ("picture discards", "picture_discards", "picture_discards", False),
    ("  late frames", "late_frames", None, False),
    ("  incomplete frames", "incomplete_frames", None, False),
    ("underflow events", "underflow_events", "underflow_events", False),
    ("frozen (underflows)", "underflow_s", None, True),
    ("startup", "startup_s", None, True),
    ("rebuffer messages", None, "rebuffer_messages", False),
    ("server TCP retrans", "retransmits", "retransmits", False),
)


def _streams_table(streams: list[dict]) -> Table:
    """A column per pulled stream, a row per measure (the model player's or VLC's)."""
    t = Table(title="Pulled streams: the player, and the server's TCP", title_justify="left")
    t.add_column("measure", justify="left")
    for st in streams:
        t.add_column(f"{_name(st)} ({st.get('player') or '?'})", justify="right")
    for label, model_key, vlc_key, is_time in _STREAM_ROWS:
        cells = []
        for st in streams:
            key = vlc_key if st.get("player") == "vlc" else model_key
            v = st.get(key) if key else None
            cells.append(fmt_s(v) if is_time else _int(v))
        if any(c != "—" for c in cells):
            t.add_row(label, *cells)
    return t


def _queue_table(queue: dict) -> Table:
    t = Table(title="Bottleneck queue over the run", title_justify="left")
    for col in ("direction", "mean packets", "max packets", "mean bytes", "max bytes"):
        t.add_column(col, justify="left" if col == "direction" else "right")
    for d, q in sorted(queue.items()):
        if not isinstance(q, dict):
            continue
        mp, mb = q.get("mean_packets"), q.get("mean_bytes")
        t.add_row(d, "—" if mp is None else f"{mp:.3g}", _int(q.get("max_packets")),
                  "—" if mb is None else f"{mb:.4g}", _int(q.get("max_bytes")))
    return t


@click.command("metrics")
@click.argument("results", metavar="RESULTS", type=DirPath(must_exist=True))
@click.option("--sent", "sent_dir", metavar="DIR", type=DirPath(must_exist=True), default=None,
              help="The sender's results directory, when it is not RESULTS (runs across hosts).")
@click.option("--playout-delay-s", "playout_delays", type=NON_NEGATIVE, multiple=True,
              help="Playout delay for the late fraction and the E-model (repeatable) "
                   f"[default: {', '.join(f'{x:g}' for x in DEFAULT_PLAYOUT_DELAYS_S)}].")
@click.option("--jitter-buffer-s", type=NON_NEGATIVE, default=0.04, show_default=True,
              help="Jitter buffer of the jitter filter (delayed loss above base delay + this).")
@click.option("--cross-traffic-start-s", type=float, default=None,
              help="When the cross traffic starts, on the send-time clock: the base delay is the "
                   "minimum over the 2 s before [default: run.json cross_traffic_start_s, else the "
                   "whole flow's minimum].")
@click.option("--rtpi-threshold-s", type=POSITIVE, default=0.1, show_default=True,
              help="Inter-arrival threshold of the Real-Time Performance Index.")
@click.option("--startup-delay-s", type=NON_NEGATIVE, default=1.0, show_default=True,
              help="Video: playout starts this long after the first packet arrives.")
@click.option("--buffer-bytes", type=POSITIVE, default=None,
              help="Video: playout buffer size [default: unlimited].")
@click.option("--fps", type=POSITIVE, default=None,
              help="Video frame rate [default: inferred from the send times].")
@click.option("--codec", type=click.Choice(sorted(emodel.CODECS)), default="g711-plc",
              show_default=True, help="E-model codec (Ie, Bpl of ITU-T G.113 Appendix I).")
@click.option("--series", is_flag=True, help="Include the quality levels over time (JSON).")
@json_option
def metrics_cmd(results, sent_dir, playout_delays, jitter_buffer_s, cross_traffic_start_s,
                rtpi_threshold_s, startup_delay_s, buffer_bytes, fps, codec, series, as_json):
    """Metrics of a recorded run: delay, late fraction vs playout delay, RFC 3550 jitter and loss;
    the jitter filter and loss-period quality levels of the HSPA audio study; RTPI, delayed
    packets rate, goodput and Jain fairness (Papadimitriou & Tsaoussidis); picture discards and
    playout-buffer underflows (Watanabe et al.); and the ITU-T G.107 E-model MOS. Runs of timed
    transfers, pulled streams or cross traffic alone show what they measured; a committed run
    without packet records is read from its packets.parquet and metrics.json (the output says
    which)."""
    opts = MetricOptions(
        playout_delays_s=tuple(playout_delays) or DEFAULT_PLAYOUT_DELAYS_S,
        jitter_buffer_s=jitter_buffer_s, rtpi_threshold_s=rtpi_threshold_s,
        startup_delay_s=startup_delay_s,
        buffer_bytes=math.inf if buffer_bytes is None else buffer_bytes, codec=codec,
        cross_traffic_start_s=cross_traffic_start_s, fps=fps, series=series)
    res = summarize_run(results, sent_dir, opts)
    res["testbed_error"] = describe(results)
    late = as_verdict(res["testbed_error"])

    def human(console):
        console.print(f"[bold]{res['results']}[/bold]  clock: {res.get('clock') or '—'}"
                      + ("  [yellow]delays are relative to the run's minimum[/yellow]"
                         if res.get("delay_relative_to_min") else ""))
        if late.recorded:     # (a run from before the testbed recorded its error: nothing to say)
            console.print(f"testbed error: worst {late.text()}", highlight=False)
        for part, where in (res.get("sources") or {}).items():
            console.print(f"{part}: from {where}")
        flows = res["flows"]
        if flows:
            _print(console, _packets_table(res))
            _print(console, _delay_table(res))
            if any(f.get("rtpi") or f.get("goodput_bps") is not None or f.get("tcp_retransmissions") is not None
                   for f in flows):
                _print(console, _rate_table(res))
            for table in _late_tables(res):
                _print(console, table)
            voice = [f for f in flows if f.get("emodel") and f.get("jitter_filter")]
            if voice:
                _print(console, _voice_table(voice))
            vid = [f for f in flows if f.get("video")]
            if vid:
                _print(console, _video_table(vid))
            fair = res.get("fairness") or {}
            j = fair.get("jain_index_goodput")
            if fair.get("by_media"):   # voice beside video: an index per kind, none across them
                console.print("Jain fairness index of the goodputs, per kind: " + "; ".join(
                    f"{k} {'—' if v['jain_index_goodput'] is None else format(v['jain_index_goodput'], '.3f')} "
                    f"({v['flows']} flow{'s' if v['flows'] > 1 else ''})" for k, v in fair["by_media"].items()))
            elif (fair.get("flows") or 0) > 1:
                console.print(f"Jain fairness index of the goodputs: "
                              f"{'—' if j is None else f'{j:.3f}'}")
            if any(f.get("inferred_from_received") for f in flows):
                console.print("[yellow]No sent records: packets inferred from received sequence "
                              "numbers (give --sent DIR for exact loss)[/yellow]")
        for table in _transfers_tables(res.get("transfers") or []):
            _print(console, table)
        if res.get("streams"):
            _print(console, _streams_table(res["streams"]))
        if res.get("cross"):
            _print(console, _cross_table(res["cross"]))
        if res.get("queue"):
            _print(console, _queue_table(res["queue"]))
        if not any(res.get(k) for k in ("flows", "transfers", "streams", "cross", "queue")):
            console.print("[yellow]This run kept no media flow, transfer, stream, cross traffic or "
                          "queue record to measure.[/yellow]")
        for w in res.get("warnings") or []:
            console.print(f"[yellow]warning: {w}[/yellow]")

    emit(res, as_json, human)
    warn("metrics", [late])


COMMANDS = [metrics_cmd]

"""``tcpdelay metrics``: every metric of a recorded run (delay, late fraction, jitter, loss,
the jitter filter and quality levels, RTPI, goodput and fairness, video discards and underflows,
E-model MOS), from its per-packet records."""

from __future__ import annotations

import math

import click
from rich.table import Table

from tcpdelay.cli.common import NON_NEGATIVE, POSITIVE, DirPath, emit, fmt_bps, fmt_s, json_option
from tcpdelay.metrics import emodel
from tcpdelay.metrics.summary import DEFAULT_PLAYOUT_DELAYS_S, MetricOptions
from tcpdelay.results.runs import summarize_run


def _pct(x) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{100 * x:.2f} %"


def _packets_table(res: dict) -> Table:
    t = Table(title="Packets", title_justify="left")
    for col in ("flow", "kind", "sent", "received", "lost", "loss rate", "sender drops",
                "duplicates"):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for f in res["flows"]:
        p = f["packets"]
        t.add_row(str(f["flow_id"]), f["kind"], str(p["packets"]), str(p["received"]),
                  str(p["lost"]), _pct(p["loss_rate"]), str(p["dropped_by_sender"]),
                  str(p["duplicates"]))
    return t


def _delay_table(res: dict) -> Table:
    rel = " (relative to the run's minimum: unsynchronized clocks)" \
        if res["delay_relative_to_min"] else ""
    t = Table(title=f"One-way delay{rel}", title_justify="left")
    for col in ("flow", "mean", "std", "p50", "p95", "p99", "max", "RFC 3550 jitter"):
        t.add_column(col, justify="right")
    for f in res["flows"]:
        d = f["delay"]
        t.add_row(str(f["flow_id"]), fmt_s(d["mean_s"]), fmt_s(d["std_s"]), fmt_s(d["p50_s"]),
                  fmt_s(d["p95_s"]), fmt_s(d["p99_s"]), fmt_s(d["max_s"]),
                  fmt_s(f["jitter_rfc3550_s"]))
    return t


def _rate_table(res: dict) -> Table:
    thr = res["options"]["rtpi_threshold_s"]
    t = Table(title=f"Real-time performance (inter-arrival threshold {fmt_s(thr)}) and goodput",
              title_justify="left")
    for col in ("flow", "RTPI", "delayed pkts", "loss", "goodput", "TCP retrans"):
        t.add_column(col, justify="right")
    for f in res["flows"]:
        r = f["rtpi"]
        t.add_row(str(f["flow_id"]), _pct(r["rtpi"]), _pct(r["delayed_packets_rate"]),
                  _pct(r["packet_loss_rate"]), fmt_bps(f["goodput_bps"]),
                  "—" if f["tcp_retransmissions"] is None else str(f["tcp_retransmissions"]))
    return t


def _late_table(res: dict) -> Table:
    t = Table(title="Late (and missed) packets vs playout delay", title_justify="left")
    t.add_column("playout delay", justify="right")
    for f in res["flows"]:
        t.add_column(f"flow {f['flow_id']} late", justify="right")
        t.add_column(f"flow {f['flow_id']} missed", justify="right")
    for i, pd in enumerate(res["options"]["playout_delays_s"]):
        row = [fmt_s(pd)]
        for f in res["flows"]:
            row += [_pct(f["late"]["late_fraction"][i]), _pct(f["late"]["miss_fraction"][i])]
        t.add_row(*row)
    return t


def _voice_table(flows: list[dict]) -> Table:
    jb = fmt_s(flows[0]["jitter_filter"]["jitter_buffer_s"])
    codec = flows[0]["emodel"]["codec_name"]
    t = Table(title=f"Voice: jitter filter (buffer {jb}), quality levels 0–5 (acceptable = 0–1), "
                    f"E-model MOS ({codec})", title_justify="left")
    for col in ("flow", "base delay", "pure loss", "delayed loss", "acceptable",
                "worst level", "best playout", "MOS"):
        t.add_column(col, justify="right")
    for f in flows:
        jf, q, best = f["jitter_filter"], f["quality"], f["emodel"]["best"]
        t.add_row(str(f["flow_id"]), fmt_s(jf["base_delay_s"]), _pct(jf["pure_loss_rate"]),
                  _pct(jf["delayed_loss_rate"]), _pct(q["acceptable_fraction"]), str(q["worst_level"]),
                  fmt_s(best["playout_delay_s"]), f"{best['mos']:.2f}")
    return t


def _video_table(flows: list[dict]) -> Table:
    st = fmt_s(flows[0]["video"]["startup_delay_s"])
    t = Table(title=f"Video: playout against the frame schedule (startup delay {st})",
              title_justify="left")
    for col in ("flow", "fps", "frames", "discards", "late", "incomplete", "overflow",
                "underflows", "frozen"):
        t.add_column(col, justify="right")
    for f in flows:
        v = f["video"]
        t.add_row(str(f["flow_id"]), f"{v['fps']:.3g}", str(v["frames"]), str(v["picture_discards"]), str(v["late_frames"]),
                  str(v["incomplete_frames"]), str(v["overflow_discards"]),
                  str(v["underflow_events"]), fmt_s(v["underflow_s"]))
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
    playout-buffer underflows (Watanabe et al.); and the ITU-T G.107 E-model MOS."""
    opts = MetricOptions(
        playout_delays_s=tuple(playout_delays) or DEFAULT_PLAYOUT_DELAYS_S,
        jitter_buffer_s=jitter_buffer_s, rtpi_threshold_s=rtpi_threshold_s,
        startup_delay_s=startup_delay_s,
        buffer_bytes=math.inf if buffer_bytes is None else buffer_bytes, codec=codec,
        cross_traffic_start_s=cross_traffic_start_s, fps=fps, series=series)
    res = summarize_run(results, sent_dir, opts)

    def human(console):
        console.print(f"[bold]{res['results']}[/bold]  clock: {res['clock']}"
                      + ("  [yellow]delays are relative to the run's minimum[/yellow]"
                         if res["delay_relative_to_min"] else ""))
        console.print(_packets_table(res))
        console.print(_delay_table(res))
        console.print(_rate_table(res))
        console.print(_late_table(res))
        voice = [f for f in res["flows"] if "emodel" in f]
        if voice:
            console.print(_voice_table(voice))
        vid = [f for f in res["flows"] if "video" in f]
        if vid:
            console.print(_video_table(vid))
        j = res["fairness"]["jain_index_goodput"]
        if res["fairness"]["flows"] > 1:
            console.print(f"Jain fairness index of the goodputs: "
                          f"{'—' if j is None else f'{j:.3f}'}")
        if any(f["inferred_from_received"] for f in res["flows"]):
            console.print("[yellow]No sent records: packets inferred from received sequence "
                          "numbers (give --sent DIR for exact loss)[/yellow]")

    emit(res, as_json, human)


COMMANDS = [metrics_cmd]

"""``tcpdelay delay``, ``tcpdelay region``, ``tcpdelay playout``: the CBR-over-TCP delay model
(Brosh et al., Sections 4, 6.1, 6.6, 7)."""

from __future__ import annotations

import math
import re

import click

from tcpdelay.cli.common import (
    POSITIVE, PROBABILITY, FiniteFloatRange, PlotPath, emit, fmt_bps, fmt_s, json_option, key_value_table,
)
from tcpdelay.errors import ParameterError
from tcpdelay.fidelity import summary_text
from tcpdelay.model.delay.predict import MAX_CONNECTIONS, MAX_SPLIT
from tcpdelay.model.delay.profiles import PROFILES
from tcpdelay.model.delay.stacks import DEFAULT_STACK, STACKS


def _source_options(f):
    f = click.option("--packet-bytes", type=POSITIVE, default=None,
                     help="Packet size in bytes for a custom source (with --rate-bps).")(f)
    f = click.option("--rate-bps", type=POSITIVE, default=None,
                     help="Custom source rate on TCP in bits/s (headers included; with --packet-bytes).")(f)
    f = click.option("--profile", type=click.Choice(list(PROFILES)), default=None,
                     help="Built-in media profile (Section 5).")(f)
    return f


def _model_options(f):
    opts = [
        click.option("--stack", type=click.Choice(list(STACKS)), default=DEFAULT_STACK, show_default=True,
                     help="Whose loss recovery: linux (today's: RACK-TLP, CUBIC, PRR), classic (three "
                          "duplicate ACKs and RTOs: ns-3, kernels before RACK) or paper (Brosh et al.'s "
                          "Table 6 as published). docs/models/delay.md."),
        click.option("--one-way-s", type=FiniteFloatRange(min=0), default=None, help="One-way delay L [default RTT/2]."),
        click.option("--mss-bytes", type=POSITIVE, default=1448, show_default=True),
        click.option("--t0-s", type=POSITIVE, default=None, help="First retransmission timeout [default RTT + 0.2 s, the Linux RTO]."),
        click.option("--loss-model", type=click.Choice(["random", "correlated"]), default="random", show_default=True),
        click.option("--queue", type=click.Choice(["packets", "bytes"]), default="packets", show_default=True,
                     help="Bottleneck queue limited in packets, or in bytes (size-scaled loss)."),
        click.option("--limited-transmit/--no-limited-transmit", default=True, show_default=True),
        click.option("--al-fr-backlog", type=click.Choice(["table", "eq4"]), default="table", show_default=True,
                     help="[choice] backlog after a fast retransmit from an application-limited state: 3 packets (Table 6) or 0 (eq 4)."),
        click.option("--backlog-rounding", type=click.Choice(["split", "nearest", "floor"]), default="split", show_default=True,
                     help="[choice] fractional backlog to whole packets."),
        click.option("--growth-requires-backlog", is_flag=True, help="[choice] grow the window only when backlog remains (appendix's literal condition)."),
        click.option("--count-fresh-packets", is_flag=True, help="[choice] also count packets that arrive and leave within a round."),
        click.option("--hol-ramp", is_flag=True,
                     help="[choice, not the paper's] add the packets held at the receiver behind each fast "
                          "retransmit (L + RTT - q/f, q < f·RTT); implies --count-fresh-packets."),
        click.option("--force", is_flag=True, help="Solve even when unstable (results depend on the truncation)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _model_kwargs(kw) -> dict:
    return dict(one_way_s=kw["one_way_s"], mss_bytes=kw["mss_bytes"], t0_s=kw["t0_s"],
                loss_model=kw["loss_model"], queue=kw["queue"], limited_transmit=kw["limited_transmit"],
                al_fr_backlog=kw["al_fr_backlog"], backlog_rounding=kw["backlog_rounding"],
                growth_requires_backlog=kw["growth_requires_backlog"],
                count_fresh_packets=kw["count_fresh_packets"] or None,  # unset: follows hol_ramp
                hol_ramp=kw["hol_ramp"], force=kw["force"], stack=kw["stack"])


def _source(profile, rate_bps, packet_bytes) -> dict:
    if profile is not None and (rate_bps is not None or packet_bytes is not None):
        raise ParameterError("give either --profile or --rate-bps with --packet-bytes, not both")
    if profile is None and (rate_bps is None or packet_bytes is None):
        raise ParameterError("give --profile NAME, or both --rate-bps and --packet-bytes")
    return {"profile": profile, "rate_bps": rate_bps, "packet_bytes": packet_bytes}


def model_error(pred, rtt_s: float, loss: float, *, split: int = 1, connections: int = 1) -> dict:
    """How far to trust ``pred``: the model's measured error at the nearest points of the
    committed fidelity table (:func:`tcpdelay.fidelity.nearby_error`)."""
    from tcpdelay.fidelity import nearby_error

    params = pred.info.get("params") or {}
    return nearby_error(stack=pred.info.get("stack", "paper"), rtt_s=rtt_s, loss=loss,
                        profile=pred.info.get("profile"), packet_bytes=pred.info.get("source_packet_bytes"),
                        rate_pps=(params.get("rate_pps") or 0) * connections / max(split, 1) or None,
                        split=split, connections=connections)


def _warn(messages) -> None:
    for m in messages or []:
        click.echo(f"tcpdelay: warning: {m}", err=True)


@click.command("delay")
@_source_options
@click.option("--rtt-s", type=POSITIVE, required=True, help="Round-trip time in seconds.")
@click.option("--loss", type=PROBABILITY, required=True, help="Segment loss probability, 0 <= p < 1.")
@_model_options
@click.option("--split", type=click.IntRange(1, MAX_SPLIT), default=1, show_default=True, help="split-N: N packets of a/N at N·f (Section 7.1).")
@click.option("--connections", type=click.IntRange(1, MAX_CONNECTIONS), default=1, show_default=True,
              help="Blind round-robin over N parallel connections (Section 7.2).")
@click.option("--plot", "plot_path", type=PlotPath(), default=None, help="Write the delay CDF to this file (.png, .svg, .pdf).")
@json_option
def delay_cmd(profile, rate_bps, packet_bytes, rtt_s, loss, split, connections, plot_path, as_json, **kw):
    """Per-packet delay distribution of a constant-bit-rate source over TCP (the Markov chain
    of Brosh et al., Section 4 and Appendix A)."""
    from tcpdelay.model.delay import predict

    src = _source(profile, rate_bps, packet_bytes)
    pred = predict(**src, rtt_s=rtt_s, loss=loss, split=split, connections=connections, **_model_kwargs(kw))
    res = pred.to_dict()
    res["model_error"] = model_error(pred, rtt_s, loss, split=split, connections=connections)
    _warn(pred.info.get("warnings"))
    if plot_path:
        from tcpdelay.report.delay_plots import plot_delay_distribution
        plot_delay_distribution(pred, plot_path, f"{pred.info['profile']}: RTT {rtt_s * 1e3:g} ms, loss {loss * 100:g} %")

    def human(console):
        title = (f"Delay: {pred.info['profile']} ({fmt_bps(pred.info['source_rate_bps'])}), RTT {rtt_s * 1e3:g} ms, "
                 f"loss {loss * 100:g} %" + (f", split-{split}" if split > 1 else "")
                 + (f", {connections} connections" if connections > 1 else ""))
        if pred.unstable:
            rows = [("unstable", "yes: delay grows without bound"),
                    ("TCP throughput (PFTK)", fmt_bps(res["tcp_throughput_bps"])),
                    ("source rate (per connection)", fmt_bps(res["rate_bps"]))]
        else:
            rows = [(k, fmt_s(res[k])) for k in ("mean_s", "std_s", "p50_s", "p95_s", "p99_s", "p999_s", "max_s")]
            rows += [("stack", res["stack"])]
            if res["stack"] != "paper":
                rows += [("held behind a loss (HOL)", f"{res['held_fraction'] * 100:.2f} % of packets"),
                         ("mean repair time of a loss", fmt_s(res["repair_mean_s"]))]
            rows += [("backlog share of TCP delay", f"{res['backlog_share'] * 100:.1f} %"),
                     ("timeout share of loss events", f"{res['timeout_probability'] * 100:.2f} %"),
                     ("mean window (segments)", f"{res['mean_window']:.2f}"),
                     ("mean backlog (packets)", f"{res['mean_backlog_packets']:.2f}"),
                     ("TCP throughput / rate", f"{res['throughput_ratio']:.2f}"),
                     ("truncated mass", f"{res['truncated_mass']:.1e}"),
                     ("states (recurrent)", f"{res['states']} ({res['recurrent_states']})"),
                     ("solve", fmt_s(res["solve_s"]))]
        console.print(key_value_table(title, rows))
        console.print(summary_text(res["model_error"]), highlight=False, markup=False)

    emit(res, as_json, human)


MAX_GRID_VALUES = 1000
"""Values per axis of ``region``'s grid (each cell is one chain solve)."""


_GRID_FLAG = {"rtt_s": "--rtts-s", "rtts_s": "--rtts-s", "loss": "--losses", "losses": "--losses"}
_GRID_FLAGS = re.compile(r"^(rtts?_s|loss(?:es)?)(?=:)")


def _floats(text: str | None, name: str):
    if text is None:
        return None
    try:
        vals = [float(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise ParameterError(f"{name}: {text!r} is not a list of numbers (e.g. '0.02,0.1,0.3')") from None
    if not vals:
        raise ParameterError(f"{name}: empty list")
    for v in vals:
        if not math.isfinite(v):
            raise ParameterError(f"{name}: {'NaN' if math.isnan(v) else f'{v:g}'} is not allowed; give finite numbers")
    if len(vals) > MAX_GRID_VALUES:
        raise ParameterError(f"{name}: {len(vals)} values; at most {MAX_GRID_VALUES} per axis")
    return vals


@click.command("region")
@_source_options
@click.option("--percentile", type=FiniteFloatRange(min=0, max=100, min_open=True, max_open=True), default=None,
              help="Criterion percentile [default: the profile's, 95 for VoIP, 99.9 for video].")
@click.option("--bound-s", type=POSITIVE, default=None, help="Criterion bound in seconds [default: the profile's, 0.2 VoIP, 5 video].")
@click.option("--rtts-s", default=None, help="Comma-separated RTTs [default 0.02,0.1,0.3].")
@click.option("--losses", default=None, help="Comma-separated loss rates [default 0.001,0.005,0.01,0.02,0.03,0.05,0.1].")
@click.option("--workers", type=click.IntRange(1, 256), default=None, help="Processes [default: CPU count].")
@_model_options
@click.option("--plot", "plot_path", type=PlotPath(), default=None, help="Write the region plot (.png, .svg, .pdf) to this file.")
@json_option
def region_cmd(profile, rate_bps, packet_bytes, percentile, bound_s, rtts_s, losses, workers, plot_path, as_json, **kw):
    """Working region (Section 6.1): per RTT, the largest loss rate at which the delay
    percentile stays within the bound."""
    from rich.progress import Progress

    from tcpdelay.model.delay.region import DEFAULT_LOSSES, DEFAULT_RTTS_S, working_region

    src = _source(profile, rate_bps, packet_bytes)
    grid = dict(rtts_s=_floats(rtts_s, "--rtts-s") or DEFAULT_RTTS_S, losses=_floats(losses, "--losses") or DEFAULT_LOSSES)
    with Progress(transient=True, disable=as_json) as bar:
        task = bar.add_task("solving grid", total=len(grid["rtts_s"]) * len(grid["losses"]))
        try:
            res = working_region(**src, percentile=percentile, bound_s=bound_s, workers=workers,
                                 progress=lambda i, n: bar.update(task, completed=i), **grid, **_model_kwargs(kw))
        except ParameterError as err:  # a cell's rtt_s / loss is one value of --rtts-s / --losses
            raise ParameterError(_GRID_FLAGS.sub(lambda m: _GRID_FLAG[m.group(1)], str(err), count=1)) from None
    if plot_path:
        from tcpdelay.report.delay_plots import plot_region
        plot_region(res, plot_path)

    def human(console):
        from rich.table import Table
        t = Table(title=f"Working region: {res['profile']}, p{res['percentile']:g} ≤ {fmt_s(res['bound_s'])}, "
                        f"stack {kw['stack']} (grid solved in {res['elapsed_s']:.1f} s)", title_justify="left")
        t.add_column("RTT")
        for p in res["losses"]:
            t.add_column(f"{p * 100:g} %", justify="right")
        t.add_column("max loss", justify="right")
        for r, best in zip(res["rtts_s"], res["max_loss_by_rtt"]):
            row = [fmt_s(r)]
            for p in res["losses"]:
                c = next(c for c in res["cells"] if c["rtt_s"] == r and c["loss"] == p)
                row.append("unstable" if c["unstable"] else
                           f"[{'green' if c['ok'] else 'red'}]{fmt_s(c['value_s'])}[/]")
            row.append("none" if best["max_loss"] is None else f"{best['max_loss'] * 100:g} %")
            t.add_row(*row)
        console.print(t)

    emit(res, as_json, human)


@click.command("playout")
@_source_options
@click.option("--rtt-s", type=POSITIVE, required=True, help="Round-trip time in seconds.")
@click.option("--loss", type=PROBABILITY, required=True, help="Segment loss probability.")
@_model_options
@click.option("--plot", "plot_path", type=PlotPath(), default=None, help="Write late fraction vs playout delay to this file (.png, .svg, .pdf).")
@json_option
def playout_cmd(profile, rate_bps, packet_bytes, rtt_s, loss, plot_path, as_json, **kw):
    """Playout delay (Section 6.6): late fraction vs playout delay and the recommended
    L + RTT + 3/f with the share of TCP delay it masks."""
    from tcpdelay.model.delay.playout import playout_advice

    src = _source(profile, rate_bps, packet_bytes)
    res = playout_advice(**src, rtt_s=rtt_s, loss=loss, **_model_kwargs(kw))
    if res["unstable"]:
        _warn(["unstable: the source's rate exceeds TCP's achievable throughput; every playout delay is eventually exceeded"])
    if plot_path:
        from tcpdelay.report.delay_plots import plot_late_fraction
        plot_late_fraction(res, plot_path)

    def human(console):
        rows = [("recommended playout L+RTT+3/f", fmt_s(res["recommended_playout_s"])),
                ("late packets at it", f"{res['late_fraction_at_recommended'] * 100:.2f} %"),
                ("TCP-delayed packets it masks", f"{res['masked_tcp_delay_fraction'] * 100:.1f} %")]
        for x, y in list(zip(res["curve"]["playout_delay_s"], res["curve"]["late_fraction"]))[::6]:
            rows.append((f"late at {fmt_s(x)}", f"{y * 100:.3g} %"))
        console.print(key_value_table(f"Playout: {res['profile']}, RTT {rtt_s * 1e3:g} ms, loss {loss * 100:g} %", rows))

    emit(res, as_json, human)


COMMANDS = [delay_cmd, region_cmd, playout_cmd]

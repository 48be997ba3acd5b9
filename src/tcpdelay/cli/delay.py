"""``tcpdelay delay``, ``tcpdelay region``, ``tcpdelay playout``: the CBR-over-TCP delay model
(Brosh et al., Sections 4, 6.1, 6.6, 7)."""

from __future__ import annotations

import math
import re

import click

from tcpdelay.cli.common import (
    MSS_BYTES, POSITIVE, PROBABILITY, FiniteFloatRange, PlotPath, WholeNumber, emit, fmt_bps, fmt_s, json_option,
)
from tcpdelay.cli.text_layout import compact_table, print_key_values, print_title, print_wrapped, print_written
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
        click.option("--mss-bytes", type=MSS_BYTES, default=1448, show_default=True,
                     help="Maximum segment size, 88 to 65495 bytes; a packet must fit in one segment."),
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


_PACKET_OVER_MSS = re.compile(r"^packet_bytes: (\S+) exceeds mss_bytes (\S+);")


def _blame_mss(err: ParameterError, src: dict) -> ParameterError:
    """The model's "packet_bytes exceeds mss_bytes" worded for the option the user typed: a
    profile's packets too big for the --mss-bytes given blame --mss-bytes, not --packet-bytes."""
    m = _PACKET_OVER_MSS.match(str(err))
    if m is None:
        return err
    packet, mss = m.groups()
    ctx = click.get_current_context()
    mss_given = ctx.get_parameter_source("mss_bytes") not in (None, click.core.ParameterSource.DEFAULT)
    split = ", or cut the packets with --split N" if _find_split(ctx) else ""
    if src["packet_bytes"] is None:  # a profile's packets
        return ParameterError(f"mss_bytes: {mss} is smaller than one packet of profile {src['profile']} "
                              f"({packet} bytes); give at least {packet}{split}")
    if mss_given:
        return ParameterError(f"packet_bytes: {packet} exceeds --mss-bytes {mss}; a packet must fit in one "
                              f"segment: give a smaller --packet-bytes or a larger --mss-bytes{split}")
    return ParameterError(f"packet_bytes: {packet} exceeds one segment (--mss-bytes {mss}, the default); give "
                          f"a larger --mss-bytes{split}")


def _find_split(ctx: click.Context) -> bool:
    return any(p.name == "split" for p in ctx.command.params)


def _plot_written(console, path) -> None:
    print_written(console, "Plot", path)


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
@click.option("--split", type=WholeNumber(1, MAX_SPLIT), default=1, show_default=True, help="split-N: N packets of a/N at N·f (Section 7.1).")
@click.option("--connections", type=WholeNumber(1, MAX_CONNECTIONS), default=1, show_default=True,
              help="Blind round-robin over N parallel connections (Section 7.2).")
@click.option("--plot", "plot_path", type=PlotPath(), default=None, help="Write the delay CDF to this file (.png, .svg, .pdf).")
@json_option
def delay_cmd(profile, rate_bps, packet_bytes, rtt_s, loss, split, connections, plot_path, as_json, **kw):
    """Per-packet delay distribution of a constant-bit-rate source over TCP (the Markov chain
    of Brosh et al., Section 4 and Appendix A)."""
    from tcpdelay.model.delay import predict

    src = _source(profile, rate_bps, packet_bytes)
    try:
        pred = predict(**src, rtt_s=rtt_s, loss=loss, split=split, connections=connections, **_model_kwargs(kw))
    except ParameterError as err:
        raise _blame_mss(err, src) from None
    res = pred.to_dict()
    res["model_error"] = model_error(pred, rtt_s, loss, split=split, connections=connections)
    _warn(pred.info.get("warnings"))
    if plot_path:
        from tcpdelay.report.delay_plots import plot_delay_distribution
        res["plot_path"] = str(plot_delay_distribution(
            pred, plot_path, f"{pred.info['profile']}: RTT {rtt_s * 1e3:g} ms, loss {loss * 100:g} %"))

    def human(console):
        title = (f"Delay: {pred.info['profile']} ({fmt_bps(pred.info['source_rate_bps'])}), RTT {rtt_s * 1e3:g} ms, "
                 f"loss {loss * 100:g} %" + (f", split-{split}" if split > 1 else "")
                 + (f", {connections} connections" if connections > 1 else ""))
        if pred.unstable:
            rows = [("unstable", "yes: delay grows without bound"),
                    ("TCP throughput (PFTK)", fmt_bps(res["tcp_throughput_bps"])),
                    ("source rate (per connection)", fmt_bps(res["rate_bps"]))]
        else:
            rows = [(name, fmt_s(res[k])) for name, k in (("mean", "mean_s"), ("std", "std_s"), ("p50", "p50_s"),
                                                         ("p95", "p95_s"), ("p99", "p99_s"), ("p99.9", "p999_s"),
                                                         ("max", "max_s"))]
            rows += [("stack", res["stack"])]
            if res["stack"] != "paper":
                rows += [("held behind a loss (HOL)", f"{res['held_fraction'] * 100:.2f} % of packets"),
                         ("mean repair time of a loss", fmt_s(res["repair_mean_s"]))]
            share = f"{res['backlog_share'] * 100:.1f} %"
            if split == 1 and connections == 1:   # one chain: the share of the delay beyond L, in time
                share += f" ({fmt_s(res['backlog_share'] * (res['mean_s'] - res['params']['one_way_s']))} a packet)"
            # the chain's backlog is what a round leaves: a packet that waits within a round and is
            # sent in it is not in it, so "0.00" sat beside a backlog share of 8.7 %
            rows += [("backlog share of TCP delay", share),
                     ("timeout share of loss events", f"{res['timeout_probability'] * 100:.2f} %"),
                     ("mean window (segments)", f"{res['mean_window']:.2f}"),
                     ("backlog left after a round", f"{res['mean_backlog_packets']:.3g} packets"),
                     ("TCP throughput / rate", f"{res['throughput_ratio']:.2f}"),
                     ("truncated mass", f"{res['truncated_mass']:.1e}"),
                     ("states (recurrent)", f"{res['states']} ({res['recurrent_states']})"),
                     ("solve", fmt_s(res["solve_s"]))]
        print_key_values(console, title, rows)
        print_wrapped(console, summary_text(res["model_error"]))
        if plot_path:
            _plot_written(console, res["plot_path"])

    emit(res, as_json, human)


MAX_GRID_VALUES = 1000
"""Values per axis of ``region``'s grid (each cell is one chain solve)."""


_GRID_FLAG = {"rtt_s": "--rtts-s", "rtts_s": "--rtts-s", "loss": "--losses", "losses": "--losses"}
_GRID_FLAGS = re.compile(r"^(rtts?_s|loss(?:es)?)(?=:)")


def _floats(text: str | None, name: str):
    """A comma-separated list of distinct numbers (spaces around the commas allowed): an empty
    entry (``0.1,,0.2``, a trailing comma) or a repeated value is refused, never dropped."""
    if text is None:
        return None
    if not text.strip():
        raise ParameterError(f"{name}: empty list; give numbers separated by commas (e.g. '0.02,0.1,0.3')")
    entries = re.split(r"\s*,\s*|\s+", text.strip())
    if "" in entries:
        raise ParameterError(f"{name}: {text!r} has an empty entry (number {entries.index('') + 1}); "
                             "give numbers separated by single commas (e.g. '0.02,0.1,0.3')")
    try:
        vals = [float(x) for x in entries]
    except ValueError:
        raise ParameterError(f"{name}: {text!r} is not a list of numbers (e.g. '0.02,0.1,0.3')") from None
    repeated = sorted({v for v in vals if vals.count(v) > 1})
    if repeated:
        raise ParameterError(f"{name}: {', '.join(f'{v:g}' for v in repeated)} given more than once; "
                             "give each value once")
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
@click.option("--workers", type=WholeNumber(1, 256), default=None, help="Processes [default: CPU count].")
@_model_options
@click.option("--plot", "plot_path", type=PlotPath(), default=None, help="Write the region plot (.png, .svg, .pdf) to this file.")
@json_option
def region_cmd(profile, rate_bps, packet_bytes, percentile, bound_s, rtts_s, losses, workers, plot_path, as_json, **kw):
    """Working region (Section 6.1): per RTT, the largest loss rate at which the delay
    percentile stays within the bound."""
    from rich.console import Console
    from rich.progress import Progress

    from tcpdelay.model.delay.region import DEFAULT_LOSSES, DEFAULT_RTTS_S, working_region

    src = _source(profile, rate_bps, packet_bytes)
    grid = dict(rtts_s=_floats(rtts_s, "--rtts-s") or DEFAULT_RTTS_S, losses=_floats(losses, "--losses") or DEFAULT_LOSSES)
    err_console = Console(stderr=True)  # the bar on stderr, and only on a terminal: no stray blank line
    with Progress(console=err_console, transient=True, disable=as_json or not err_console.is_terminal) as bar:
        task = bar.add_task("solving grid", total=len(grid["rtts_s"]) * len(grid["losses"]))
        try:
            res = working_region(**src, percentile=percentile, bound_s=bound_s, workers=workers,
                                 progress=lambda i, n: bar.update(task, completed=i), **grid, **_model_kwargs(kw))
        except ParameterError as err:  # a cell's rtt_s / loss is one value of --rtts-s / --losses
            err = _blame_mss(err, src)
            raise ParameterError(_GRID_FLAGS.sub(lambda m: _GRID_FLAG[m.group(1)], str(err), count=1)) from None
    if plot_path:
        from tcpdelay.report.delay_plots import plot_region
        res["plot_path"] = str(plot_region(res, plot_path))

    def human(console):
        print_title(console, f"Working region: {res['profile']}, p{res['percentile']:g} ≤ {fmt_s(res['bound_s'])}, "
                             f"stack {kw['stack']}, grid solved in {res['elapsed_s']:.1f} s")
        print_wrapped(console, f"p{res['percentile']:g} delay in ms, a row per loss rate and a column per RTT; "
                               "✗: beyond the bound; max loss: the largest loss up to which every loss meets it")
        for i, table in enumerate(region_tables(res, console.width)):
            if i:
                console.print()
            console.print(table)
        if plot_path:
            _plot_written(console, res["plot_path"])

    emit(res, as_json, human)


def region_tables(res: dict, width: int) -> list:
    """``region``'s grid as text tables that fit ``width``: a row per loss rate (any number of
    them), a column per RTT, the max-loss row last; RTTs beyond one table's width go on to the
    next table."""
    cell = {(c["rtt_s"], c["loss"]): c for c in res["cells"]}
    best = {b["rtt_s"]: b["max_loss"] for b in res["max_loss_by_rtt"]}

    def value(c: dict) -> str:
        if c["unstable"] or c["value_s"] is None:
            return "unstable"
        return f"[{'green' if c['ok'] else 'red'}]{c['value_s'] * 1e3:.1f}{'' if c['ok'] else ' ✗'}[/]"

    columns = []  # (header, cells top to bottom, width of the widest plain text)
    for r in res["rtts_s"]:
        cells = [value(cell[(r, p)]) for p in res["losses"]]
        cells.append("none" if best.get(r) is None else f"{best[r] * 100:g} %")
        header = f"RTT {r * 1e3:g} ms" if r < 1 else f"RTT {r:g} s"
        plain = [len(re.sub(r"\[/?[a-z]*\]", "", x)) for x in cells]
        columns.append((header, cells, max([len(header)] + plain)))
    first = [f"{p * 100:g} %" for p in res["losses"]] + ["max loss"]
    first_width = max(len("loss"), *(len(x) for x in first))
    chunks, chunk, used = [], [], first_width
    for col in columns:
        if chunk and used + 2 + col[2] > width:
            chunks.append(chunk)
            chunk, used = [], first_width
        chunk.append(col)
        used += 2 + col[2]
    chunks.append(chunk)
    tables = []
    for chunk in chunks:
        t = compact_table()
        t.add_column("loss")
        for header, _, _ in chunk:
            t.add_column(header, justify="right", no_wrap=True)
        for i, name in enumerate(first):
            t.add_row(name, *(cells[i] for _, cells, _ in chunk), end_section=i == len(first) - 2)
        tables.append(t)
    return tables


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
    try:
        res = playout_advice(**src, rtt_s=rtt_s, loss=loss, **_model_kwargs(kw))
    except ParameterError as err:
        raise _blame_mss(err, src) from None
    if res["unstable"]:
        _warn(["unstable: the source's rate exceeds TCP's achievable throughput; every playout delay is eventually exceeded"])
    if plot_path:
        from tcpdelay.report.delay_plots import plot_late_fraction
        res["plot_path"] = str(plot_late_fraction(res, plot_path))

    def human(console):
        rows = [("recommended playout L+RTT+3/f", fmt_s(res["recommended_playout_s"])),
                ("late packets at it", f"{res['late_fraction_at_recommended'] * 100:.2f} %"),
                ("TCP-delayed packets it masks", f"{res['masked_tcp_delay_fraction'] * 100:.1f} %")]
        for x, y in list(zip(res["curve"]["playout_delay_s"], res["curve"]["late_fraction"]))[::6]:
            rows.append((f"late at {fmt_s(x)}", f"{y * 100:.3g} %"))
        print_key_values(console, f"Playout: {res['profile']}, RTT {rtt_s * 1e3:g} ms, loss {loss * 100:g} %", rows)
        if plot_path:
            _plot_written(console, res["plot_path"])

    emit(res, as_json, human)


COMMANDS = [delay_cmd, region_cmd, playout_cmd]

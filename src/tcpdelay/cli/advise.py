"""``tcpdelay advise``: what to change so that media over TCP on this path meets its delay budget
(docs/advise.md): the options ranked, each with its predicted effect, its cost and where its
numbers come from; ``--measure`` runs the top ones on the testbed or in ns-3."""

from __future__ import annotations

import click

from tcpdelay.cli.common import (
    POSITIVE, PROBABILITY, FiniteFloatRange, emit, fmt_bps, fmt_s, json_option,
)
from tcpdelay.cli.delay import _model_kwargs, _model_options, _source, _source_options, _warn
from tcpdelay.cli.testbed_warning import as_verdict, warn
from tcpdelay.errors import ParameterError


def _budget(source: dict, playout_s, bound_s, late_budget, percentile):
    from tcpdelay.model.advice_ranking import Budget
    from tcpdelay.model.delay.predict import resolve_source

    if playout_s is not None and bound_s is not None:
        raise ParameterError("give --playout-s or --bound-s, not both (both are the delay budget)")
    if late_budget is not None and percentile is not None:
        raise ParameterError("give --late-budget or --percentile, not both (both say how many packets may be late)")
    crit = resolve_source(**source).criterion
    delay = playout_s if playout_s is not None else bound_s if bound_s is not None else crit.bound_s
    late = late_budget if late_budget is not None else (
        1.0 - (percentile if percentile is not None else crit.percentile) / 100.0)
    return Budget(delay, late)


@click.command("advise")
@_source_options
@click.option("--rtt-s", type=POSITIVE, required=True, help="Round-trip time in seconds.")
@click.option("--loss", type=PROBABILITY, required=True,
              help="Segment loss probability, 0 <= p < 1 (bursty: with --loss-model correlated).")
@_model_options
@click.option("--playout-s", type=POSITIVE, default=None,
              help="Delay budget: the playout delay in seconds [default: the profile's bound, 0.2 s VoIP, 5 s video].")
@click.option("--late-budget", type=PROBABILITY, default=None,
              help="Fraction of packets allowed later than the playout delay [default: the profile's, 0.05 VoIP, 0.001 video].")
@click.option("--bound-s", type=POSITIVE, default=None, help="Percentile bound: with --percentile, 'pP <= bound' (same as --playout-s).")
@click.option("--percentile", type=FiniteFloatRange(min=0, max=100, min_open=True, max_open=True), default=None,
              help="Percentile bound: the late budget is 1 - P/100.")
@click.option("--bottleneck-bps", type=POSITIVE, default=None,
              help="Bottleneck rate in bits/s: bounds what fits (and is emulated under --measure).")
@click.option("--queue-size", type=click.IntRange(1, 2**31 - 1), default=None,
              help="Bottleneck queue size in packets or bytes (per --queue); only --measure uses it.")
@click.option("--cross-bulk", type=click.IntRange(0, 200), default=0, show_default=True,
              help="Bulk TCP cross-traffic flows; only --measure runs them (the model sees them through --rtt-s and --loss).")
@click.option("--measure", is_flag=True, help="Run the as-is path and the top three options (short runs) and rank by the measurement.")
@click.option("--backend", type=click.Choice(["testbed", "ns3"]), default="testbed", show_default=True,
              help="Where --measure runs: real Linux TCP in namespaces, or ns-3.")
@click.option("--measure-s", type=FiniteFloatRange(min=1, max=600), default=20.0, show_default=True,
              help="Seconds of media per measured option.")
@click.option("--measure-option", "measure_options", multiple=True, metavar="NAME",
              help="Also measure this option (by its name in the table; repeatable).")
@click.option("--tcp-preset", type=click.Choice(["linux-default", "newreno-2008"]), default="linux-default",
              show_default=True, help="The TCP stack the measured runs start from.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Keep the measured runs in this directory [default: a temporary one].")
@json_option
def advise_cmd(profile, rate_bps, packet_bytes, rtt_s, loss, playout_s, late_budget, bound_s, percentile,
               bottleneck_bps, queue_size, cross_bulk, measure, backend, measure_s, measure_options, tcp_preset,
               out_dir, as_json, **kw):
    """Rank what to change (playout delay, split-N, parallel connections, queue, TCP settings,
    TCP variant, UDP) so that a media source over TCP on this path meets its delay budget
    (Brosh et al., Sections 6-8). Model numbers equal `tcpdelay delay`'s for the same settings."""
    from tcpdelay.experiments.advice_measurement import advise, measure as run_measure

    src = _source(profile, rate_bps, packet_bytes)
    if not measure:
        if out_dir is not None:
            raise ParameterError("--out: it keeps the measured runs, so it needs --measure (without --measure "
                                 "nothing is run or written)")
        for flag, given in (("--cross-bulk", cross_bulk), ("--queue-size", queue_size),
                            ("--measure-option", measure_options)):
            if given:
                raise ParameterError(f"{flag}: only a measurement uses it (give --measure); the model sees the "
                                     "path through --rtt-s, --loss and --queue")
    budget = _budget(src, playout_s, bound_s, late_budget, percentile)
    res = advise(**src, rtt_s=rtt_s, loss=loss, budget=budget, bottleneck_bps=bottleneck_bps, **_model_kwargs(kw))
    if measure:
        from rich.console import Console
        console = Console(stderr=True)
        res = run_measure(res, backend=backend, duration_s=measure_s, also=tuple(measure_options), out_dir=out_dir,
                          preset=tcp_preset, queue_size=queue_size, cross_bulk=cross_bulk,
                          step=None if as_json else (lambda text: console.print(f"tcpdelay advise: {text}",
                                                                                highlight=False)))
        for f in res["measurement"]["failed"]:
            _warn([f"measuring {f['option']} failed: {f['error']}"])
        warn("advise", [as_verdict(o["testbed_error"]) for o in res["options"] if o.get("testbed_error")])
    if not res["fit"]["fits"]:
        _warn([res["fit"]["message"]])
    from tcpdelay.fidelity import nearby_error, summary_text
    kwm = _model_kwargs(kw)
    res["model_error"] = nearby_error(stack=kwm["stack"], rtt_s=rtt_s, loss=loss, profile=profile,
                                      packet_bytes=(res.get("source") or {}).get("packet_bytes", packet_bytes),
                                      rate_pps=(res.get("source") or {}).get("rate_pps"))

    def human(console):
        console.print(render_table(res, width=console.width))
        console.print(("[bold red]" if not res["fit"]["fits"] else "") + res["fit"]["message"], highlight=False)
        if res.get("ranking_note"):
            console.print(res["ranking_note"], highlight=False)
        if res.get("queue_note"):
            console.print(res["queue_note"], highlight=False)
        console.print(summary_text(res["model_error"]), highlight=False, markup=False)

    emit(res, as_json, human)


def _pct(x) -> str:
    if x is None:
        return "—"
    return f"{x * 100:.3g} %" if x * 100 >= 0.01 or x == 0 else f"{x * 100:.2g} %"


def cost_text(c: dict) -> str:
    """An option's cost in a few words."""
    parts = []
    if c["extra_bps"]:
        parts.append(("+" if c["extra_bps"] > 0 else "−") + fmt_bps(abs(c["extra_bps"])) + " headers")
    if c["extra_connections"]:
        parts.append(f"+{c['extra_connections']} connection" + ("s" if c["extra_connections"] > 1 else ""))
    if c["added_delay_s"]:
        parts.append(("+" if c["added_delay_s"] > 0 else "−") + fmt_s(abs(c["added_delay_s"])) + " playout")
    if c["note"] and not parts:
        parts.append(c["note"].split(";")[0].split(".")[0])
    return ", ".join(parts) or "—"


def _s(x) -> str:
    """Seconds, short: ms below 1 s (no decimals), s above."""
    if x is None:
        return "—"
    return f"{x * 1e3:.0f} ms" if x < 1 else f"{x:.2f} s"


#: Below this many columns the table leaves out the cost and the model's p95 beside a
#: measurement, and lists them under it: ten columns do not fit 80 without cutting numbers.
WIDE_COLUMNS = 120


def render_table(res: dict, width: int | None = None):
    """The ranked options with numbers as a rich table, then one line naming the options only a
    measurement can say. In a terminal narrower than :data:`WIDE_COLUMNS` the costs (and the
    model's p95 of a measured option) follow the table as lines, so every number stays whole."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from tcpdelay.cli.text_layout import phrase_lines

    wide = width is None or width >= WIDE_COLUMNS
    b = res["budget"]
    src = res["source"]
    path = res["path"]
    title = (f"Advice: {src['profile']} ({fmt_bps(src['rate_bps'])}), RTT {path['rtt_s'] * 1e3:g} ms, "
             f"loss {path['loss'] * 100:g} % ({path['loss_model']}); budget: at most "
             f"{_pct(b['late_fraction'])} later than {fmt_s(b['playout_s'])}")
    # the title above the table, broken between phrases (a table title breaks at any space)
    title_text = Text("\n".join(phrase_lines(title, width or 10**6)), style="italic")
    t = Table(box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD, pad_edge=wide, collapse_padding=not wide)
    cols = ["#", "option", "source", "mean", "p95", "p99", "late", "needs", "ok"] + (["cost"] if wide else [])
    for col in cols:
        # numbers never wrap; the option's name, the late fraction and the cost may
        t.add_column(col, justify="left" if col in ("option", "source", "ok", "cost") else "right",
                     no_wrap=col not in ("option", "late", "cost"), min_width=13 if col == "option" else None)
    unquantified, below = [], []
    for o in res["options"]:
        num = o.get("measured") or o["predicted"]
        if num is None:
            unquantified.append(o["name"])
            continue
        if num.get("unstable"):
            cells = ["unstable", "—", "—", "100 %", "—"]
            ok = "[red]no[/]"
        else:
            late = _pct(num["late_fraction"])
            if abs(num["playout_s"] - b["playout_s"]) > 1e-12:
                late += f" @{_s(num['playout_s'])}"
            cells = [_s(num["mean_s"]), _s(num["p95_s"]), _s(num["p99_s"]), late, _s(num["needed_playout_s"])]
            ok = "[green]yes[/]" if o["meets_budget"] else "[red]no[/]"
        model_p95 = None
        if "measured" in o and o["predicted"] is not None and o["predicted"].get("p95_s") is not None:
            model_p95 = f"model p95 {_s(o['predicted']['p95_s'])}"
        if wide:
            src_text = o["source"] + (f" ({model_p95})" if model_p95 else "")
            t.add_row(str(o["rank"]), o["name"], src_text, *cells, ok, cost_text(o["cost"]))
        else:
            t.add_row(str(o["rank"]), o["name"], o["source"], *cells, ok)
            below.append(f"{o['rank']}. {o['name']}: {cost_text(o['cost'])}" + (f"; {model_p95}" if model_p95 else ""))
    parts = [title_text, t]
    if below:
        parts.append(Text("cost" + (" (and the model's p95 of a measured option)" if "measured" in res.get("measurement", {})
                                    else "") + ":\n  " + "\n  ".join(below)))
    parts.append(Text("late: the fraction later than the playout delay (the budget's unless @); needs: the playout "
                      "delay that keeps the late fraction within the budget", style="dim"))
    if unquantified:
        parts.append(Text("Only a measurement can say (--measure --measure-option NAME): " + ", ".join(unquantified)))
    return Group(*parts)


COMMANDS = [advise_cmd]

"""``tcpdelay advise``, with measurements: the model's ranked options
(:mod:`tcpdelay.model.advice_ranking`) with those only a measurement can say (TCP settings of
Brosh et al. §8.1, RACK/TLP, the TCP variants, the "intelligent" parallel connections of §7.2)
and, with ``measure``, the top options run on the testbed or in ns-3 (:func:`measure`), the
measured numbers overriding the model's ranking.

Each option that can run carries its ``scenario`` change (the keys of the media flow's ``tcp`` /
``heuristics`` / ``transport`` in a scenario file, docs/experiments/README.md);
:func:`option_scenario` builds the whole scenario for one option on the advised path.
"""

from __future__ import annotations

import copy
import math
import tempfile
from pathlib import Path
from typing import Callable

from tcpdelay.errors import ParameterError, TcpdelayError
from tcpdelay.model import advice_ranking
from tcpdelay.model.advice_ranking import MEASUREMENT_ONLY, Budget, cost, option, rank
from tcpdelay.results.testbed_error import run_section, verdict

#: The TCP preset the measured "as-is" runs with (today's Linux defaults).
DEFAULT_PRESET = "linux-default"
#: Mean loss-burst length (packets) of the Gilbert-Elliott loss a measurement of ``correlated``
#: loss uses (the model's correlated loss drops the rest of a round; the link has no rounds).
BURST_PACKETS = 2.0
#: Seconds of media per measured option (short runs: a confirmation, not a validation).
DEFAULT_MEASURE_S = 20.0
#: How many of the ranked options ``measure`` runs beside the as-is path.
MEASURE_TOP = 3

#: Options only measurement can quantify: (name, kind, what, scenario change, cost, reference).
_TCP_SETTINGS = (
    ("TCP_NODELAY", "tcp", "disable Nagle's algorithm (the model assumes it disabled; with Nagle on small "
     "packets wait for ACKs)", {"tcp": {"nodelay": True}}, {}, "Brosh et al. §3, §8.1"),
    ("SACK", "tcp", "enable selective acknowledgments (the model's random-loss recovery is SACK-like)",
     {"tcp": {"sack": True}}, {}, "Brosh et al. §8.1"),
    ("RACK/TLP", "tcp", "enable RACK loss detection and tail loss probes (after the paper; ns-3 has no RACK; "
     "Linux from 6.17 has RACK with SACK regardless, so there it adds the tail loss probe)",
     {"tcp": {"rack": True, "tlp": True}}, {"note": "a probe segment per tail loss"}, "RFC 8985"),
    ("initial window 4", "tcp", "initial congestion window of 4 segments (start-up delay)",
     {"tcp": {"initcwnd_segments": 4}}, {}, "Brosh et al. §8.1"),
    ("no slow start after idle", "tcp", "keep the window across idle periods (VoIP silences)",
     {"tcp": {"slow_start_after_idle": False}}, {}, "Brosh et al. §8.1, §8.2"),
    ("no ssthresh caching", "tcp", "do not inherit ssthresh from an earlier connection to the same host",
     {"tcp": {"no_metrics_save": True}}, {}, "Brosh et al. §8.1"),
    ("large receive buffer", "tcp", "a 4 MiB receive buffer so flow control never limits the sender",
     {"tcp": {"rcvbuf_bytes": 4 * 1024 * 1024}}, {"note": "receiver memory"}, "Brosh et al. §8.1"),
)


#: "AQM at the bottleneck": the bottleneck's queue disciplines a measurement runs in place of its
#: drop-tail queue, with their RFCs' defaults (docs/emulator.md, docs/ns3.md "Queue disciplines and
#: ECN"): (discipline shown, the link's aqm table, reference).
AQM_OPTIONS = (
    ("FQ-CoDel", {"discipline": "fq_codel"}, "RFC 8290; docs/experiments/aqm.md"),
    ("CoDel", {"discipline": "codel"}, "RFC 8289; docs/experiments/aqm.md"),
)
#: The queue is where the delay comes from when an AQM at the bottleneck cuts the media's measured
#: p95 delay to at most this share of the as-is run's (and below every change to the sender measured).
QUEUE_DELAY_SHARE = 0.5


def aqm_option_name(shown: str) -> str:
    return f"AQM at the bottleneck ({shown})"


def measurement_only_options(budget: Budget, connections=advice_ranking.DEFAULT_CONNECTIONS) -> list[dict]:
    """Every option the model cannot quantify, shaped like the model's (``predicted`` None)."""
    from tcpdelay.testbed.congestion import VARIANTS

    out = []
    for n in connections:
        out.append(option(
            f"{n} connections (intelligent)", "connections",
            what=f"{n} parallel connections, each packet on the one with the shortest send queue not in "
                 "timeout (Brosh et al. §7.2, §8.2); the scheduler couples the connections' chains",
            predicted=None, budget=budget, source=MEASUREMENT_ONLY,
            settings={"connections": n, "scheduler": "intelligent"},
            cost_=cost(extra_connections=n - 1, fairness=f"{n} congestion controls: up to {n} fair shares "
                                                         "under congestion", note="the sender watches each send queue"),
            reference="Brosh et al. §7.2, Figs 27-28"))
    for name, kind, what, change, extra, ref in _TCP_SETTINGS:
        out.append(option(name, kind, what=what, predicted=None, budget=budget, source=MEASUREMENT_ONLY,
                          settings=copy.deepcopy(change), cost_=cost(**extra), reference=ref))
    for shown, aqm, ref in AQM_OPTIONS:
        out.append(option(aqm_option_name(shown), "aqm",
                          what=f"the bottleneck router runs {shown} (its RFC's defaults) instead of a drop-tail "
                               "queue; a change to the path, not to TCP: measured with --bottleneck-bps (the model "
                               "has no AQM)", predicted=None, budget=budget, source=MEASUREMENT_ONLY,
                          settings={"aqm": dict(aqm)},
                          cost_=cost(note="the path's owner must run it at the bottleneck; bulk flows then see "
                                          "drops (or ECN marks) early instead of a full buffer"),
                          reference=ref))
    for v in VARIANTS.values():
        out.append(option(f"TCP variant {v.name}", "variant", what=f"congestion control {v.name}: {v.description}",
                          predicted=None, budget=budget, source=MEASUREMENT_ONLY,
                          settings={"tcp": {"congestion_control": v.name}},
                          cost_=cost(fairness="depends on the variant (delay-based ones yield to loss-based ones)"),
                          reference=v.source))
    return out


def advise(profile=None, *, rate_bps=None, packet_bytes=None, rtt_s, loss, budget: Budget, **model_kw) -> dict:
    """The model's ranked options with the measurement-only ones after them (no runs)."""
    extra = measurement_only_options(budget, model_kw.get("connections", advice_ranking.DEFAULT_CONNECTIONS))
    return advice_ranking.advise_model(profile, rate_bps=rate_bps, packet_bytes=packet_bytes, rtt_s=rtt_s, loss=loss,
                                     budget=budget, extra=extra, **model_kw)


# ------------------------------------------------------------------------------ measurement

def _loss_spec(loss: float, loss_model: str) -> dict:
    if loss <= 0:
        return {"model": "none"}
    if loss_model == "random":
        return {"model": "bernoulli", "p": loss}
    r = 1.0 / BURST_PACKETS          # Gilbert-Elliott with k = 1, h = 0: loss ratio p_ge / (p_ge + r) = loss
    return {"model": "gilbert_elliott", "p": loss * r / (1.0 - loss), "r": r}


def measurable(opt: dict) -> bool:
    """An option a run can show: what it changes is a scenario key (not a playout delay, which
    is read off the as-is run, nor the model's byte-limited queue or Linux's fixed limited
    transmit); "AQM at the bottleneck" is (the link's ``aqm``), on a path with a bottleneck."""
    return (opt["kind"] in ("as-is", "split", "connections", "tcp", "variant", "udp", "aqm")
            and opt["name"] != "limited transmit")


def option_scenario(opt: dict, advice: dict, *, duration_s: float, seed: int = 1, backend: str = "testbed",
                    preset: str = DEFAULT_PRESET, queue_size: int | None = None, cross_bulk: int = 0) -> dict:
    """The scenario (as data) that runs ``opt`` on the advised path: one media flow, the path's
    RTT (one-way delay L forward, RTT − L back) and loss on the data direction, the bottleneck's
    rate and queue when given, ``cross_bulk`` bulk TCP flows."""
    path, src = advice["path"], advice["source"]
    L = path["one_way_s"]
    fwd: dict = {"delay_s": L, "loss": _loss_spec(path["loss"], path["loss_model"])}
    if path["bottleneck_bps"] is not None:
        fwd["rate_bps"] = path["bottleneck_bps"]
    if queue_size is not None:
        fwd["queue_bytes" if path["queue"] == "bytes" else "queue_packets"] = int(queue_size)
    s = opt["settings"]
    if "aqm" in s:
        fwd["aqm"] = dict(s["aqm"])
    tcp: dict = {"preset": preset}
    if backend == "ns3":
        tcp.update(rack=False, tlp=False)   # ns-3 3.44 has no RACK/TLP
    flow: dict = {"name": "media", "transport": "tcp"}
    if src["profile"] == "custom":
        flow.update(packet_size_bytes=int(round(src["packet_bytes"])), interval_s=1.0 / src["rate_pps"])
    else:
        flow["profile"] = src["profile"]
    tcp.update(s.get("tcp", {}))
    flow["tcp"] = tcp
    heur = {k: s[k] for k in ("split", "connections", "scheduler") if k in s}
    if heur:
        flow["heuristics"] = heur
    if s.get("transport") == "udp":
        flow = {k: v for k, v in flow.items() if k != "tcp"}
        flow["transport"] = "udp"
    data = {"name": "advise", "description": f"tcpdelay advise: {opt['name']}", "duration_s": float(duration_s),
            "seed": seed, "metrics": ["delay", "late", "loss"],
            "path": {"forward": fwd, "reverse": {"delay_s": max(path["rtt_s"] - L, 0.0)}}, "flows": [flow]}
    if cross_bulk:
        cross_tcp = {"preset": preset, **({"rack": False, "tlp": False} if backend == "ns3" else {})}
        data["cross"] = [{"kind": "bulk", "count": int(cross_bulk), "tcp": cross_tcp}]
    return data


def _measured_numbers(run_dir: Path, playouts: list[float], budget: Budget) -> dict:
    from tcpdelay.metrics.summary import MetricOptions
    from tcpdelay.results.runs import summarize_run

    m = summarize_run(run_dir, opts=MetricOptions(playout_delays_s=tuple(playouts), late_target=budget.late_fraction))
    flow = next(f for f in m["flows"] if f["flow_id"] == 0)
    late = flow["late"]
    miss = dict(zip(late["playout_delay_s"], late["miss_fraction"]))
    d = flow["delay"]
    return {"mean_s": d.get("mean_s"), "p95_s": d.get("p95_s"), "p99_s": d.get("p99_s"),
            "packets": d.get("count"), "loss_rate": flow["packets"].get("loss_rate"),
            "needed_playout_s": late.get("playout_delay_for_target_s"), "_miss": miss}


def measure(advice: dict, *, backend: str = "testbed", duration_s: float = DEFAULT_MEASURE_S, seed: int = 1,
            top: int = MEASURE_TOP, also: tuple[str, ...] = (), out_dir: str | Path | None = None,
            preset: str = DEFAULT_PRESET, queue_size: int | None = None, cross_bulk: int = 0,
            step: Callable[[str], None] | None = None) -> dict:
    """Run the as-is path and the ``top`` best measurable options (and those named in ``also``)
    once each for ``duration_s`` on ``backend``; put each one's numbers under ``measured`` (the
    playout options read the as-is run at their playout delay), its ``source`` to ``"measured"``
    (testbed) or ``"ns3"``, and rank again with the measured numbers over the model's. Adds
    ``measurement`` (backend, duration, runs, failures) and ``ranking_note`` (where the measured
    ranking differs from the model's) to ``advice`` and returns it."""
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.scenario import parse_scenario

    step = step or (lambda text: None)
    budget = Budget(**advice["budget"])
    opts = advice["options"]
    names = {o["name"] for o in opts}
    for n in also:
        if n not in names:
            raise ParameterError(f"measure_option: {n!r} is not one of the options ({', '.join(sorted(names))})")
    chosen = [o for o in opts if o["kind"] == "as-is"]
    chosen += [o for o in opts if measurable(o) and o["kind"] != "as-is" and o["predicted"] is not None][:top]
    chosen += [o for o in opts if o["name"] in also and o not in chosen]
    bottleneck = advice["path"].get("bottleneck_bps") is not None
    if bottleneck and cross_bulk:   # a queue forms: the AQM options say how much of the delay it is
        chosen += [o for o in opts if o["kind"] == "aqm" and o not in chosen]
    for o in chosen:
        if o["kind"] == "aqm" and not bottleneck:
            raise ParameterError(f"measure_option: {o['name']!r} needs --bottleneck-bps (without a bottleneck "
                                 "rate no queue forms for a discipline to manage)")
        if not measurable(o):
            raise ParameterError(f"measure_option: {o['name']!r} cannot be measured by a run "
                                 "(a playout delay is read off the as-is run; the queue-limit option or limited "
                                 "transmit is not a setting of the testbed's Linux)")
    model_order = [o["name"] for o in opts if o in chosen]
    source = advice_ranking.NS3 if backend == "ns3" else advice_ranking.MEASURED
    failed = []
    with tempfile.TemporaryDirectory(prefix="tcpdelay-advise-") as tmp:
        root = Path(out_dir) if out_dir is not None else Path(tmp)
        for i, o in enumerate(chosen, 1):
            step(f"run {i} of {len(chosen)}: {o['name']} ({duration_s:g} s on {backend})")
            sc = parse_scenario(option_scenario(o, advice, duration_s=duration_s, seed=seed, backend=backend,
                                                preset=preset, queue_size=queue_size, cross_bulk=cross_bulk),
                                source=f"advise: {o['name']}")
            run_dir = root / f"{i:02d}-{''.join(c if c.isalnum() else '-' for c in o['name'])}"
            playouts = [budget.playout_s]
            if o["kind"] == "as-is":
                playouts += [p["settings"]["playout_s"] for p in opts if p["kind"] == "playout"]
            try:
                run_scenario(sc, seed, run_dir, backend=backend)
                sec = run_section(run_dir)        # the run's own error (docs/testbed.md)
                o["testbed_error"] = {**verdict(sec, f"option {o['name']!r}").to_dict(), "section": sec}
                got = _measured_numbers(run_dir, playouts, budget)
            except (TcpdelayError, StopIteration, KeyError) as err:
                failed.append({"option": o["name"], "error": " ".join(str(err).split()) or type(err).__name__})
                o["measured_error"] = failed[-1]["error"]
                continue
            _set_measured(o, got, budget.playout_s, budget, source)
            if o["kind"] == "as-is":
                got = _playout_for_the_budget(opts, got, run_dir, playouts, budget)
                for p in opts:
                    if p["kind"] == "playout":
                        _set_measured(p, got, p["settings"]["playout_s"], budget, source)
    ranked = rank(opts)
    advice["options"] = ranked
    measured_order = [o["name"] for o in ranked if o["name"] in model_order]
    advice["measurement"] = {"backend": backend, "duration_s": duration_s, "seed": seed, "preset": preset,
                             "measured": [o["name"] for o in chosen if "measured" in o], "failed": failed}
    advice["ranking_note"] = _ranking_note(model_order, measured_order)
    advice["queue_note"] = _queue_note(chosen)
    return advice


def _queue_note(chosen: list[dict]) -> str | None:
    """Whether the bottleneck's queue, not TCP, is where the media's delay comes from: the best
    measured "AQM at the bottleneck" against the as-is run and the TCP changes measured (None when
    no AQM option was measured)."""
    def p95(o):
        return (o.get("measured") or {}).get("p95_s")

    as_is = next((o for o in chosen if o["kind"] == "as-is" and p95(o) is not None), None)
    aqm = [o for o in chosen if o["kind"] == "aqm" and p95(o) is not None]
    if as_is is None or not aqm:
        return None
    best = min(aqm, key=p95)
    a, b = p95(as_is), p95(best)
    others = [o for o in chosen if o["kind"] not in ("as-is", "aqm", "playout") and p95(o) is not None]
    best_tcp = min(others, key=p95) if others else None
    if b <= QUEUE_DELAY_SHARE * a and (best_tcp is None or b < p95(best_tcp)):
        text = (f"the path's queue, not TCP, is where the delay comes from: with {best['name']} the media's p95 "
                f"delay falls from {a * 1e3:.0f} ms to {b * 1e3:.0f} ms")
        if best_tcp is not None:
            text += f", below every change to the sender measured ({best_tcp['name']}: {p95(best_tcp) * 1e3:.0f} ms)"
        return text + "; an AQM at the bottleneck (or keeping the media out of the bulk flows' queue) helps more"
    return (f"the bottleneck's queue is not the main source of the delay: with {best['name']} the media's p95 "
            f"delay is {b * 1e3:.0f} ms against {a * 1e3:.0f} ms as is")


#: The playout option whose playout delay is the budget's answer (the model's until measured).
BUDGET_PLAYOUT = "playout for the budget"


def _playout_for_the_budget(opts: list[dict], got: dict, run_dir: Path, playouts: list[float],
                            budget: Budget) -> dict:
    """Measured, "playout for the budget" is the playout delay the as-is run needed (the smallest
    with at most the budget's share late), not the model's: the row said 144 ms (the model's)
    beside the as-is row's measured 67 ms. The model's stays in ``model_playout_s``. Returns the
    as-is run's numbers, read again at that playout delay."""
    p = next((o for o in opts if o["name"] == BUDGET_PLAYOUT), None)
    needed = got["needed_playout_s"]
    if p is None or needed is None or not math.isfinite(needed):
        return got
    model = p["settings"]["playout_s"]
    p["model_playout_s"] = model
    p["settings"] = {**p["settings"], "playout_s": needed}
    p["what"] = (f"set the playout delay to the smallest one with at most {budget.late_fraction * 100:g} % late "
                 f"in the as-is run: {needed * 1e3:.0f} ms (the model's: {model * 1e3:.0f} ms)")
    p["cost"] = {**p["cost"], "added_delay_s": needed - budget.playout_s}
    return _measured_numbers(run_dir, [*playouts, needed], budget)


def _set_measured(o: dict, got: dict, playout_s: float, budget: Budget, source: str) -> None:
    late = got["_miss"].get(playout_s)
    if late is None:   # the metric rounds its playout delays: the nearest
        key = min(got["_miss"], key=lambda k: abs(k - playout_s))
        late = got["_miss"][key]
    needed = got["needed_playout_s"]
    if o["kind"] == "playout" and late <= budget.late_fraction:
        needed = playout_s
    o["measured"] = {"mean_s": got["mean_s"], "p95_s": got["p95_s"], "p99_s": got["p99_s"], "playout_s": playout_s,
                     "late_fraction": late, "needed_playout_s": needed if needed is not None and math.isfinite(needed)
                     else None, "packets": got["packets"], "loss_rate": got["loss_rate"], "unstable": False}
    o["meets_budget"] = advice_ranking.meets(o["measured"], budget)
    o["source"] = source


def _ranking_note(model_order: list[str], measured_order: list[str]) -> str | None:
    """Say where the measured order of the measured options differs from the model's."""
    if model_order == measured_order:
        return None if not model_order else "the measurements keep the model's order of the options measured"
    swaps = [f"{a} above {b}" for i, a in enumerate(measured_order) for b in measured_order[i + 1:]
             if model_order.index(a) > model_order.index(b)]
    return "measured results override the model's ranking: " + "; ".join(swaps) + " (the model had them the other way)"

"""The main job (``tcpdelay evaluate``, ``make run``): the models over a default set of paths
and a short measured check on the testbed, handed part by part to a page (the CLI's writes one
HTML report: :class:`tcpdelay.report.evaluation_page.EvaluationPage`).

Each part is a function ``part(step) -> dict`` that computes its figures as plain data; it calls
``step(text)`` as it moves on (which RTT, which profile, which measured point), so the command
line can say what it is doing. Keys starting with ``_`` hold what only the page needs (a
figure's curves, a model object); the rest is the part's entry in the job's result (``--json``).
Parts are listed in :data:`PARTS` in the order the report shows them; :func:`evaluate` runs
them, hands each one's data to the page, and reports each start, step and end to its
``progress`` callback as a :class:`PartEvent`. Nothing here draws.
"""

from __future__ import annotations

import functools
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Protocol

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.model import throughput as tp
from tcpdelay.model.delay.stacks import DEFAULT_STACK, check_stack

#: The default paths: RTT 20/100/300 ms × loss 0/0.1/1/5 %.
DEFAULT_RTTS_S = (0.02, 0.1, 0.3)
DEFAULT_LOSSES = (0.0, 0.001, 0.01, 0.05)
MSS_BYTES = 1460

#: What a part calls as it moves on (one short phrase: "RTT 100 ms", "profile voip").
Step = Callable[[str], None]


def _no_step(text: str) -> None:
    pass


class Page(Protocol):
    """Where :func:`evaluate` puts the parts' results (the CLI's: the HTML report).

    ``add(name, data, step)`` is called once per part, in :data:`PARTS` order, with the part's
    data (private ``_`` keys included) and the part's ``step`` (to say what it draws);
    ``write(path)`` once at the end, returning the path written."""

    def add(self, name: str, data: dict, step: Step) -> None: ...

    def write(self, path: Path) -> Path: ...


def throughput_part(step: Step = _no_step) -> dict:
    """Steady-state throughput (PFTK, simplified PFTK, Mathis) for the default paths, in bit/s
    (MSS :data:`MSS_BYTES`, T0 = RTT + 200 ms; infinite without loss), and under ``_curves``
    the PFTK and Mathis throughput (Mb/s) against loss per RTT for the figure."""
    data = []
    step("table")
    for rtt in DEFAULT_RTTS_S:
        t0 = float(tp.default_t0_s(rtt))
        for p in DEFAULT_LOSSES:
            seg = {
                "pftk": float(tp.pftk_segments_per_s(p, rtt, t0)),
                "pftk_simple": float(tp.pftk_simple_segments_per_s(p, rtt, t0)),
                "mathis": float(tp.mathis_segments_per_s(p, rtt)),
            }
            bps = {k: float(tp.segments_to_bps(v, MSS_BYTES)) for k, v in seg.items()}
            data.append({"rtt_s": rtt, "loss": p, "t0_s": t0, **{f"{k}_bps": v for k, v in bps.items()}})
    return {"paths": data, "_curves": throughput_curves()}


def throughput_curves() -> list[dict]:
    """Per default RTT: loss probabilities ``loss`` (1e-4 to 0.3, log-spaced) and the PFTK and
    Mathis throughput there, ``pftk_mbps`` and ``mathis_mbps`` (Mb/s; MSS :data:`MSS_BYTES`)."""
    p = np.logspace(-4, np.log10(0.3), 200)
    curves = []
    for rtt in DEFAULT_RTTS_S:
        t0 = float(tp.default_t0_s(rtt))
        curves.append({"rtt_s": rtt, "loss": p,
                       "pftk_mbps": tp.segments_to_bps(tp.pftk_segments_per_s(p, rtt, t0), MSS_BYTES) / 1e6,
                       "mathis_mbps": tp.segments_to_bps(tp.mathis_segments_per_s(p, rtt), MSS_BYTES) / 1e6})
    return curves


#: Transfer sizes for the latency table (bytes).
LATENCY_SIZES_BYTES = (10_000, 100_000, 1_000_000)


def latency_part(step: Step = _no_step) -> dict:
    """Expected latency and its 90th percentile (Cardwell et al. eq 25 and Section II-E) of
    short transfers of :data:`LATENCY_SIZES_BYTES` over the default paths (seconds)."""
    from tcpdelay.model.latency import latency

    data = []
    for rtt in DEFAULT_RTTS_S:
        step(f"table, RTT {rtt * 1e3:g} ms")
        for p in DEFAULT_LOSSES:
            for size in LATENCY_SIZES_BYTES:
                res = latency(size, rtt, p, mss_bytes=MSS_BYTES)
                data.append({"size_bytes": size, "rtt_s": rtt, "loss": p,
                             "total_mean_s": res["total_mean_s"], "p90_s": res["percentiles_s"]["90"]})
    return {"transfers": data}


#: Profiles whose working regions the main job shows (each with its own criterion).
REGION_PROFILES = ("voip", "video")
#: Paths for the playout advice (RTT, loss).
PLAYOUT_PATHS = ((0.1, 0.01), (0.1, 0.02), (0.3, 0.01))


def regions_part(step: Step = _no_step, stack: str = DEFAULT_STACK) -> dict:
    """Working regions (Brosh et al. §6.1) of the default VoIP and video profiles: per profile
    its criterion and, per RTT, the largest loss that meets it. Under ``_regions`` the whole
    region (every cell) and under ``_profiles`` the profile, for the page."""
    from tcpdelay.model.delay import get_profile, working_region

    out: dict = {"stack": stack, "_regions": {}, "_profiles": {}}
    for name in REGION_PROFILES:
        step(f"profile {name}")
        out["_profiles"][name] = get_profile(name)
        region = out["_regions"][name] = working_region(name, stack=stack)
        out[name] = {k: region[k] for k in ("percentile", "bound_s", "max_loss_by_rtt", "cells")}
    return out


def playout_part(step: Step = _no_step, stack: str = DEFAULT_STACK) -> dict:
    """Playout-delay advice (Brosh et al. §6.6): L + RTT + 3/f and what it masks, for the voip
    profile on :data:`PLAYOUT_PATHS`. Under ``_figure`` the first stable path's advice with its
    late-fraction curve (None if every path is unstable)."""
    from tcpdelay.model.delay import playout_advice

    data = []
    figure = None
    for rtt, loss in PLAYOUT_PATHS:
        step(f"RTT {rtt * 1e3:g} ms, loss {loss * 100:g} %")
        adv = playout_advice("voip", rtt_s=rtt, loss=loss, stack=stack)
        adv.pop("prediction", None)
        curve = adv.pop("curve")
        data.append(adv)
        if figure is None and not adv["unstable"]:
            figure = {**adv, "curve": curve}
    return {"stack": stack, "voip": data, "_figure": figure}


#: The paths the advice part advises on: (label, profile, RTT, loss, budget (playout s, late
#: fraction) or None for the profile's criterion, Mahimahi trace whose mean rate is the bottleneck
#: or None). The cellular path is a measured LTE downlink (Mahimahi's Verizon-LTE-short trace,
#: data/links/mahimahi) at the RTT of the HSPA audio study's scenarios (60 ms).
ADVICE_PATHS = (
    ("VoIP call, RTT 100 ms, 2 % loss", "voip", 0.1, 0.02, (0.25, 0.05), None),
    ("live video, RTT 300 ms, 0.5 % loss", "video", 0.3, 0.005, None, None),
    ("interactive video on a cellular path (Verizon LTE downlink, Mahimahi trace), RTT 60 ms, 1 % loss",
     "ivideo", 0.06, 0.01, None, "data/links/mahimahi/Verizon-LTE-short.down"),
)


def trace_mean_bps(path: str | Path) -> float:
    """Mean rate of a Mahimahi trace (one 1500-byte delivery opportunity per line, in ms)."""
    from tcpdelay.wifi_trace import read_mahimahi

    ms = np.asarray(read_mahimahi(path), dtype=float)
    if ms.size == 0 or ms[-1] <= 0:
        raise ParameterError(f"{path}: an empty Mahimahi trace")
    return float(ms.size * 1500 * 8 / (ms[-1] / 1000.0))


def advice_part(step: Step = _no_step, stack: str = DEFAULT_STACK) -> dict:
    """Model-only advice (``tcpdelay advise``) on :data:`ADVICE_PATHS`: per path its ranked
    options (:func:`tcpdelay.experiments.advice_measurement.advise`) and whether the rate fits."""
    from tcpdelay.experiments.advice_measurement import advise
    from tcpdelay.model.advice_ranking import Budget
    from tcpdelay.model.delay import get_profile

    root = Path(__file__).resolve().parents[3]
    out = []
    for label, profile, rtt, loss, budget, trace in ADVICE_PATHS:
        step(label)
        if budget is None:
            crit = get_profile(profile).criterion
            b = Budget.from_percentile(crit.percentile, crit.bound_s)
        else:
            b = Budget(*budget)
        bottleneck = None if trace is None else trace_mean_bps(root / trace)
        res = advise(profile, rtt_s=rtt, loss=loss, budget=b, bottleneck_bps=bottleneck, stack=stack)
        out.append({"label": label, "trace": trace if bottleneck is not None else None, **res})
    return {"stack": stack, "paths": out}


def _measured_check(step: Step = _no_step, duration_s: float | None = None) -> dict:
    """A few model points measured on real Linux TCP through the testbed, when it can run here
    (see :mod:`tcpdelay.experiments.measured_check`; it says plainly when it cannot)."""
    from tcpdelay.experiments.measured_check import DURATION_S, run_measured_check

    return run_measured_check(step=step, duration_s=DURATION_S if duration_s is None else duration_s)


#: The parts in report order: (name in the JSON, title shown while it runs, function).
PARTS: list[tuple[str, str, Callable[..., dict]]] = [
    ("throughput", "steady-state TCP throughput (PFTK, Mathis)", throughput_part),
    ("latency", "latency of short TCP transfers (Cardwell et al.)", latency_part),
    ("regions", "working regions of media over TCP (Brosh et al.)", regions_part),
    ("playout", "playout delay for VoIP over TCP", playout_part),
    ("advice", "what to change: ranked options on typical paths", advice_part),
    ("measured_check", "model vs a short measurement on the testbed", _measured_check),
]


@dataclass(frozen=True)
class PartEvent:
    """What :func:`evaluate` tells its ``progress`` callback.

    ``kind`` is "start" (``text``: the part's title), "step" (``text``: what the part does now)
    or "done" (``text``: a short summary of what it found; ``elapsed_s`` set)."""

    kind: Literal["start", "step", "done"]
    index: int
    """1-based position of the part in :data:`PARTS`."""
    total: int
    name: str
    title: str
    text: str
    elapsed_s: float | None = None


def _summary(name: str, data: dict) -> str:
    """One line on what a part found (for the progress output, not the report)."""
    if name == "throughput":
        return f"{len(data['paths'])} paths"
    if name == "latency":
        return f"{len(data['transfers'])} transfers"
    if name == "regions":
        return ", ".join(k for k in data if k != "stack")
    if name == "playout":
        return f"{len(data['voip'])} paths"
    if name == "advice":
        return "; ".join(f"{p['options'][0]['name']} first" for p in data["paths"])
    if name == "measured_check":
        if not data["measured"]:
            return f"not measured: {data['reason']}"
        failed = len(data["failed"])
        return f"{len(data['points'])} points measured" + (f", {failed} runs failed" if failed else "")
    return ""


#: The page's file name in ``out_dir``.
REPORT_FILE = "report.html"


def public(data: dict) -> dict:
    """A part's data without the keys only its page needs (those starting with ``_``)."""
    return {k: v for k, v in data.items() if not k.startswith("_")}


#: The parts that run the delay model, and so follow ``stack``.
STACK_PARTS = ("regions", "playout", "advice")


def evaluate(out_dir: str | Path, progress: Callable[[PartEvent], None] | None = None, *,
             page: Page | None = None, check_duration_s: float | None = None,
             stack: str = DEFAULT_STACK) -> dict:
    """Run every part and return their data (without private keys), keyed by part name; with
    ``page``, hand each part's data to ``page.add`` as it finishes (within the part's progress,
    so its drawing counts in the part's time), then write ``out_dir/report.html`` with
    ``page.write`` (``report_path``: the path it returns).

    ``check_duration_s``: seconds of media per point of the measured check (default
    :data:`tcpdelay.experiments.measured_check.DURATION_S`; 0 leaves the check out, saying so
    in the result). ``stack``: whose loss recovery the delay model follows in the regions,
    playout and advice parts (:mod:`tcpdelay.model.delay.stacks`)."""
    check_stack(stack)
    out = _writable_dir(out_dir) if page is not None else Path(out_dir)
    result: dict = {}
    total = len(PARTS)
    for index, (name, title, part) in enumerate(PARTS, 1):
        tell = functools.partial(_tell, progress, index, total, name, title)
        tell("start", title)
        t0 = time.monotonic()
        step = functools.partial(tell, "step")
        if name == "measured_check":
            data = part(step, check_duration_s)
        elif name in STACK_PARTS:
            data = part(step, stack=stack)
        else:
            data = part(step)
        if page is not None:
            page.add(name, data, step)
        result[name] = public(data)
        tell("done", _summary(name, result[name]), time.monotonic() - t0)
    if page is not None:
        try:
            path = page.write(out / REPORT_FILE)
        except OSError as err:  # e.g. the disk filled up during the run: one line, as report does
            raise ParameterError(f"--out: cannot write {str(out / REPORT_FILE)!r}: {err.strerror or err}") from None
        result["report_path"] = str(path)
    return result


def _tell(progress: Callable[[PartEvent], None] | None, index: int, total: int, name: str, title: str,
          kind: str, text: str, elapsed_s: float | None = None) -> None:
    if progress is not None:
        progress(PartEvent(kind, index, total, name, title, text, elapsed_s))  # type: ignore[arg-type]


def _writable_dir(out_dir: str | Path) -> Path:
    """``out_dir``, created; a directory the report cannot go in is bad input, found before
    the minute of work rather than after it."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise ParameterError(f"--out: cannot write to {str(out)!r}: {err.strerror or err}") from None
    return out

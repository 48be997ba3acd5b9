"""The main job (``tcpdelay evaluate``, ``make run``): the models over a default set of paths,
as tables and plots in one HTML report, and a short measured check on the testbed.

Each part is a function ``part(report, step) -> dict`` that adds a section to the report and
returns the same figures as plain data for ``--json``; it calls ``step(text)`` as it moves on
(which RTT, which profile, which measured point), so the command line can say what it is doing.
Parts are listed in :data:`PARTS` in the order the report shows them; :func:`evaluate` runs
them and reports each start, step and end to its ``progress`` callback as a :class:`PartEvent`.
"""

from __future__ import annotations

import functools
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.model import throughput as tp
from tcpdelay.report.html import Report

#: The default paths: RTT 20/100/300 ms × loss 0/0.1/1/5 %.
DEFAULT_RTTS_S = (0.02, 0.1, 0.3)
DEFAULT_LOSSES = (0.0, 0.001, 0.01, 0.05)
MSS_BYTES = 1460

#: What a part calls as it moves on (one short phrase: "RTT 100 ms", "profile voip").
Step = Callable[[str], None]


def _no_step(text: str) -> None:
    pass


def throughput_part(report: Report, step: Step = _no_step) -> dict:
    """Steady-state throughput (PFTK, simplified PFTK, Mathis) for the default paths."""
    rows, data = [], []
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
            rows.append([f"{rtt * 1e3:g} ms", f"{p * 100:g} %",
                         *(("unlimited" if not np.isfinite(v) else f"{v / 1e6:.3g}") for v in bps.values())])

    sec = report.section("Steady-state TCP throughput")
    sec.paragraph(
        "Bulk TCP throughput predicted by the full model of Padhye, Firoiu, Towsley and Kurose "
        "(PFTK, with timeouts; T0 = RTT + 200 ms, the Linux RTO), its simplified form used by TFRC "
        f"(RFC 5348 §3.1) and the square-root law of Mathis et al.; MSS {MSS_BYTES} bytes, "
        "one segment per ACK, no receiver-window limit. With no loss the models are unbounded.")
    sec.table(["RTT", "loss", "PFTK Mb/s", "PFTK simple Mb/s", "Mathis Mb/s"], rows)
    step("figure")
    sec.figure(_throughput_figure(), "Throughput against loss for each RTT (log-log).")
    return {"paths": data}


def _throughput_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = np.logspace(-4, np.log10(0.3), 200)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for rtt, color in zip(DEFAULT_RTTS_S, ("tab:blue", "tab:orange", "tab:green")):
        t0 = float(tp.default_t0_s(rtt))
        ax.loglog(p, tp.segments_to_bps(tp.pftk_segments_per_s(p, rtt, t0), MSS_BYTES) / 1e6,
                  color=color, label=f"PFTK, RTT {rtt * 1e3:g} ms")
        ax.loglog(p, tp.segments_to_bps(tp.mathis_segments_per_s(p, rtt), MSS_BYTES) / 1e6,
                  color=color, linestyle="--", label=f"Mathis, RTT {rtt * 1e3:g} ms")
    ax.set_xlabel("loss probability p")
    ax.set_ylabel("throughput (Mb/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


#: Transfer sizes for the latency table (bytes).
LATENCY_SIZES_BYTES = (10_000, 100_000, 1_000_000)


def latency_part(report: Report, step: Step = _no_step) -> dict:
    """Expected latency and its 90th percentile (Cardwell et al. eq 25 and Section II-E) of
    short transfers over the default paths, and latency/throughput against size per RTT."""
    from tcpdelay.model.latency import latency
    from tcpdelay.report.latency_plots import plot_latency_vs_size

    rows, data = [], []
    for rtt in DEFAULT_RTTS_S:
        step(f"table, RTT {rtt * 1e3:g} ms")
        for p in DEFAULT_LOSSES:
            row = [f"{rtt * 1e3:g} ms", f"{p * 100:g} %"]
            for size in LATENCY_SIZES_BYTES:
                res = latency(size, rtt, p, mss_bytes=MSS_BYTES)
                data.append({"size_bytes": size, "rtt_s": rtt, "loss": p,
                             "total_mean_s": res["total_mean_s"], "p90_s": res["percentiles_s"]["90"]})
                row.append(f"{res['total_mean_s']:.3g} / {res['percentiles_s']['90']:.3g}")
            rows.append(row)

    sec = report.section("Latency of short TCP transfers")
    sec.paragraph(
        "Expected time to open a connection and transfer a file (mean / 90th percentile, seconds), "
        "from the model of Cardwell, Savage and Anderson, 'Modeling TCP Latency' (INFOCOM 2000): "
        "handshake (eqs 1-4), slow start (eq 15), first loss (eq 20), the remainder at the PFTK "
        "rate (eq 24) and the distribution over loss scenarios (Section II-E). Initial window 10 "
        "segments, T0 = RTT + 200 ms, SYN timeout 1 s, no delayed ACKs.")
    sec.table(["RTT", "loss", *(f"{s / 1e3:g} kB (s)" for s in LATENCY_SIZES_BYTES)], rows)
    with tempfile.TemporaryDirectory() as tmp:
        for rtt in DEFAULT_RTTS_S:
            step(f"figure, RTT {rtt * 1e3:g} ms")
            png = Path(tmp) / f"lat-{rtt}.png"
            plot_latency_vs_size(png, rtt_s=rtt, loss=0.01, mss_bytes=MSS_BYTES, max_bytes=1e8)
            sec.png(png.read_bytes(), f"RTT {rtt * 1e3:g} ms, loss 1 %: latency and effective "
                                      "throughput against transfer size, next to the steady-state models "
                                      "(Cardwell et al. Fig 2).")
    return {"transfers": data}


#: Profiles whose working regions the main job shows (each with its own criterion).
REGION_PROFILES = ("voip", "video")
#: Paths for the playout advice (RTT, loss).
PLAYOUT_PATHS = ((0.1, 0.01), (0.1, 0.02), (0.3, 0.01))


def _png_of(plot, *args) -> bytes:
    """Run a ``plot(..., path)`` function into a temporary PNG and return its bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "figure.png"
        plot(*args, path)
        return path.read_bytes()


def regions_part(report: Report, step: Step = _no_step) -> dict:
    """Working regions (Brosh et al. §6.1) of the default VoIP and video profiles."""
    from tcpdelay.model.delay import get_profile, working_region
    from tcpdelay.report.delay_plots import plot_region

    sec = report.section("Working regions of media over TCP")
    sec.paragraph(
        "Where a constant-bit-rate source over TCP meets its delay criterion, by the Markov-chain "
        "model of Brosh, Baset, Misra, Rubenstein and Schulzrinne, 'The Delay-Friendliness of TCP "
        "for Real-Time Traffic' (Section 4 and Appendix A; working regions as in §6.1): per RTT, "
        "the largest configured loss rate at which the criterion still holds. 'unstable' means "
        "TCP's achievable throughput (PFTK) does not exceed the media rate, so delay grows "
        "without bound. T0 = RTT + 200 ms, random loss, limited transmit on.")
    out = {}
    for name in REGION_PROFILES:
        step(f"profile {name}")
        prof = get_profile(name)
        region = working_region(name)
        rows = []
        for rtt in region["rtts_s"]:
            cells = sorted((c for c in region["cells"] if c["rtt_s"] == rtt), key=lambda c: c["loss"])
            best = next(m["max_loss"] for m in region["max_loss_by_rtt"] if m["rtt_s"] == rtt)
            rows.append([f"{rtt * 1e3:g} ms", "none" if best is None else f"{best * 100:g} %",
                         *(("unstable" if c["unstable"] else f"{c['value_s']:.3g}") for c in cells)])
        sec.table(["RTT", "works up to", *(f"{p * 100:g} %" for p in region["losses"])], rows,
                  caption=f"{name} ({prof.rate_bps / 1e3:g} kb/s, {prof.packet_bytes} B packets): "
                          f"{region['percentile']:g}th percentile delay (s) against loss; "
                          f"criterion ≤ {region['bound_s']:g} s")
        sec.png(_png_of(plot_region, region), f"Working region of {name}.")
        out[name] = {k: region[k] for k in ("percentile", "bound_s", "max_loss_by_rtt", "cells")}
    return out


def _percent(fraction: float) -> str:
    """A fraction as a percentage that keeps small values visible (1.4e-05 %, not 0.00 %)."""
    pct = fraction * 100
    return f"{pct:.3g} %" if pct >= 0.01 or pct == 0 else f"{pct:.2g} %"


def playout_part(report: Report, step: Step = _no_step) -> dict:
    """Playout-delay advice (Brosh et al. §6.6): L + RTT + 3/f and what it masks."""
    from tcpdelay.model.delay import playout_advice
    from tcpdelay.report.delay_plots import plot_late_fraction

    sec = report.section("Playout delay for VoIP over TCP")
    sec.paragraph(
        "A fixed playout delay of L + RTT + 3/f (one-way delay, one round trip and three packet "
        "intervals: the time fast retransmit needs) hides most of TCP's retransmission delay "
        "(Brosh et al. §6.6, Figs 23-24). The table gives the late fraction at that delay and "
        "the share of TCP-delayed packets it masks, for the voip profile.")
    rows, data = [], []
    figure = None
    for rtt, loss in PLAYOUT_PATHS:
        step(f"RTT {rtt * 1e3:g} ms, loss {loss * 100:g} %")
        adv = playout_advice("voip", rtt_s=rtt, loss=loss)
        adv.pop("prediction", None)
        curve = adv.pop("curve")
        data.append(adv)
        if adv["unstable"]:
            rows.append([f"{rtt * 1e3:g} ms", f"{loss * 100:g} %", f"{adv['recommended_playout_s'] * 1e3:.0f}",
                         "unstable", "—"])
            continue
        rows.append([f"{rtt * 1e3:g} ms", f"{loss * 100:g} %", f"{adv['recommended_playout_s'] * 1e3:.0f}",
                     _percent(adv["late_fraction_at_recommended"]),
                     _percent(adv["masked_tcp_delay_fraction"])])
        if figure is None:
            figure = ({**adv, "curve": curve}, f"Late fraction against playout delay, voip, RTT {rtt * 1e3:g} ms, "
                                               f"loss {loss * 100:g} % (Fig 23).")
    sec.table(["RTT", "loss", "recommended playout (ms)", "late at recommended", "TCP delay masked"], rows)
    if figure is not None:
        sec.png(_png_of(plot_late_fraction, figure[0]), figure[1])
    return {"voip": data}


def _measured_check(report: Report, step: Step = _no_step, duration_s: float | None = None) -> dict:
    """A few model points measured on real Linux TCP through the testbed, when it can run here
    (see :mod:`tcpdelay.experiments.measured_check`; it says plainly when it cannot)."""
    from tcpdelay.experiments.measured_check import DURATION_S, measured_check_part

    return measured_check_part(report, step=step, duration_s=DURATION_S if duration_s is None else duration_s)


#: The parts in report order: (name in the JSON, title shown while it runs, function).
PARTS: list[tuple[str, str, Callable[..., dict]]] = [
    ("throughput", "steady-state TCP throughput (PFTK, Mathis)", throughput_part),
    ("latency", "latency of short TCP transfers (Cardwell et al.)", latency_part),
    ("regions", "working regions of media over TCP (Brosh et al.)", regions_part),
    ("playout", "playout delay for VoIP over TCP", playout_part),
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
        return ", ".join(data)
    if name == "playout":
        return f"{len(data['voip'])} paths"
    if name == "measured_check":
        if not data["measured"]:
            return f"not measured: {data['reason']}"
        failed = len(data["failed"])
        return f"{len(data['points'])} points measured" + (f", {failed} runs failed" if failed else "")
    return ""


def evaluate(out_dir: str | Path, progress: Callable[[PartEvent], None] | None = None, *,
             check_duration_s: float | None = None) -> dict:
    """Run every part, write ``out_dir/report.html`` and return the parts' data.

    ``check_duration_s``: seconds of media per point of the measured check (default
    :data:`tcpdelay.experiments.measured_check.DURATION_S`; 0 leaves the check out, saying so
    in the report)."""
    out = _writable_dir(out_dir)
    report = Report("tcpdelay evaluation")
    result: dict = {}
    total = len(PARTS)
    for index, (name, title, part) in enumerate(PARTS, 1):
        tell = functools.partial(_tell, progress, index, total, name, title)
        tell("start", title)
        t0 = time.monotonic()
        step = functools.partial(tell, "step")
        if name == "measured_check":
            data = part(report, step, check_duration_s)
        else:
            data = part(report, step)
        result[name] = data
        tell("done", _summary(name, data), time.monotonic() - t0)
    try:
        path = report.write(out / "report.html")
    except OSError as err:  # e.g. the disk filled up during the run: one line, as report does
        raise ParameterError(f"--out: cannot write {str(out / 'report.html')!r}: {err.strerror or err}") from None
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

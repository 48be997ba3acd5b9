"""The main job's page (``tcpdelay evaluate``, ``make run``: ``out/report.html``): one section per
part of :mod:`tcpdelay.experiments.evaluate` — steady-state throughput, latency of short
transfers, working regions, playout delay and the short measured check — drawn from the data the
part computed (tables, paragraphs and figures). The CLI passes an :class:`EvaluationPage` to
:func:`tcpdelay.experiments.evaluate.evaluate` as its ``page``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from tcpdelay.experiments import measured_check as mc
from tcpdelay.experiments.evaluate import LATENCY_SIZES_BYTES, MSS_BYTES, Step
from tcpdelay.experiments.validation import TABLE_COLUMNS, table_rows
from tcpdelay.report.html import Report

TITLE = "tcpdelay evaluation"


class EvaluationPage:
    """The report the parts' sections go in: ``add(name, data, step)`` draws the part's section
    (telling ``step`` which figure it draws), ``write(path)`` writes the HTML."""

    def __init__(self, title: str = TITLE):
        self.report = Report(title)

    def add(self, name: str, data: dict, step: Step) -> None:
        SECTIONS[name](self.report, data, step)

    def write(self, path: str | Path) -> Path:
        return self.report.write(path)


def _no_step(text: str) -> None:
    pass


def throughput_section(report: Report, data: dict, step: Step = _no_step) -> None:
    """The table of :func:`tcpdelay.experiments.evaluate.throughput_part` (Mb/s) and its
    throughput-against-loss figure."""
    rows = [[f"{d['rtt_s'] * 1e3:g} ms", f"{d['loss'] * 100:g} %",
             *(("unlimited" if not np.isfinite(v) else f"{v / 1e6:.3g}")
               for v in (d["pftk_bps"], d["pftk_simple_bps"], d["mathis_bps"]))]
            for d in data["paths"]]
    sec = report.section("Steady-state TCP throughput")
    sec.paragraph(
        "Bulk TCP throughput predicted by the full model of Padhye, Firoiu, Towsley and Kurose "
        "(PFTK, with timeouts; T0 = RTT + 200 ms, the Linux RTO), its simplified form used by TFRC "
        f"(RFC 5348 §3.1) and the square-root law of Mathis et al.; MSS {MSS_BYTES} bytes, "
        "one segment per ACK, no receiver-window limit. With no loss the models are unbounded.")
    sec.table(["RTT", "loss", "PFTK Mb/s", "PFTK simple Mb/s", "Mathis Mb/s"], rows)
    step("figure")
    sec.figure(_throughput_figure(data["_curves"]), "Throughput against loss for each RTT (log-log).")


def _throughput_figure(curves: list[dict]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for c, color in zip(curves, ("tab:blue", "tab:orange", "tab:green")):
        ax.loglog(c["loss"], c["pftk_mbps"], color=color, label=f"PFTK, RTT {c['rtt_s'] * 1e3:g} ms")
        ax.loglog(c["loss"], c["mathis_mbps"], color=color, linestyle="--",
                  label=f"Mathis, RTT {c['rtt_s'] * 1e3:g} ms")
    ax.set_xlabel("loss probability p")
    ax.set_ylabel("throughput (Mb/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def latency_section(report: Report, data: dict, step: Step = _no_step) -> None:
    """The table of :func:`tcpdelay.experiments.evaluate.latency_part` (mean / 90th percentile
    per size, one row per path) and latency/throughput against size per RTT at 1 % loss."""
    from tcpdelay.report.latency_plots import plot_latency_vs_size

    by_path: dict[tuple[float, float], list[dict]] = {}
    for t in data["transfers"]:
        by_path.setdefault((t["rtt_s"], t["loss"]), []).append(t)
    rows = [[f"{rtt * 1e3:g} ms", f"{p * 100:g} %", *(f"{t['total_mean_s']:.3g} / {t['p90_s']:.3g}" for t in ts)]
            for (rtt, p), ts in by_path.items()]
    rtts = list(dict.fromkeys(rtt for rtt, _ in by_path))
    sec = report.section("Latency of short TCP transfers")
    sec.paragraph(
        "Expected time to open a connection and transfer a file (mean / 90th percentile, seconds), "
        "from the model of Cardwell, Savage and Anderson, 'Modeling TCP Latency' (INFOCOM 2000): "
        "handshake (eqs 1-4), slow start (eq 15), first loss (eq 20), the remainder at the PFTK "
        "rate (eq 24) and the distribution over loss scenarios (Section II-E). Initial window 10 "
        "segments, T0 = RTT + 200 ms, SYN timeout 1 s, no delayed ACKs.")
    sec.table(["RTT", "loss", *(f"{s / 1e3:g} kB (s)" for s in LATENCY_SIZES_BYTES)], rows)
    with tempfile.TemporaryDirectory() as tmp:
        for rtt in rtts:
            step(f"figure, RTT {rtt * 1e3:g} ms")
            png = Path(tmp) / f"lat-{rtt}.png"
            plot_latency_vs_size(png, rtt_s=rtt, loss=0.01, mss_bytes=MSS_BYTES, max_bytes=1e8)
            sec.png(png.read_bytes(), f"RTT {rtt * 1e3:g} ms, loss 1 %: latency and effective "
                                      "throughput against transfer size, next to the steady-state models "
                                      "(Cardwell et al. Fig 2).")


def _png_of(plot: Callable, *args) -> bytes:
    """Run a ``plot(..., path)`` function into a temporary PNG and return its bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "figure.png"
        plot(*args, path)
        return path.read_bytes()


def regions_section(report: Report, data: dict, step: Step = _no_step) -> None:
    """Per profile of :func:`tcpdelay.experiments.evaluate.regions_part`: the delay percentile
    against RTT and loss, where the criterion holds, and the working-region map."""
    from tcpdelay.report.delay_plots import plot_region

    sec = report.section("Working regions of media over TCP")
    sec.paragraph(
        "Where a constant-bit-rate source over TCP meets its delay criterion, by the Markov-chain "
        "model of Brosh, Baset, Misra, Rubenstein and Schulzrinne, 'The Delay-Friendliness of TCP "
        "for Real-Time Traffic' (Section 4 and Appendix A; working regions as in §6.1): per RTT, "
        "the largest configured loss rate at which the criterion still holds. 'unstable' means "
        "TCP's achievable throughput (PFTK) does not exceed the media rate, so delay grows "
        "without bound. T0 = RTT + 200 ms, random loss, limited transmit on.")
    for name, region in data["_regions"].items():
        prof = data["_profiles"][name]
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


def _percent(fraction: float) -> str:
    """A fraction as a percentage that keeps small values visible (1.4e-05 %, not 0.00 %)."""
    pct = fraction * 100
    return f"{pct:.3g} %" if pct >= 0.01 or pct == 0 else f"{pct:.2g} %"


def playout_section(report: Report, data: dict, step: Step = _no_step) -> None:
    """The advice of :func:`tcpdelay.experiments.evaluate.playout_part` per path and the late
    fraction against playout delay on the first stable one (Brosh et al. Fig 23)."""
    from tcpdelay.report.delay_plots import plot_late_fraction

    sec = report.section("Playout delay for VoIP over TCP")
    sec.paragraph(
        "A fixed playout delay of L + RTT + 3/f (one-way delay, one round trip and three packet "
        "intervals: the time fast retransmit needs) hides most of TCP's retransmission delay "
        "(Brosh et al. §6.6, Figs 23-24). The table gives the late fraction at that delay and "
        "the share of TCP-delayed packets it masks, for the voip profile.")
    rows = []
    for adv in data["voip"]:
        path = [f"{adv['rtt_s'] * 1e3:g} ms", f"{adv['loss'] * 100:g} %", f"{adv['recommended_playout_s'] * 1e3:.0f}"]
        if adv["unstable"]:
            rows.append([*path, "unstable", "—"])
        else:
            rows.append([*path, _percent(adv["late_fraction_at_recommended"]),
                         _percent(adv["masked_tcp_delay_fraction"])])
    sec.table(["RTT", "loss", "recommended playout (ms)", "late at recommended", "TCP delay masked"], rows)
    figure = data["_figure"]
    if figure is not None:
        sec.png(_png_of(plot_late_fraction, figure),
                f"Late fraction against playout delay, voip, RTT {figure['rtt_s'] * 1e3:g} ms, "
                f"loss {figure['loss'] * 100:g} % (Fig 23).")


def advice_section(report: Report, data: dict, step: Step = _no_step) -> None:
    """Per path of :func:`tcpdelay.experiments.evaluate.advice_part`: the ranked options with
    numbers (``tcpdelay advise``), whether the rate fits, and what only measurement can say."""
    sec = report.section("What to change: advice for typical paths")
    sec.paragraph(
        "The options of Brosh, Baset, Misra, Rubenstein and Schulzrinne, 'The Delay-Friendliness of TCP "
        "for Real-Time Traffic' (playout delay L + RTT + 3/f, §6.6; split-N, §7.1; blind parallel "
        "connections, §7.2; a byte-limited queue, §6.5; TCP settings, §8.1) and UDP, each predicted by "
        "the delay model with the same settings as `tcpdelay delay`, ranked: those that meet the budget "
        "first, then by the playout delay each needs to keep the late fraction within it. Options the "
        "model cannot quantify are listed without numbers; `tcpdelay advise --measure` runs them "
        "(docs/advise.md).")
    for p in data["paths"]:
        step(p["label"])
        b = p["budget"]
        rows = []
        unquantified = []
        for o in p["options"]:
            num = o["predicted"]
            if num is None:
                unquantified.append(o["name"])
                continue
            if num["unstable"]:
                rows.append([str(o["rank"]), o["name"], "unstable", "—", "—", "100 %", "—", "no", o["source"]])
                continue
            rows.append([str(o["rank"]), o["name"], *(f"{num[k] * 1e3:.0f}" if num[k] is not None else "—"
                                                      for k in ("mean_s", "p95_s", "p99_s")),
                         _percent(num["late_fraction"]) + (f" at {num['playout_s'] * 1e3:.0f} ms"
                                                           if abs(num["playout_s"] - b["playout_s"]) > 1e-12 else ""),
                         "—" if num["needed_playout_s"] is None else f"{num['needed_playout_s'] * 1e3:.0f}",
                         "yes" if o["meets_budget"] else "no", o["source"]])
        src = p["source"]
        trace = f"; bottleneck {p['path']['bottleneck_bps'] / 1e6:.3g} Mb/s, the mean of {p['trace']}" \
            if p.get("trace") else ""
        sec.table(["#", "option", "mean (ms)", "p95 (ms)", "p99 (ms)", "late", "needs playout (ms)", "meets",
                   "source"], rows,
                  caption=f"{p['label']}: {src['profile']} ({src['rate_bps'] / 1e3:.3g} kb/s){trace}; budget at "
                          f"most {_percent(b['late_fraction'])} later than {b['playout_s'] * 1e3:.0f} ms. "
                          f"{p['fit']['message']}.")
        if unquantified:
            sec.paragraph("Only a measurement can say: " + ", ".join(unquantified) + ".", note=True)


#: The measured check's table: the validation's columns (:data:`TABLE_COLUMNS`) but the runs
#: per point (one), the TCP-level mean's relative error and PFTK / rate.
_CHECK_COLUMNS = [0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19]
#: Of those, the columns left out when every point has the same value (the profile, the RTT).
_CHECK_SHARED = (0, 2)


def measured_check_section(report: Report, data: dict, step: Step = _no_step) -> None:
    """The short measured check (:func:`tcpdelay.experiments.measured_check.run_measured_check`):
    measured and model delay side by side, or why it did not measure."""
    sec = report.section("Model vs a short measurement on the testbed")
    why = data["_why"]
    if why == mc.LEFT_OUT or why == mc.REFUSED:
        sec.paragraph(f"Not measured: {data['reason']}.", note=True)
        return
    if why == mc.NO_TESTBED:
        sec.paragraph(f"Not measured: the testbed cannot run on this machine — {data['reason']}. The model "
                      "figures above do not depend on it; run `make run` as root on Linux with "
                      "/dev/net/tun (and the emulator built by `make native`) to add this check.", note=True)
        return
    sec.paragraph(
        f"VoIP (64 kb/s, 174-byte packets every 20 ms) over real Linux TCP in network namespaces, "
        f"across the tcpdelay-link emulator with RTT {mc.RTT_S * 1e3:g} ms and random drops of data "
        f"segments; one {data['duration_s']:g} s run per point ({data['wall_s']:.0f} s in all), beside the "
        "model of Brosh et al. (Section 4) for the same profile, RTT and loss (T0 = RTT + 200 ms). A run "
        "this short sees only a handful of drops, so expect tens of percent between the two on the 95th "
        "percentile and the standard deviation; `tcpdelay validate` is the real comparison "
        "(docs/experiments/validate-5.1.md).")
    if data["failed"]:
        sec.paragraph("Failed runs: " + "; ".join(f"{f['label']}: {f['error']}" for f in data["failed"]),
                      note=True)
    rows = table_rows(data["points"])
    # the profile and the RTT are every point's (the paragraph gives them): as columns they made
    # the table wider than a 1280-pixel screen, the first one 12 rem wide for "voip"
    cols = [i for i in _CHECK_COLUMNS if i not in _CHECK_SHARED or len({r[i] for r in rows}) > 1]
    sec.table([TABLE_COLUMNS[i] for i in cols], [[r[i] for i in cols] for r in rows])


#: Each part's section, by the part's name in :data:`tcpdelay.experiments.evaluate.PARTS`.
SECTIONS: dict[str, Callable[[Report, dict, Step], None]] = {
    "throughput": throughput_section,
    "latency": latency_section,
    "regions": regions_section,
    "playout": playout_section,
    "advice": advice_section,
    "measured_check": measured_check_section,
}

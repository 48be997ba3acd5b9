"""The main job (``tcpdelay evaluate``, ``make run``): the models over a default set of paths,
as tables and plots in one HTML report.

Each part is a function ``part(report) -> dict`` that adds a section to the report and returns
the same figures as plain data for ``--json``. Parts are listed in :data:`PARTS` in the order
the report shows them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from tcpdelay.model import throughput as tp
from tcpdelay.report.html import Report

#: The default paths: RTT 20/100/300 ms × loss 0/0.1/1/5 %.
DEFAULT_RTTS_S = (0.02, 0.1, 0.3)
DEFAULT_LOSSES = (0.0, 0.001, 0.01, 0.05)
MSS_BYTES = 1460


def throughput_part(report: Report) -> dict:
    """Steady-state throughput (PFTK, simplified PFTK, Mathis) for the default paths."""
    rows, data = [], []
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


def latency_part(report: Report) -> dict:
    """Expected latency and its 90th percentile (Cardwell et al. eq 25 and Section II-E) of
    short transfers over the default paths, and latency/throughput against size per RTT."""
    import tempfile

    from tcpdelay.model.latency import latency
    from tcpdelay.report.latency_plots import plot_latency_vs_size

    rows, data = [], []
    for rtt in DEFAULT_RTTS_S:
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
            png = Path(tmp) / f"lat-{rtt}.png"
            plot_latency_vs_size(png, rtt_s=rtt, loss=0.01, mss_bytes=MSS_BYTES, max_bytes=1e8)
            sec.png(png.read_bytes(), f"RTT {rtt * 1e3:g} ms, loss 1 %: latency and effective "
                                      "throughput against transfer size, next to the steady-state models "
                                      "(Cardwell et al. Fig 2).")
    return {"transfers": data}


PARTS: list[tuple[str, Callable[[Report], dict]]] = [
    ("throughput", throughput_part),
    ("latency", latency_part),
]


def evaluate(out_dir: str | Path, progress: Callable[[str], None] | None = None) -> dict:
    """Run every part, write ``out_dir/report.html`` and return the parts' data."""
    report = Report("tcpdelay evaluation")
    result: dict = {}
    for name, part in PARTS:
        if progress:
            progress(name)
        result[name] = part(report)
    path = report.write(Path(out_dir) / "report.html")
    result["report_path"] = str(path)
    return result

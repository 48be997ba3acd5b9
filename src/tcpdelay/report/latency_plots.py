"""Figure: TCP latency and effective throughput against transfer size (Cardwell et al. Fig 2).

Cardwell, Savage, Anderson, "Modeling TCP Latency", INFOCOM 2000, Fig 2 compares the throughput
of transfers of increasing size predicted by the latency model (eq 25) with the steady-state
models (PFTK eq 22 and Mathis). This draws that figure for one path, with the expected latency
(transfer alone and handshake + transfer) in a first panel.

Matplotlib without pyplot (no global state; the Agg/SVG/PDF canvas is picked from the file's
extension).
"""

from __future__ import annotations

import math
import os

import numpy as np
from matplotlib.figure import Figure

from tcpdelay.errors import ParameterError
from tcpdelay.model import latency as lat
from tcpdelay.model import throughput as tp

FORMATS = (".png", ".svg", ".pdf")


def size_grid_bytes(mss_bytes: float, max_bytes: float = 1e8, points: int = 160) -> np.ndarray:
    """Transfer sizes of whole segments, from one segment to about ``max_bytes``, evenly spaced
    on a log axis (whole segments, so the curves show no rounding sawtooth)."""
    top = max(max_bytes / mss_bytes, 10.0)
    return np.unique(np.round(np.logspace(0.0, math.log10(top), points))) * mss_bytes


def plot_latency_vs_size(
    path,
    *,
    rtt_s: float,
    loss: float,
    mss_bytes: float = lat.DEFAULT_MSS_BYTES,
    mark_size_bytes: float | None = None,
    max_bytes: float = 1e8,
    **model_kwargs,
) -> str:
    """Write the figure to ``path`` (.png, .svg or .pdf) and return the path.

    ``model_kwargs`` are passed to :func:`tcpdelay.model.latency.expected_latency_s`
    (``loss_reverse``, ``t0_s``, ``init_window``, ``acks_per_segment``, ``max_window``,
    ``delayed_ack``, ``syn_timeout_s``, ...). ``mark_size_bytes`` draws a vertical line at the
    transfer size the user asked about.
    """
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in FORMATS:
        raise ParameterError(f"plot: {path!s} must end in one of {', '.join(FORMATS)}")
    folder = os.path.dirname(os.path.abspath(str(path)))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        raise ParameterError(f"plot: cannot write {path!s}: {err.strerror or err}") from None
    sizes = size_grid_bytes(mss_bytes, max(max_bytes, 10 * (mark_size_bytes or 0)))
    transfer = lat.expected_latency_s(sizes, rtt_s, loss, mss_bytes=mss_bytes, handshake_included=False, **model_kwargs)
    total = lat.expected_latency_s(sizes, rtt_s, loss, mss_bytes=mss_bytes, **model_kwargs)

    b = model_kwargs.get("acks_per_segment", lat.tr.DEFAULT_ACKS_PER_SEGMENT)
    w_max = model_kwargs.get("max_window", math.inf)
    w_max = math.inf if w_max is None else w_max
    t0 = model_kwargs.get("t0_s") or float(tp.default_t0_s(rtt_s))
    to_bps = 8.0 * mss_bytes
    steady = {
        "PFTK steady state (eq 22)": float(tp.pftk_segments_per_s(loss, rtt_s, t0, b, w_max)) * to_bps,
        "Mathis et al.": float(tp.mathis_segments_per_s(loss, rtt_s, b)) * to_bps,
        "TFRC simplified PFTK": float(tp.pftk_simple_segments_per_s(loss, rtt_s, t0, b)) * to_bps,
    }

    fig = Figure(figsize=(10, 4.2), layout="constrained")
    ax_t, ax_r = fig.subplots(1, 2)
    ax_t.loglog(sizes, transfer, color="C0", label="transfer (eq 25)")
    ax_t.loglog(sizes, total, color="C1", label="handshake + transfer")
    ax_t.set_xlabel("transfer size (bytes)")
    ax_t.set_ylabel("expected latency (s)")
    ax_t.set_title("Latency")

    ax_r.loglog(sizes, 8.0 * sizes / transfer, color="C0", label="latency model, transfer (eq 25)")
    ax_r.loglog(sizes, 8.0 * sizes / total, color="C1", label="latency model, with handshake")
    for (name, bps), style in zip(steady.items(), ("--", ":", "-.")):
        if math.isfinite(bps):
            ax_r.axhline(bps, linestyle=style, color="grey", label=name)
    ax_r.set_xlabel("transfer size (bytes)")
    ax_r.set_ylabel("effective throughput (bit/s)")
    ax_r.set_title("Throughput = size / latency")
    for ax in (ax_t, ax_r):
        if mark_size_bytes:
            ax.axvline(mark_size_bytes, color="black", linewidth=0.8, alpha=0.5)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(
        f"RTT {rtt_s * 1e3:g} ms, loss {loss * 100:g} %, MSS {mss_bytes:g} B "
        f"(Cardwell, Savage, Anderson, Modeling TCP Latency, Fig 2)",
        fontsize="medium",
    )
    try:
        fig.savefig(path, dpi=120)
    except OSError as err:
        raise ParameterError(f"plot: cannot write {path!s}: {err.strerror or err}") from None
    return str(path)

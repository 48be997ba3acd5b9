"""``tcpdelay throughput``: steady-state TCP throughput by PFTK (full and simple) and Mathis."""

from __future__ import annotations

import math

import click

from tcpdelay.cli.common import MSS_BYTES, PROBABILITY, TIME_S, FiniteFloatRange, emit, fmt_bps, json_option
from tcpdelay.cli.text_layout import print_key_values
from tcpdelay.model import throughput as tp


def throughput_result(loss, rtt_s, t0_s, mss_bytes, acks_per_segment, max_window) -> dict:
    """The JSON document of ``tcpdelay throughput`` (keys documented in docs/cli.md)."""
    t0 = float(tp.default_t0_s(rtt_s)) if t0_s is None else t0_s
    w_max = math.inf if max_window is None else max_window
    seg = {
        "pftk": float(tp.pftk_segments_per_s(loss, rtt_s, t0, acks_per_segment, w_max)),
        "pftk_simple": float(tp.pftk_simple_segments_per_s(loss, rtt_s, t0, acks_per_segment)),
        "mathis": float(tp.mathis_segments_per_s(loss, rtt_s, acks_per_segment)),
    }
    out = {
        "loss": loss,
        "rtt_s": rtt_s,
        "t0_s": t0,
        "mss_bytes": mss_bytes,
        "acks_per_segment": acks_per_segment,
        "max_window": max_window,
        "expected_loss_window": float(tp.expected_loss_window(loss, acks_per_segment)),
    }
    for name, value in seg.items():
        out[f"{name}_segments_per_s"] = value
    for name, value in seg.items():
        out[f"{name}_bps"] = float(tp.segments_to_bps(value, mss_bytes))
    return out


@click.command("throughput")
@click.option("--rtt-s", type=TIME_S, required=True, help="Round-trip time in seconds, above 0 and at most 3600.")
@click.option("--loss", type=PROBABILITY, required=True, help="Loss-event probability per segment, 0 <= p < 1.")
@click.option("--t0-s", type=TIME_S, default=None,
              help="Average first timeout T0 in seconds, at most 3600 [default: RTT + 0.2 s, the Linux RTO].")
@click.option("--mss-bytes", type=MSS_BYTES, default=1460, show_default=True, help="Maximum segment size, 88 to 65495 bytes.")
@click.option("--acks-per-segment", type=FiniteFloatRange(min=1), default=1, show_default=True,
              help="b, segments acknowledged per ACK (2 with delayed ACKs).")
@click.option("--max-window", type=FiniteFloatRange(min=1), default=None,
              help="W_max, receiver window limit in segments [default: unlimited].")
@json_option
def throughput_cmd(rtt_s, loss, t0_s, mss_bytes, acks_per_segment, max_window, as_json):
    """Steady-state TCP throughput: full PFTK (Padhye et al. eq 22/23), the simplified PFTK of
    TFRC (RFC 5348 §3.1) and Mathis et al."""
    res = throughput_result(loss, rtt_s, t0_s, mss_bytes, acks_per_segment, max_window)

    def human(console):
        rows = [
            ("PFTK (full)", fmt_bps(res["pftk_bps"])),
            ("PFTK simple (TFRC)", fmt_bps(res["pftk_simple_bps"])),
            ("Mathis", fmt_bps(res["mathis_bps"])),
            ("W(p), segments", f"{res['expected_loss_window']:.3g}"),
        ]
        print_key_values(
            console, f"Throughput: RTT {rtt_s * 1e3:g} ms, loss {loss:g}, T0 {res['t0_s']:g} s, MSS {mss_bytes} B", rows)

    emit(res, as_json, human)


COMMANDS = [throughput_cmd]

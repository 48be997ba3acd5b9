"""``tcpdelay latency``: expected latency and percentiles of one TCP transfer (Cardwell et al.)."""

from __future__ import annotations

import math

import click

from tcpdelay.cli.common import (
    MSS_BYTES, PROBABILITY, TIME_S, FiniteFloatRange, PlotPath, WholeNumber, emit, fmt_bps, fmt_s, json_option,
)
from tcpdelay.cli.text_layout import print_key_values, print_written
from tcpdelay.model import handshake as hs
from tcpdelay.model import transfer as tr


class DelayedAckType(click.ParamType):
    """``none``, ``bsd``, ``windows`` or a number of seconds >= 0."""

    name = "none|bsd|windows|SECONDS"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            value = str(value)
        key = str(value).strip().lower()
        if key in tr.DELAYED_ACK_PRESETS:
            return key
        try:
            seconds = float(key)
        except ValueError:
            self.fail(f"{value!r} is not none, bsd, windows or a number of seconds >= 0", param, ctx)
        if not (math.isfinite(seconds) and seconds >= 0):
            self.fail(f"{value!r} must be a finite number of seconds >= 0", param, ctx)
        return seconds


@click.command("latency")
@click.option("--size-bytes", type=FiniteFloatRange(min=0, min_open=True), required=True,
              help="Bytes to transfer (server -> client).")
@click.option("--rtt-s", type=TIME_S, required=True, help="Round-trip time in seconds, above 0 and at most 3600.")
@click.option("--loss", type=PROBABILITY, required=True,
              help="Loss rate server -> client (data, SYN/ACK), 0 <= p < 1.")
@click.option("--loss-reverse", type=PROBABILITY, default=None,
              help="Loss rate client -> server (SYN) [default: same as --loss].")
@click.option("--mss-bytes", type=MSS_BYTES, default=1460, show_default=True, help="Maximum segment size, 88 to 65495 bytes.")
@click.option("--syn-timeout-s", type=TIME_S, default=hs.DEFAULT_SYN_TIMEOUT_S, show_default=True,
              help="Initial SYN timeout T_s, at most 3600 s (RFC 6298; the paper used 3 s).")
@click.option("--syn-retries", type=WholeNumber(0, hs.MAX_RETRIES), default=hs.DEFAULT_SYN_RETRIES,
              show_default=True, help="SYN retransmissions before giving up (Linux tcp_syn_retries).")
@click.option("--synack-retries", type=WholeNumber(0, hs.MAX_RETRIES), default=hs.DEFAULT_SYNACK_RETRIES,
              show_default=True, help="SYN/ACK retransmissions (Linux tcp_synack_retries).")
@click.option("--t0-s", type=TIME_S, default=None,
              help="Mean first retransmission timeout T0, at most 3600 s [default: RTT + 0.2 s, the Linux RTO].")
@click.option("--init-window", type=FiniteFloatRange(min=1), default=tr.DEFAULT_INIT_WINDOW, show_default=True,
              help="Initial congestion window w1 in segments (RFC 6928).")
@click.option("--acks-per-segment", type=FiniteFloatRange(min=1), default=tr.DEFAULT_ACKS_PER_SEGMENT,
              show_default=True, help="b, segments per ACK; slow start grows by 1 + 1/b per round.")
@click.option("--max-window", type=FiniteFloatRange(min=1), default=None,
              help="W_max, window limit in segments [default: unlimited].")
@click.option("--delayed-ack", type=DelayedAckType(), default="none", show_default=True,
              help="Cost of the first delayed ACK: none, bsd (0-200 ms), windows (100-200 ms) or seconds.")
@click.option("--plot", "plot_path", type=PlotPath(), default=None,
              help="Also draw latency and throughput against transfer size (.png, .svg or .pdf).")
@json_option
def latency_cmd(size_bytes, rtt_s, loss, loss_reverse, mss_bytes, syn_timeout_s, syn_retries, synack_retries,
                t0_s, init_window, acks_per_segment, max_window, delayed_ack, plot_path, as_json):
    """Expected latency and percentiles of one TCP transfer: handshake (eqs 1-4) plus data
    transfer (eq 25) of Cardwell, Savage, Anderson, "Modeling TCP Latency" (docs/models/latency.md)."""
    from tcpdelay.model.latency import latency

    kwargs = dict(
        mss_bytes=mss_bytes, loss_reverse=loss_reverse, syn_timeout_s=syn_timeout_s, syn_retries=syn_retries,
        synack_retries=synack_retries, t0_s=t0_s, init_window=init_window, acks_per_segment=acks_per_segment,
        max_window=max_window, delayed_ack=delayed_ack,
    )
    res = latency(size_bytes, rtt_s, loss, **kwargs)
    if plot_path:
        from tcpdelay.report.latency_plots import plot_latency_vs_size

        kwargs.pop("mss_bytes")
        res["plot_path"] = plot_latency_vs_size(plot_path, rtt_s=rtt_s, loss=loss, mss_bytes=mss_bytes,
                                                mark_size_bytes=size_bytes, **kwargs)

    def human(console):
        pct = ", ".join(f"p{k} {fmt_s(v)}" for k, v in res["percentiles_s"].items())
        rows = [
            ("handshake (exact)", fmt_s(res["handshake_mean_s"])),
            ("handshake (eq 4 approx.)", fmt_s(res["handshake_mean_approx_s"])),
            ("handshake failure prob.", f"{res['handshake_failure_prob']:.3g}"),
            ("slow start", fmt_s(res["slow_start_s"])),
            ("first loss", fmt_s(res["first_loss_s"])),
            ("remainder", fmt_s(res["remainder_s"])),
            ("delayed ACK", fmt_s(res["delayed_ack_s"])),
            ("transfer (eq 25)", fmt_s(res["transfer_mean_s"])),
            ("total mean", fmt_s(res["total_mean_s"])),
            ("total percentiles", pct),
            ("effective throughput", fmt_bps(res["effective_throughput_bps"])),
            ("steady-state PFTK", fmt_bps(res["steady_state_pftk_bps"])),
        ]
        print_key_values(
            console, f"Latency: {size_bytes:g} B ({res['segments']:g} segments), RTT {rtt_s * 1e3:g} ms, "
                     f"loss {loss:g}, T0 {res['t0_s']:g} s, w1 {init_window:g}", rows)
        if plot_path:
            print_written(console, "Plot", res["plot_path"])

    emit(res, as_json, human)


COMMANDS = [latency_cmd]

"""The model's side of a validation point: :func:`tcpdelay.model.delay.predict` for the same
profile, the configured RTT and drop probability, the model's defaults otherwise (Brosh et al.
Section 4: T0 = RTT + 200 ms, random loss, limited transmit)."""

from __future__ import annotations

#: The model's MSS: the testbed's 1500-byte MTU minus IP, TCP and timestamp option headers.
MSS_BYTES = 1448

#: The playout delays (seconds) at which the late fraction is reported, model and measured.
LATE_AT_S = (0.1, 0.2, 0.4)


#: The stacks of the delay model set beside every point besides the paper's own chain
#: (``model``): today's Linux recovery and classic three-duplicate-ACK recovery.
MODEL_STACKS = ("linux", "classic")


def model_point(profile: str, rtt_s: float, loss: float, *, mss_bytes: int = MSS_BYTES,
                hol_ramp: bool = False, stack: str = "paper") -> dict:
    """The model's statistics for one point (Brosh et al. Section 4; T0 and the [choice]
    options at the model's defaults). ``unstable`` when PFTK throughput does not exceed the
    source's rate (the delay then grows without bound and the statistics are None).
    ``hol_ramp=True``: the variant with the head-of-line ramp behind each fast retransmit (not
    the paper's model; docs/models/delay.md, "The head-of-line ramp"). The key ``_prediction``
    holds the :class:`~tcpdelay.model.delay.DelayPrediction` itself (for the CDF; not written).
    ``stack``: whose loss recovery (:mod:`tcpdelay.model.delay.stacks`) [default the paper's
    Table 6, which the page's claims are about]."""
    from tcpdelay.model.delay import predict

    pred = predict(profile, rtt_s=rtt_s, loss=loss, mss_bytes=mss_bytes, hol_ramp=hol_ramp, stack=stack)
    st = pred.statistics()
    info = pred.info
    return {
        "mean_s": st["mean_s"], "p95_s": st.get("p95_s"), "p99_s": st.get("p99_s"), "std_s": st["std_s"],
        "unstable": bool(pred.unstable),
        "stack": stack,
        "one_way_s": pred.one_way_s,
        "tcp_throughput_bps": info.get("tcp_throughput_bps"),
        "throughput_ratio": info.get("throughput_ratio"),
        "timeout_probability": info.get("timeout_probability"),
        "t0_s": (info.get("params") or {}).get("t0_s"),
        "truncated_mass": info.get("truncated_mass"),
        "solve_s": info.get("solve_s"),
        "warnings": list(info.get("warnings") or []),
        "late_fraction": {f"{x:g}": float(pred.late_fraction(x)) for x in LATE_AT_S},
        "_prediction": pred,
    }

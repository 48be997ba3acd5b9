"""Application-level delay heuristics (Brosh et al., Section 7): packet splitting (split-N,
§7.1) and blind round-robin over parallel connections (§7.2), compared with the plain source.

Both are options of :func:`tcpdelay.model.delay.predict` (``split``, ``connections``); this
module tabulates them. The delay-aware "intelligent" scheme (shortest send queue, not in
timeout) couples the connections' chains through the scheduler and is left to measurement
(see docs/models/delay.md).
"""

from __future__ import annotations

from tcpdelay.model.delay.predict import predict, resolve_source


def compare_heuristics(profile=None, *, rate_bps=None, packet_bytes=None, rtt_s, loss,
                       splits=(2, 4), connections=(2, 5), percentile: float = 95.0, **options) -> dict:
    """The ``percentile`` and mean delay of the plain source, of split-N for each N in
    ``splits`` and of N blind connections for each N in ``connections``.

    Returns ``{"profile", "rtt_s", "loss", "percentile", "rows": [{"scheme", "n", "value_s",
    "mean_s", "reduction", "unstable"}]}``; ``reduction`` is ``1 - value / plain value`` (None
    when either is unstable or the plain value is 0).
    """
    source = resolve_source(profile, rate_bps, packet_bytes)
    plans = [("plain", 1, {})] + [("split", n, {"split": n}) for n in splits] + \
            [("connections", n, {"connections": n}) for n in connections]
    rows = []
    base = None
    for scheme, n, kw in plans:
        pred = predict(source, rtt_s=rtt_s, loss=loss, **kw, **options)
        value = None if pred.unstable else pred.percentile_s(percentile)
        if scheme == "plain":
            base = value
        red = (None if value is None or base is None or base <= 0 else 1.0 - value / base)
        rows.append({"scheme": scheme, "n": n, "value_s": value,
                     "mean_s": None if pred.unstable else pred.mean_s,
                     "reduction": red, "unstable": pred.unstable})
    return {"profile": source.name, "rtt_s": rtt_s, "loss": loss, "percentile": percentile, "rows": rows}

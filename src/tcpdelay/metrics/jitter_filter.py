"""The jitter filter of the interactive-audio-over-HSPA study (*Interactive audio vs. concurrent
TCP on a cellular (HSPA) access link*, §II-B).

The filter mimics a codec with a fixed jitter buffer:

- a **pure loss** is a packet that never arrives (here also a packet the sender skipped: the
  codec cannot tell the two apart);
- a **delayed loss** is a packet whose one-way delay exceeds ``base delay + jitter buffer``: it
  misses its decoding deadline and is as unusable as a lost one;
- the **base delay** is the minimum delay over the 2 s before the competing TCP flows start
  (the paper's choice, deliberately the worst case: a real codec might pick a higher value).
  When the run does not say when the cross traffic starts, the minimum delay of the whole flow
  is used instead (still a lower bound on what a codec would pick).

The paper's figures use a 40 ms jitter buffer (Fig. 2) and compare several sizes (Fig. 3).
"""

from __future__ import annotations

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError

ON_TIME, PURE_LOSS, DELAYED_LOSS = 0, 1, 2
BASE_WINDOW_S = 2.0
DEFAULT_JITTER_BUFFER_S = 0.040


def base_delay_s(send_time_s, delay_s, cross_traffic_start_s: float | None = None,
                 window_s: float = BASE_WINDOW_S) -> float:
    """Minimum delay of the packets sent in ``[start - window_s, start)``; with no start, the
    minimum delay of all packets received. ParameterError if no packet qualifies."""
    s = np.asarray(send_time_s, dtype=float)
    d = np.asarray(delay_s, dtype=float)
    ok = np.isfinite(d)
    if cross_traffic_start_s is not None:
        checks.positive("window_s", window_s)
        ok &= (s >= cross_traffic_start_s - window_s) & (s < cross_traffic_start_s)
        if not ok.any():
            raise ParameterError(
                f"base delay: no packet received in the {window_s:g} s before the cross traffic "
                f"starts at {cross_traffic_start_s:g} s (send-time clock)")
    elif not ok.any():
        raise ParameterError("base delay: no packet was received")
    return float(d[ok].min())


def classify(delay_s, base_delay: float, jitter_buffer_s: float = DEFAULT_JITTER_BUFFER_S
             ) -> np.ndarray:
    """Per packet: ON_TIME (0), PURE_LOSS (1, delay NaN) or DELAYED_LOSS (2, delay > base +
    jitter buffer)."""
    checks.non_negative("jitter_buffer_s", jitter_buffer_s)
    d = np.asarray(delay_s, dtype=float)
    out = np.full(d.shape, ON_TIME, dtype=np.int8)
    lost = ~np.isfinite(d)
    out[lost] = PURE_LOSS
    with np.errstate(invalid="ignore"):
        out[~lost & (d > base_delay + jitter_buffer_s)] = DELAYED_LOSS
    return out


def summarize(status) -> dict:
    """Counts and rates of the classes over all packets."""
    st = np.asarray(status)
    n = st.size
    pure = int(np.count_nonzero(st == PURE_LOSS))
    delayed = int(np.count_nonzero(st == DELAYED_LOSS))
    return {"packets": int(n), "pure_losses": pure, "delayed_losses": delayed,
            "pure_loss_rate": pure / n if n else None,
            "delayed_loss_rate": delayed / n if n else None,
            "total_loss_rate": (pure + delayed) / n if n else None}

"""The comparison in words: plain statements computed from the points (errors per profile and
stack, the hol_ramp variant's beside them, unstable points, timeouts; no canned verdicts), then
why today's Linux departs from the 2008 model (Brosh et al. §5.1; the text in ``texts.md``)."""

from __future__ import annotations

import numpy as np

from tcpdelay.experiments.validation.grid import PROFILES, STACKS
from tcpdelay.experiments.validation.texts import text


def interpretation(points: list[dict]) -> list[str]:
    """Plain statements about the comparison, computed from the points (no canned verdicts)."""
    out = []

    def mean_abs(sel):
        e = [abs(p["relative_error"]["mean_s"]) for p in sel
             if (p.get("relative_error") or {}).get("mean_s") is not None]
        return (sum(e) / len(e), len(e)) if e else (None, 0)

    for profile in PROFILES:
        for stack in STACKS:
            sel = [p for p in points if p["profile"] == profile and p["stack"] == stack]
            m, n = mean_abs(sel)
            if n:
                signed = [p["relative_error"]["mean_s"] for p in sel if p["relative_error"]["mean_s"] is not None]
                over = sum(e > 0 for e in signed)
                out.append(f"{profile} on {stack}: mean |relative error| of the mean delay {m * 100:.0f} % over "
                           f"{n} point(s); the model is above the measurement at {over} of them.")
                signed_h = [(p["relative_error"]["mean_s"], p["relative_error_hol_ramp"]["mean_s"]) for p in sel
                            if p["relative_error"]["mean_s"] is not None
                            and (p.get("relative_error_hol_ramp") or {}).get("mean_s") is not None]
                if signed_h:
                    closer = sum(abs(h) < abs(e) for e, h in signed_h)
                    further = sum(abs(h) > abs(e) for e, h in signed_h)
                    out.append(f"{profile} on {stack} with hol_ramp (not the paper's model): mean |relative error| "
                               f"{np.mean([abs(h) for _, h in signed_h]) * 100:.0f} % over the same "
                               f"{len(signed_h)} point(s) with a stable model (the paper's model "
                               f"{np.mean([abs(e) for e, _ in signed_h]) * 100:.0f} % there); closer to the "
                               f"measurement at {closer}, further at {further}.")
            unstable = [p for p in sel if (p.get("model") or {}).get("unstable") and p.get("measured")]
            for p in unstable:
                lost = p["measured"].get("app_loss_rate") or 0.0
                tail = (f"; {lost * 100:.0f} % of its packets had not arrived when the run ended (a backlog "
                        "that kept growing)" if lost > 0.01 else "")
                out.append(f"{profile} on {stack} at RTT {p['rtt_s'] * 1e3:g} ms, p = {p['loss'] * 100:g} %: the model "
                           f"calls it unstable (PFTK throughput {p['model']['tcp_throughput_bps'] / 1e3:.0f} kb/s ≤ the "
                           f"source's rate); Linux delivered it with a measured mean of "
                           f"{p['measured']['mean_s'] * 1e3:.0f} ms{tail}.")
    rto = [(p["stack"], p["measured"]["rtos_per_drop"], (p.get("model") or {}).get("timeout_probability"))
           for p in points if p.get("measured") and p["measured"].get("rtos_per_drop") is not None]
    for stack in STACKS:
        meas = [r for s, r, _ in rto if s == stack]
        mod = [t for s, _, t in rto if s == stack and t is not None]
        if meas and mod:
            out.append(f"Timeouts on {stack}: measured {np.mean(meas):.2f} RTOs per dropped segment on average, "
                       f"the model {np.mean(mod):.2f} timeouts per loss event.")
    heavy = [p for p in points if p.get("measured") and p["measured"].get("rtos_per_drop") is not None
             and ((p.get("model") or {}).get("timeout_probability") or 0.0) >= 0.05]
    if heavy:
        out.append(
            f"Where the model expects timeouts (P(timeout | loss) ≥ 0.05: {len(heavy)} point(s), "
            + ", ".join(sorted({f"{p['profile']} RTT {p['rtt_s'] * 1e3:g} ms" for p in heavy}))
            + f") it charges {np.mean([p['model']['timeout_probability'] for p in heavy]):.2f} timeouts per "
            f"loss event on average; Linux took {np.mean([p['measured']['rtos_per_drop'] for p in heavy]):.2f} "
            "RTOs per dropped segment there, and the model's mean delay is "
            + ("above" if np.mean([(p.get('relative_error') or {}).get('mean_s') or 0.0 for p in heavy]) > 0 else "below")
            + f" the measured one by {np.mean([abs((p.get('relative_error') or {}).get('mean_s') or 0.0) for p in heavy]) * 100:.0f} % on average.")
    out.append(text("why-linux-departs"))
    return out

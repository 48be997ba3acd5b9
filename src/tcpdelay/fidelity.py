"""How far to trust the delay model near a query (ground floor: reads one committed table).

``benchmarks/model_fidelity.py --write src/tcpdelay/model_fidelity.json`` sets each stack of
the delay model against its ground truth (``linux`` against Linux on the testbed, ``classic``
against ns-3, ``paper`` against both) over voip and video x RTT 20/100/300 ms x drop rate
0.5-5 % and commits the relative errors. :func:`nearby_error` answers, for one query, what the
model's error was at the nearest measured points of that table — the number ``tcpdelay delay``
and ``tcpdelay advise`` print beside a prediction — and warns when the query lies outside the
range that was measured (docs/experiments/model-fidelity.md).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources

#: The committed table (package data), written by benchmarks/model_fidelity.py.
TABLE_FILE = "model_fidelity.json"
#: Which ground truth each stack is judged against.
SOURCE_OF = {"linux": "testbed", "classic": "ns3", "paper": "testbed"}
#: The measured range: RTT (s), drop rate, and the profiles' packet rate (packets/s).
VALIDATED_RTT_S = (0.02, 0.3)
VALIDATED_LOSS = (0.005, 0.05)
VALIDATED_RATE_PPS = (50.0, 50.0)
#: How many of the nearest measured points a query is judged by.
NEAREST = 4


@lru_cache(maxsize=1)
def load_table() -> dict:
    """The committed fidelity table; an empty one if the package holds none."""
    try:
        text = resources.files("tcpdelay").joinpath(TABLE_FILE).read_text()
    except (FileNotFoundError, OSError):
        return {"results": []}
    return json.loads(text)


def _profile_like(profile: str | None, packet_bytes: float | None) -> str:
    """The measured profile a query resembles: its own if voip or video, else by packet size
    (small packets coalesce as VoIP's do; MSS-sized ones do not)."""
    if profile in ("voip", "video"):
        return profile
    return "voip" if (packet_bytes or 0) < 724 else "video"


def nearby_error(*, stack: str, rtt_s: float, loss: float, profile: str | None = None,
                 packet_bytes: float | None = None, rate_pps: float | None = None,
                 split: int = 1, connections: int = 1, table: dict | None = None) -> dict:
    """The model's measured error near a query.

    Returns ``{"stack", "source", "like_profile", "points": [{"profile", "rtt_s", "loss",
    "mean_error", "p95_error", "origin", "measured_mean_rel_se"}], "max_abs_mean_error",
    "max_abs_p95_error", "max_measured_mean_rel_se", "in_validated_range", "warnings"}``: the :data:`NEAREST` measured points of the same stack
    and profile closest in log RTT and log loss, their relative errors ((model − measured) /
    measured) and the largest of them, with the relative standard error of each measured mean
    (from the spread of its runs; None for a single run) and the largest; ``warnings`` say why the query is outside what was
    measured (RTT, loss, packet rate, split/parallel connections, no table)."""
    doc = load_table() if table is None else table
    source = SOURCE_OF.get(stack, "testbed")
    like = _profile_like(profile, packet_bytes)
    warnings: list[str] = []
    lo, hi = VALIDATED_RTT_S
    if not lo - 1e-12 <= rtt_s <= hi + 1e-12:
        warnings.append(f"RTT {rtt_s * 1e3:g} ms is outside the measured {lo * 1e3:g}-{hi * 1e3:g} ms")
    lo, hi = VALIDATED_LOSS
    if loss > 0 and not lo - 1e-12 <= loss <= hi + 1e-12:
        warnings.append(f"loss {loss * 100:g} % is outside the measured {lo * 100:g}-{hi * 100:g} %")
    if rate_pps is not None and not VALIDATED_RATE_PPS[0] - 1e-9 <= rate_pps <= VALIDATED_RATE_PPS[1] + 1e-9:
        warnings.append(f"{rate_pps:g} packets/s: only 50 packets/s (voip, video) were measured")
    if split > 1 or connections > 1:
        warnings.append("split-N and parallel connections were not part of the measured grid")
    res = next((r for r in doc.get("results") or [] if r.get("stack") == stack and r.get("source") == source), None)
    pts = [p for p in (res or {}).get("points") or []
           if p.get("profile") == like and p.get("stable") and p.get("mean_error") is not None]
    if not pts:
        warnings.append(f"no measured points for stack {stack!r} in the fidelity table")
    lrtt, lloss = math.log(rtt_s), math.log(max(loss, 1e-6))
    pts.sort(key=lambda p: abs(math.log(p["rtt_s"]) - lrtt) + abs(math.log(p["loss"]) - lloss))
    near = [{k: p.get(k) for k in ("profile", "rtt_s", "loss", "mean_error", "p95_error", "origin",
                                   "measured_mean_rel_se")}
            for p in pts[:NEAREST]]
    means = [abs(p["mean_error"]) for p in near if p["mean_error"] is not None]
    p95s = [abs(p["p95_error"]) for p in near if p["p95_error"] is not None]
    ses = [p["measured_mean_rel_se"] for p in near if p.get("measured_mean_rel_se") is not None]
    return {"stack": stack, "source": source, "like_profile": like, "points": near,
            "max_abs_mean_error": max(means) if means else None,
            "max_abs_p95_error": max(p95s) if p95s else None,
            "max_measured_mean_rel_se": max(ses) if ses else None,
            "in_validated_range": not warnings, "warnings": warnings}


#: A measured mean less certain than this (one standard error, relative) is named in the summary.
NOTABLE_MEASUREMENT_SE = 0.03


def summary_text(err: dict) -> str:
    """One line for a terminal: the largest measured errors near the query, or why none."""
    if err["max_abs_mean_error"] is None:
        return "model error near this query: not measured (" + "; ".join(err["warnings"]) + ")"
    p95 = err["max_abs_p95_error"]
    text = (f"model error near this query ({err['stack']} vs {err['source']}, {len(err['points'])} nearest "
            f"measured points): mean within {err['max_abs_mean_error'] * 100:.0f} %"
            + ("" if p95 is None else f", p95 within {p95 * 100:.0f} %"))
    se = err.get("max_measured_mean_rel_se")
    if se is not None and se >= NOTABLE_MEASUREMENT_SE:
        text += f" (the measured means there are themselves uncertain by up to {se * 100:.0f} %, one standard error)"
    if err["warnings"]:
        text += "; outside the measured range: " + "; ".join(err["warnings"])
    return text

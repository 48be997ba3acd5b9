"""A short measured check of the delay model for the main job (``tcpdelay evaluate``, ``make run``).

:func:`measured_check_part` runs three very short points of reproduction 1
(:mod:`tcpdelay.experiments.validation`; Brosh et al., *The Delay-Friendliness of TCP for
Real-Time Traffic*, §5.1) through the testbed — VoIP at RTT 100 ms with 1 % and 5 % random
drops on the ``newreno-2008`` stack, and 5 % on ``linux-default`` — and puts the measured mean,
95th percentile and standard deviation beside the model's. Each run lasts :data:`DURATION_S`
seconds (about 35 s in all), so it sees only a handful of losses: a smoke test of model and
testbed together, not a validation (that is ``tcpdelay validate``).

When the testbed cannot run here (not root, no usable /dev/net/tun, no ``ip``, the emulator not
built) the part says so, and why, in the report instead of measuring.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable

from tcpdelay.errors import EnvironmentNotSupported

#: Seconds of media per point.
DURATION_S = 10.0
RTT_S = 0.1
#: (stack, losses) measured: two losses on the paper-era stack, one on today's default.
POINTS = (("newreno-2008", (0.01, 0.05)), ("linux-default", (0.05,)))


def testbed_unavailable() -> str | None:
    """Why the testbed cannot run here (one line), or None."""
    from tcpdelay.testbed.emulator import find_binary
    from tcpdelay.testbed.netns import unavailable_reason

    reason = unavailable_reason()
    if reason:
        return reason
    try:
        find_binary()
    except EnvironmentNotSupported as err:
        return str(err)
    return None


def measured_check_part(report, *, step: Callable[[str], None] | None = None,
                        duration_s: float = DURATION_S) -> dict:
    """Add the "measured check" section to ``report``; return its figures (``--json``).

    ``step(text)`` is told which point is being measured; ``duration_s`` is the media time per
    point (0: leave the check out, saying so in the report)."""
    sec = report.section("Model vs a short measurement on the testbed")
    step = step or (lambda text: None)
    if duration_s == 0:
        reason = "left out (measured check duration 0 s)"
        sec.paragraph(f"Not measured: {reason}.", note=True)
        return {"measured": False, "reason": reason, "points": []}
    step("checking the testbed")
    reason = testbed_unavailable()
    if reason:
        sec.paragraph(f"Not measured: the testbed cannot run on this machine — {reason}. The model "
                      "figures above do not depend on it; run `make run` as root on Linux with "
                      "/dev/net/tun (and the emulator built by `make native`) to add this check.", note=True)
        return {"measured": False, "reason": reason, "points": []}

    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.sweep import run_sweep
    from tcpdelay.experiments.validation import TABLE_COLUMNS, compare, measured_points, table_rows, validation_scenario
    from tcpdelay.results import load_results

    t0 = time.monotonic()
    points, failed = [], []
    todo = [(stack, loss) for stack, losses in POINTS for loss in losses]
    with tempfile.TemporaryDirectory(prefix="tcpdelay-check-") as tmp:
        for i, (stack, loss) in enumerate(todo):
            step(f"run {i + 1} of {len(todo)}: {stack}, loss {loss * 100:g} %, {duration_s:g} s of VoIP")
            sc = validation_scenario(duration_s=duration_s, repetitions=1, grid={
                "rtts_s": (RTT_S,), "losses": (loss,), "profiles": ("voip",), "stacks": (stack,)})
            out = Path(tmp) / str(i)
            try:
                res = run_sweep(sc, out, run_scenario, jobs=1, progress=False)
            except EnvironmentNotSupported as err:
                sec.paragraph(f"Not measured: {err}.", note=True)
                return {"measured": False, "reason": str(err), "points": []}
            failed += res.failed
            points += compare(measured_points(load_results(out)))
    wall = time.monotonic() - t0
    sec.paragraph(
        f"VoIP (64 kb/s, 174-byte packets every 20 ms) over real Linux TCP in network namespaces, "
        f"across the tcpdelay-link emulator with RTT {RTT_S * 1e3:g} ms and random drops of data "
        f"segments; one {duration_s:g} s run per point ({wall:.0f} s in all), beside the model of "
        "Brosh et al. (Section 4) for the same profile, RTT and loss (T0 = RTT + 200 ms). A run this "
        "short sees only a handful of drops, so expect tens of percent between the two on the 95th "
        "percentile and the standard deviation; `tcpdelay validate` is the real comparison "
        "(docs/experiments/validate-5.1.md).")
    if failed:
        sec.paragraph("Failed runs: " + "; ".join(f"{f['label']}: {f['error']}" for f in failed), note=True)
    keep = [0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19]
    sec.table([TABLE_COLUMNS[i] for i in keep], [[r[i] for i in keep] for r in table_rows(points)])
    data = [{k: v for k, v in p.items() if not k.startswith("_")} for p in points]
    return {"measured": True, "duration_s": duration_s, "wall_s": wall, "failed": failed, "points": data}

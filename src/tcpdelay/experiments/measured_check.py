"""A short measured check of the delay model for the main job (``tcpdelay evaluate``, ``make run``).

:func:`run_measured_check` runs three very short points of reproduction 1
(:mod:`tcpdelay.experiments.validation`; Brosh et al., *The Delay-Friendliness of TCP for
Real-Time Traffic*, §5.1) through the testbed — VoIP at RTT 100 ms with 1 % and 5 % random
drops on the ``newreno-2008`` stack, and 5 % on ``linux-default`` — and sets the measured mean,
95th percentile and standard deviation beside the model's (drawn as a section of the main job's
report by :mod:`tcpdelay.report.evaluation_page`). Each run lasts :data:`DURATION_S`
seconds (about 35 s in all), so it sees only a handful of losses: a smoke test of model and
testbed together, not a validation (that is ``tcpdelay validate``).

When the testbed cannot run here (not root, no usable /dev/net/tun, no ``ip``, the emulator not
built) the check says so, and why, instead of measuring.
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


#: Why a check did not measure (its ``_why``): left out (duration 0), no testbed here, or the
#: sweep refused to run on it.
LEFT_OUT, NO_TESTBED, REFUSED = "left-out", "no-testbed", "refused"


def run_measured_check(*, step: Callable[[str], None] | None = None, duration_s: float = DURATION_S) -> dict:
    """Measure the check's points; return its figures (``--json``) and, under ``_why``, why it
    did not measure (:data:`LEFT_OUT`, :data:`NO_TESTBED`, :data:`REFUSED`; None if it did).

    ``step(text)`` is told which point is being measured; ``duration_s`` is the media time per
    point (0: leave the check out, saying so). Measured: ``duration_s``, ``wall_s`` (seconds the
    runs took), ``failed`` (the sweep's failed runs) and ``points`` (as ``tcpdelay validate``'s:
    :func:`tcpdelay.experiments.validation.compare`, without its private keys). Not measured, the
    same keys are there: ``wall_s`` the seconds spent finding out, ``failed`` and ``points`` empty
    (or what was measured before a refusal)."""
    step = step or (lambda text: None)
    t0 = time.monotonic()
    if duration_s == 0:
        return _not_measured(LEFT_OUT, "left out (measured check duration 0 s)", duration_s, t0)
    step("checking the testbed")
    reason = testbed_unavailable()
    if reason:
        return _not_measured(NO_TESTBED, reason, duration_s, t0)

    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.sweep import run_sweep
    from tcpdelay.experiments.validation import compare, measured_points, validation_scenario
    from tcpdelay.results import load_results

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
                return _not_measured(REFUSED, str(err), duration_s, t0, failed, points)
            failed += res.failed
            points += compare(measured_points(load_results(out)))
    wall = time.monotonic() - t0
    data = [{k: v for k, v in p.items() if not k.startswith("_")} for p in points]
    return {"measured": True, "duration_s": duration_s, "wall_s": wall, "failed": failed, "points": data,
            "_why": None}


def _not_measured(why: str, reason: str, duration_s: float, t0: float, failed=(), points=()) -> dict:
    """What a check that did not measure returns: the keys of one that did, and why not."""
    return {"measured": False, "reason": reason, "duration_s": duration_s, "wall_s": time.monotonic() - t0,
            "failed": list(failed), "points": [{k: v for k, v in p.items() if not k.startswith("_")} for p in points],
            "_why": why}

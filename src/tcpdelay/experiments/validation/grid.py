"""The validation grid (Brosh et al., *The Delay-Friendliness of TCP for Real-Time Traffic*,
§5.1, "Validation Using Configured Drop Rates"): one CBR flow over TCP through a link that drops
data segments uniformly at random, no cross traffic; drop rates 0.1-10 % × RTT 20, 100, 300 ms.

Sizes: :data:`FULL` is the paper's (84 cells × 10 runs × 300 s, ~75 h on one testbed; shipped as
``experiments/validate-5.1.toml``); :data:`REDUCED` (the default) is a subset that finishes in a
few minutes: RTT 100 ms (where the paper states its claims), p = 0.5, 1, 2 %, both profiles, both
stacks, one 20-second run each (12 runs, ~5 min).
"""

from __future__ import annotations

import math

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario import Scenario, parse_scenario

#: The media profiles: ``voip`` (64 kb/s) and ``video`` (573 kb/s).
PROFILES = ("voip", "video")
#: The Linux stacks: ``newreno-2008`` (Reno, SACK, no RACK/TLP, IW3: as close to the paper's
#: 2.6.17 stack as a current kernel gets) and ``linux-default`` (CUBIC, SACK, RACK, TLP, IW10).
STACKS = ("newreno-2008", "linux-default")
PAPER_RTTS_S = (0.02, 0.1, 0.3)
PAPER_LOSSES = (0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1)

#: The paper's size (Brosh et al. §5.1): every point, five minutes, ten repetitions.
FULL = {"rtts_s": PAPER_RTTS_S, "losses": PAPER_LOSSES, "duration_s": 300.0, "repetitions": 10}
#: The default size: RTT 100 ms, 0.5-2 % loss, one 20 s run per point (12 runs, ~5 minutes).
REDUCED = {"rtts_s": (0.1,), "losses": (0.005, 0.01, 0.02), "duration_s": 20.0, "repetitions": 1}


def scenario_data(*, rtts_s, losses, duration_s: float, repetitions: int,
                  profiles=PROFILES, stacks=STACKS, seed: int = 1, host_kernel: str | None = None) -> dict:
    """The validation scenario as data (the grid in the order of the paper's figures); with
    ``host_kernel`` the sender is a guest booting that reference kernel (``[host_kernel]``)."""
    return {**({"host_kernel": {"kernel": host_kernel, "side": "left"}} if host_kernel else {}),
        "name": "validate-5.1",
        "description": "CBR over TCP (voip 64 kb/s, video 573 kb/s) with Bernoulli drops: model vs Linux TCP",
        "duration_s": float(duration_s),
        "repetitions": int(repetitions),
        "seed": seed,
        "metrics": ["delay", "late", "loss", "tcp"],
        "path": {"rtt_s": 0.1, "forward": {"loss": {"model": "bernoulli", "p": 0.01}}},
        "flows": [{"name": "media", "profile": "voip", "transport": "tcp", "tcp": {"preset": "newreno-2008"}}],
        "sweep": {
            "flows[0].profile": list(profiles),
            "flows[0].tcp.preset": list(stacks),
            "path.rtt_s": [float(r) for r in rtts_s],
            "path.forward.loss.p": [float(p) for p in losses],
        },
    }


def validation_scenario(full: bool = False, *, duration_s: float | None = None,
                        repetitions: int | None = None, grid: dict | None = None) -> Scenario:
    """The full or reduced validation scenario, optionally with another run length or number
    of repetitions (e.g. ``--full --repetitions 2 --duration-s 120`` for a ~6 h run), or
    another grid (``grid``: any of ``rtts_s``, ``losses``, ``profiles``, ``stacks``, and
    ``host_kernel``: the senders on a guest booting that reference kernel, e.g. ``debian-6.1``)."""
    size = dict(FULL if full else REDUCED)
    allowed = ("rtts_s", "losses", "profiles", "stacks", "host_kernel")
    for key, values in (grid or {}).items():
        if key not in allowed:
            raise ParameterError(f"grid: {key!r} is not one of {', '.join(allowed)}")
        size[key] = values if key == "host_kernel" else tuple(values)
    if duration_s is not None:
        if not (isinstance(duration_s, (int, float)) and math.isfinite(duration_s) and 1 <= duration_s <= 3600):
            raise ParameterError(f"duration_s: {duration_s!r} must be between 1 and 3600 seconds")
        size["duration_s"] = float(duration_s)
    if repetitions is not None:
        if not (isinstance(repetitions, int) and 1 <= repetitions <= 100):
            raise ParameterError(f"repetitions: {repetitions!r} must be an integer from 1 to 100")
        size["repetitions"] = repetitions
    return parse_scenario(scenario_data(**size), source="validate-5.1")


def size_label(full: bool, *, duration_s: float | None = None, repetitions: int | None = None,
               grid: dict | None = None) -> str:
    """How ``validation.json`` names the size: ``full`` or ``reduced``, with what was changed
    in parentheses, e.g. ``reduced (losses=[0.02], duration_s=4)``."""
    size = "full" if full else "reduced"
    if grid or duration_s is not None or repetitions is not None:
        size += " (" + ", ".join(
            [f"{k}={v}" if isinstance(v, str) else f"{k}={list(v)}" for k, v in (grid or {}).items()]
            + ([f"duration_s={duration_s:g}"] if duration_s is not None else [])
            + ([f"repetitions={repetitions}"] if repetitions is not None else [])) + ")"
    return size

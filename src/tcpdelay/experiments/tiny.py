"""A scenario's tiny form: the same flows, path and settings compressed into a few seconds.

CI runs every scenario shipped in ``experiments/`` this way (the full reproductions are run by
hand), and a quick check can too. :func:`tiny_form` keeps what makes the scenario what it is —
the path, the flows and their TCP settings and heuristics, the kinds of cross traffic — and
shrinks time and volume: the run lasts ``duration_s``; every start, stop and outage is scaled
into it by the same factor (a page load due at 10-12 s of a 25 s run starts at 40-48 % of the
tiny run); the web flows' on/off means stay as they are; transfer sizes are capped; a pulled stream's video
is shortened by the same factor (at least 1 s); one repetition; the first cell of a sweep (or,
with ``cell``, another one).
"""

from __future__ import annotations

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario import Scenario, VideoFile, cell_scenario, grid, parse_scenario

#: Largest transfer of a tiny run's cross traffic (bytes).
MAX_TRANSFER_BYTES = 300_000


def tiny_form(scenario: Scenario, duration_s: float = 2.0, *, cell: int = 0) -> Scenario:
    """``scenario`` (cell ``cell`` of its sweep) compressed into ``duration_s`` seconds."""
    cells = grid(scenario)
    if not 0 <= cell < len(cells):
        raise ParameterError(f"cell: {cell} is not in 0..{len(cells) - 1}")
    if not duration_s > 0:
        raise ParameterError(f"duration_s: {duration_s!r} must be > 0")
    base = cell_scenario(scenario, cells[cell])
    factor = min(1.0, duration_s / base.duration_s)
    data = base.to_data()
    data.update(duration_s=float(duration_s), repetitions=1, seed=base.seed_list[0])
    data.pop("seeds", None)
    if factor < 1.0:
        _scale_times(data, factor, duration_s)
    for c in data.get("cross", []):
        if c.get("size_bytes"):
            c["size_bytes"] = min(c["size_bytes"], MAX_TRANSFER_BYTES)
        if c.get("kind") == "page_load":
            c["total_bytes"] = min(c["total_bytes"], MAX_TRANSFER_BYTES)
    data["name"] = f"{base.name or 'scenario'}-tiny"
    return parse_scenario(data, source=f"{base.name or 'scenario'} (tiny form)")


def _scale_times(data: dict, factor: float, duration_s: float) -> None:
    def scale(holder: dict, *keys: str) -> None:
        for k in keys:
            if holder.get(k) is not None:
                holder[k] = holder[k] * factor

    path = data.get("path", {})
    for d in (path, path.get("forward", {}), path.get("reverse", {})):
        for o in d.get("outages", []):
            scale(o, "at_s", "duration_s")
    for f in data.get("flows", []):
        scale(f, "start_s", "stop_s")
    for st in data.get("streams", []):
        scale(st, "start_s")
        # the video shrinks with the run, as long as it stays a whole second (one GOP is 2 s)
        video = st.setdefault("video", {})
        video["duration_s"] = max(1.0, video.get("duration_s", VideoFile().duration_s) * factor)
    for c in data.get("cross", []):
        scale(c, "start_s", "start_spread_s", "stop_s")  # on/off means stay: they are the traffic's character

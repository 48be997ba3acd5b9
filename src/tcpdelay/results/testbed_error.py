"""A testbed run's own error: run.json's ``testbed_error`` section, how it is built, read and
judged (docs/testbed.md, "When the testbed itself was late").

The section (written by the testbed backend, :func:`section`; ``smallest_delay_s`` added once the
run's metrics are known, :func:`add_smallest_delay`):

* ``emulator_lateness_us``: per link and direction (``"bottleneck a_to_b"``, ``"access-h1
  b_to_a"``), how late the emulator delivered packets against their due time, ``{"p99", "max"}``
  (its ``lateness_us`` counters, docs/emulator.md);
* ``send_lateness_us``: per media flow (by flow id), its sender's send instant minus the
  source's scheduled instant, ``{"p99", "max", "count"}``;
* ``recv_lag_us``: per media flow whose receiver measures it (the native endpoint: its read
  instant minus the kernel's receive timestamp), ``{"p99", "max", "count"}``;
* ``machine``: CPU pressure and throttling over the run's span
  (:func:`tcpdelay.testbed.machine_load.between`);
* ``smallest_delay_s``: the smallest one-way delay the run's media flows report (None: none).

:func:`verdict` judges a section against its bounds (:func:`bound_us` for what adds to the
delays, :data:`SEND_LATE_BOUND_US` for the senders); :func:`run_verdict` reads a run
directory's. A run written before this section existed (every committed result up to format
version 2) has none: its verdict is "not recorded", never "on time". Where the emulator's
lateness is all one needs, :func:`emulator_lateness_us` and :func:`worst_emulator_lateness_us`
read it from the link counters every testbed run.json has, old or new.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

from tcpdelay.records import read_run_metadata, write_run_metadata

#: run.json's key of the section.
SECTION = "testbed_error"
#: A p99 lateness above this (µs) is always too late: the delays are stated to the millisecond.
LATE_BOUND_US = 1000.0
#: ... and above this share of the smallest delay the run reports (when that is larger than
#: :data:`LATE_FLOOR_US`), the error is a visible part of the smallest delay measured.
LATE_SHARE = 0.05
#: The bound never goes below this (µs): the idle testbed's own timer and wake-up noise.
LATE_FLOOR_US = 250.0
#: A sender's p99 lateness against its schedule above this (µs) is too late. A sender's lateness
#: does not enter the delays (each packet's delay runs from its actual send instant); it bends
#: the traffic offered. The Python senders wake through epoll, whose timeout is whole
#: milliseconds, and do their loop's other work between packets: measured on the project's
#: 2-core machine beside other work, p50 0.6-1.0 ms, p99 1.9-2.1 ms (VoIP, one flow), so the
#: bound is those 2 ms of the sender's own making plus the 1 ms of the delays'.
SEND_LATE_BOUND_US = 3000.0
#: The bottleneck's name among a run's links (the emulator's, tcpdelay.testbed.emulator).
BOTTLENECK = "bottleneck"
_DIRECTIONS = ("a_to_b", "b_to_a")


def _finite(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def emulator_lateness_us(link_counters: dict | None) -> dict[str, dict]:
    """``"<link> <direction>" -> {"p99", "max"}`` (µs) of every link of a run's ``link_counters``
    (as run.json keeps them: the bottleneck's directions at the top and each host's access link
    under ``access``, or the emulator's own ``links`` shape), in that order; {} without any."""
    out: dict[str, dict] = {}
    if not isinstance(link_counters, dict):
        return out

    def add(name: str, link) -> None:
        if not isinstance(link, dict):
            return
        for d in _DIRECTIONS:
            lat = (link.get(d) or {}).get("lateness_us") if isinstance(link.get(d), dict) else None
            if isinstance(lat, dict) and (lat.get("p99") is not None or lat.get("max") is not None):
                out[f"{name} {d}"] = {"p99": _finite(lat.get("p99")), "max": _finite(lat.get("max"))}

    if isinstance(link_counters.get("links"), dict):
        for name, link in link_counters["links"].items():
            add(str(name), link)
        return out
    add(BOTTLENECK, link_counters)
    for host, link in sorted((link_counters.get("access") or {}).items()):
        add(f"access-{host}", link)
    return out


def worst_emulator_lateness_us(link_counters: dict | None, *,
                               bottleneck_only: bool = False) -> tuple[float, float] | None:
    """The emulator's largest p99 and largest maximum lateness (µs) over every link and
    direction (``bottleneck_only``: the bottleneck's two); None when the counters have none."""
    lat = [v for k, v in emulator_lateness_us(link_counters).items()
           if not bottleneck_only or k.startswith(BOTTLENECK + " ")]
    if not lat:
        return None
    return (max((x["p99"] or 0.0) for x in lat), max((x["max"] or 0.0) for x in lat))


def _summary(x) -> dict | None:
    """An endpoint's ``{"p99", "max", "count"}`` as reported, or None when it is not one."""
    if not isinstance(x, dict) or "p99" not in x:
        return None
    count = x.get("count")
    return {"p99": _finite(x.get("p99")), "max": _finite(x.get("max")),
            "count": int(count) if isinstance(count, (int, float)) and not isinstance(count, bool) else None}


def section(link_counters: dict | None, media: dict[int, tuple[dict | None, dict | None]],
            machine: dict | None) -> dict:
    """The ``testbed_error`` section of a run: the emulator's lateness per link
    (``link_counters``), per media flow id the sender's ``send_lateness_us`` and the receiver's
    ``recv_lag_us`` from their results (``media``: flow id -> (sender result, receiver
    summary); a flow whose endpoint did not measure one is left out of that part), and
    ``machine`` (:func:`tcpdelay.testbed.machine_load.between`)."""
    send, recv = {}, {}
    for flow_id, (tx, rx) in sorted(media.items()):
        s = _summary((tx or {}).get("send_lateness_us")) if isinstance(tx, dict) else None
        r = _summary((rx or {}).get("recv_lag_us")) if isinstance(rx, dict) else None
        if s is not None:
            send[str(flow_id)] = s
        if r is not None:
            recv[str(flow_id)] = r
    return {"emulator_lateness_us": emulator_lateness_us(link_counters), "send_lateness_us": send,
            "recv_lag_us": recv, "machine": machine, "smallest_delay_s": None}


def smallest_delay_s(metrics: dict) -> float | None:
    """The smallest one-way delay (s) any media flow of a run's metrics reports (its
    ``delay.min_s``); None without one."""
    got = [_finite((f.get("delay") or {}).get("min_s")) for f in metrics.get("flows") or [] if isinstance(f, dict)]
    got = [x for x in got if x is not None and x >= 0]
    return min(got) if got else None


def add_smallest_delay(run_dir: str | os.PathLike, metrics: dict) -> None:
    """Record in the run's section the smallest delay its ``metrics`` report (the bound's
    scale); a run without a section is left as it is."""
    meta = read_run_metadata(run_dir)
    sec = meta.get(SECTION)
    if not isinstance(sec, dict):
        return
    sec["smallest_delay_s"] = smallest_delay_s(metrics)
    write_run_metadata(run_dir, meta)


def bound_us(smallest_delay: float | None) -> float:
    """The p99 lateness above which a run's testbed was late: :data:`LATE_BOUND_US`, or
    :data:`LATE_SHARE` of the smallest delay the run reports when that is smaller, but never
    below :data:`LATE_FLOOR_US`."""
    d = _finite(smallest_delay)
    if d is None or d <= 0:
        return LATE_BOUND_US
    return min(LATE_BOUND_US, max(LATE_FLOOR_US, LATE_SHARE * d * 1e6))


@dataclass(frozen=True)
class Verdict:
    """A run's (or a cell's) testbed error against its bound."""

    recorded: bool
    """False: the run has no section (written before it existed, or by another backend)."""
    late: bool = False
    """Some component's p99 lateness exceeded its bound (this one's: :attr:`bound_us`)."""
    component: str | None = None
    """The worst component: ``emulator bottleneck a_to_b``, ``sender of flow 3``, ``receiver of flow 3``."""
    p99_us: float | None = None
    max_us: float | None = None
    bound_us: float = LATE_BOUND_US
    run: str | None = None
    """Which run: its directory, or what names it (an option of ``advise --measure``)."""

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        """``emulator bottleneck a_to_b lateness p99 4.20 ms (max 9.80 ms) > bound 1.00 ms``."""
        if not self.recorded:
            return "testbed error not recorded"
        if self.component is None:
            return "no testbed error measured"
        what = "recv lag" if self.component.startswith("receiver") else "lateness"
        return (f"{self.component} {what} p99 {self.p99_us / 1e3:.2f} ms"
                + ("" if self.max_us is None else f" (max {self.max_us / 1e3:.2f} ms)")
                + f" {'>' if self.late else '<='} bound {self.bound_us / 1e3:.2f} ms")



def components(sec: dict) -> list[tuple[str, float, float | None, float]]:
    """Every ``(component, p99 µs, max µs, bound µs)`` of a section that has a p99: the
    emulator's links and the receivers' lags against :func:`bound_us` of the run's smallest
    delay (they add to the delays measured), the senders against :data:`SEND_LATE_BOUND_US`."""
    delay_bound = bound_us(sec.get("smallest_delay_s"))
    out = []
    for name, v in (sec.get("emulator_lateness_us") or {}).items():
        if isinstance(v, dict) and _finite(v.get("p99")) is not None:
            out.append((f"emulator {name}", _finite(v["p99"]), _finite(v.get("max")), delay_bound))
    for key, who, bound in (("send_lateness_us", "sender", SEND_LATE_BOUND_US), ("recv_lag_us", "receiver", delay_bound)):
        for fid, v in (sec.get(key) or {}).items():
            if isinstance(v, dict) and _finite(v.get("p99")) is not None:
                out.append((f"{who} of flow {fid}", _finite(v["p99"]), _finite(v.get("max")), bound))
    return out


def verdict(sec: dict | None, run: str | os.PathLike | None = None) -> Verdict:
    """``sec`` (a run's section) judged: its worst component (the largest p99 against its bound,
    :func:`components`); ``run`` names the run. No section: not recorded."""
    where = None if run is None else str(run)
    if not isinstance(sec, dict):
        return Verdict(recorded=False, run=where)
    comps = components(sec)
    if not comps:
        return Verdict(recorded=True, bound_us=bound_us(sec.get("smallest_delay_s")), run=where)
    name, p99, mx, bound = max(comps, key=lambda c: c[1] / c[3])
    return Verdict(recorded=True, late=p99 > bound, component=name, p99_us=p99, max_us=mx, bound_us=bound,
                   run=where)


def run_section(run_dir: str | os.PathLike) -> dict | None:
    """A run directory's section (None: not recorded, or no readable run.json)."""
    try:
        sec = read_run_metadata(run_dir).get(SECTION)
    except (OSError, ValueError, AttributeError):
        return None
    return sec if isinstance(sec, dict) else None


def run_verdict(run_dir: str | os.PathLike) -> Verdict:
    """:func:`verdict` of a run directory's section."""
    return verdict(run_section(run_dir), run_dir)


def worst(verdicts) -> Verdict | None:
    """The verdict to show for several runs (a cell, a sweep): the late one with the largest
    p99 over its bound, else the recorded one nearest its bound, else one not recorded; None
    without any."""
    vs = list(verdicts)
    if not vs:
        return None
    late = [v for v in vs if v.late]
    if late:
        return max(late, key=lambda v: v.p99_us / v.bound_us)
    rec = [v for v in vs if v.recorded and v.p99_us is not None]
    if rec:
        return max(rec, key=lambda v: v.p99_us / v.bound_us)
    return next((v for v in vs if v.recorded), vs[0])


#: A table cell's mark of a late testbed, and its footnote.
LATE_MARK = "†"
LATE_NOTE = (f"{LATE_MARK}: the testbed itself was late in a run of this cell (a p99 lateness above the bound of "
             "docs/testbed.md, \"When the testbed itself was late\"): its delays include the testbed's own error.")


def warning_line(command: str, verdicts: list[Verdict]) -> str | None:
    """The one warning line a command prints when any of ``verdicts`` is late (None when none
    is): how many runs, the worst component, its value and the bound."""
    late = [v for v in verdicts if v.late]
    if not late:
        return None
    w = worst(late)
    runs = f"{len(late)} of {len(verdicts)} runs" if len(verdicts) > 1 else "the run"
    where = f" ({w.run})" if w.run and len(verdicts) > 1 else ""
    return (f"tcpdelay {command}: warning: the testbed itself was late in {runs}: worst {w.text()}{where}; "
            "its delays include the testbed's error (docs/testbed.md, \"When the testbed itself was late\")")

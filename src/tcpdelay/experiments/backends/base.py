"""What an execution backend is: it gets a run's plan and directory, runs the plan, and hands
back what every part of the run answered; the run record is written from that by
:mod:`tcpdelay.experiments.record`, the same for every backend.

A backend (the testbed, :mod:`tcpdelay.experiments.backends.testbed`; ns-3,
:mod:`tcpdelay.experiments.backends.ns3`)
gets a :class:`BackendJob` — the pure :class:`~tcpdelay.experiments.plan.RunPlan` (hosts, link,
flows, ports, seeds, the run's length and timing: a backend never reads the scenario), the run
directory, a progress hook and an environment hook — and

* calls ``job.on_environment(env)`` once, as soon as its machinery is up, with what describes
  where the run happens (written to ``environment.json``);
* leaves the per-packet records of every media flow in the run directory's ``sent/`` and
  ``received/`` datasets (:mod:`tcpdelay.records` format; parts written elsewhere are moved there
  with :func:`tcpdelay.experiments.record.consolidate`);
* returns a :class:`BackendOutcome`: every part's answer by *part key*, the link's counters as a
  dict, the run's clock instants and the parts it lost (each in words, :func:`part_name`).

Part keys name the parts of a run the same way for every backend: ``tx:<flow_id>`` a media
sender, ``rx:<flow_id>`` a media receiver, ``cross:<flow_id>`` a cross-traffic client (the UDP
sender for a UDP flow), ``sink:<flow_id>`` a UDP cross-traffic sink, ``server:<host>`` the
cross-traffic server of a host. A part's answer is the dict (a media receiver: the list of
dicts) that :mod:`tcpdelay.transport` and :mod:`tcpdelay.traffic` return, or ``{"error": ...}``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tcpdelay.errors import ParameterError, TcpdelayError
from tcpdelay.experiments.plan import LEAD_S, RunPlan


class RunFailed(TcpdelayError):
    """A part of the run (the link emulator, a media sender or receiver, a cross-traffic
    process) died or never reported, so the run is not a measurement of the scenario. What it
    measured until then is kept in its directory (records, ``run.json`` with ``failed``)."""

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("the run lost a part: " + "; ".join(self.reasons))


@dataclass
class BackendJob:
    """What a backend is given to run (times in seconds; ``on_progress(elapsed_s, total_s)``
    about once a second, ``on_environment(env)`` once the machinery is up)."""
    plan: RunPlan
    run_dir: Path
    on_environment: Callable[[dict], None]
    on_progress: Callable[[float, float], None] | None = None


@dataclass
class BackendOutcome:
    """What a backend hands back (instants on the run's monotonic clock, in seconds)."""
    #: every part's answer by part key (see the module doc)
    results: dict[str, Any]
    #: the link's counters (per direction ``a_to_b``/``b_to_a``: ``drops`` etc.); None when lost
    counters: dict | None
    #: the run's start instant: flow start times are seconds after it
    t0_monotonic_s: float
    #: when the link's clock started (outages and traces are timed from it)
    link_start_monotonic_s: float
    #: wall-clock time the run started (Unix seconds)
    started_unix_s: float
    #: the parts lost, in words; non-empty = the run failed (:class:`RunFailed`)
    lost: list[str] = field(default_factory=list)
    #: the clock every time of the records is on (run.json ``clock``, ``clock_source``)
    clock: str = "shared-monotonic"
    clock_source: str = "CLOCK_MONOTONIC"
    #: how times recorded on another clock were moved onto the run's (run.json ``clock_offset``:
    #: per reference-kernel guest, its offset at the run's start and end and the error)
    clock_detail: dict | None = None
    #: the run's own error (run.json ``testbed_error``, :mod:`tcpdelay.results.testbed_error`);
    #: None for a backend that has none to measure (a simulation is never late)
    testbed_error: dict | None = None


class Backend(abc.ABC):
    """An execution backend, registered by name (:func:`tcpdelay.experiments.backends.get_backend`)."""

    name: str = ""

    @abc.abstractmethod
    def check(self) -> None:
        """Raise a one-line :class:`TcpdelayError` if this machine cannot run this backend
        (before anything is written)."""

    def unsupported(self, plan: RunPlan) -> list[Unsupported]:
        """Everything of ``plan`` this backend cannot run (empty: it runs it), all of it, never
        only the first. The default: nothing."""
        return []

    def check_plan(self, plan: RunPlan) -> None:
        """Raise one one-line :class:`~tcpdelay.errors.ParameterError` naming everything of
        ``plan`` this backend cannot run (:meth:`unsupported`), before anything is written or
        started."""
        problems = self.unsupported(plan)
        if problems:
            raise ParameterError(refusal(self.name, problems))

    def lead_s(self, plan: RunPlan) -> float:
        """How long after the links start the flows start when a link is timed (outages or a
        delivery trace, whose schedule the link gets before anything else starts): the time this
        backend needs to start ``plan``'s parts. The default: :data:`LEAD_S`."""
        return LEAD_S

    def notes(self, plan: RunPlan) -> list[str]:
        """What ``plan`` asks for that this backend runs only approximately (one line each, for
        stderr and environment.json). The default: nothing."""
        return []

    @abc.abstractmethod
    def run(self, job: BackendJob) -> BackendOutcome:
        """Run ``job.plan``; see the module doc for what it leaves and returns. A part lost is
        reported in ``lost`` (the record is still written); a run that could not start raises.
        Stopping is an exception (KeyboardInterrupt on Ctrl-C or a sweep's stop): every part
        started is stopped, its last records kept, before the exception goes on."""


@dataclass(frozen=True)
class Unsupported:
    """One thing of a plan a backend cannot run: ``what`` (a phrase: the setting and why),
    ``where`` ("host ltx1", "flow 'voip'", "link"; empty for the run as a whole) and a ``hint``
    said once at the end of a refusal however many problems share it (what the backend has)."""
    what: str
    where: str = ""
    hint: str = ""


#: Places named in a refusal for one problem at most (then "and N more").
PLACES_NAMED = 3


def places(wheres: list[str]) -> str:
    """Places of one problem together: "host a", "host b" -> "hosts a, b" (at most
    :data:`PLACES_NAMED` named of each kind)."""
    by_kind: dict[str, list[str]] = {}
    for w in wheres:
        kind, _, name = w.partition(" ")
        names = by_kind.setdefault(kind, [])
        if name and name not in names:
            names.append(name)
    out = []
    for kind, names in by_kind.items():
        shown = ", ".join(names[:PLACES_NAMED])
        if len(names) > PLACES_NAMED:
            shown += f" and {len(names) - PLACES_NAMED} more"
        out.append(kind + ("s" if len(names) > 1 else "") + (f" {shown}" if shown else ""))
    return ", ".join(out)


def refusal(backend: str, problems: list[Unsupported], subject: str = "this",
            scope: dict[str, str] | None = None) -> str:
    """The one line refusing every one of ``problems`` (:meth:`Backend.unsupported`): a problem
    found in several places is said once, naming them; ``scope`` adds to a problem (by its
    ``what``) where else it holds, e.g. which cells of a sweep."""
    grouped: dict[str, list[str]] = {}
    hints: list[str] = []
    for p in problems:
        grouped.setdefault(p.what, [])
        if p.where:
            grouped[p.what].append(p.where)
        if p.hint and p.hint not in hints:
            hints.append(p.hint)
    parts = []
    for what, wheres in grouped.items():
        head = places(wheres)
        parts.append((f"{head}: " if head else "") + what + (f" ({scope[what]})" if scope and what in scope else ""))
    return (f"backend {backend} cannot run {subject}: " + "; ".join(parts)
            + "".join(f" ({h})" for h in hints)
            + ("" if backend == "testbed" else "; run it on the testbed, or change these"))


def part_name(key: str, plan: RunPlan) -> str:
    """A part key (``tx:0``, ``rx:0``, ``cross:3``, ``sink:3``, ``server:ltx1``, ``play:4``,
    ``state:4``, ``httpd:4``) in words."""
    kind, _, ident = key.partition(":")
    if kind == "server":
        return f"cross-traffic server on host {ident}"
    fid = int(ident)
    streams = {s.flow_id: s for s in plan.streams}
    if kind in ("play", "state", "httpd"):
        s = streams[fid]
        what = {"play": f"player of stream {fid} '{s.name}' (host {s.client})",
                "state": f"TCP state sampler of stream {fid} '{s.name}' (host {s.server})",
                "httpd": f"HTTP server of stream {fid} '{s.name}' (host {s.server})"}
        return what[kind]
    media = {m.flow_id: m for m in plan.media}
    cross = {c.flow_id: c for c in plan.cross}
    if kind == "tx":
        m = media[fid]
        return f"media sender of flow {fid} '{m.name}' (host {m.sender})"
    if kind == "rx":
        m = media[fid]
        return f"media receiver of flow {fid} '{m.name}' (host {m.receiver})"
    c = cross[fid]
    if kind == "sink":
        return f"cross-traffic UDP sink of flow {fid} '{c.name}' (host {c.client})"
    if c.transport == "udp":
        return f"cross-traffic UDP sender of flow {fid} '{c.name}' (host {c.server})"
    return f"cross-traffic client of flow {fid} '{c.name}' (host {c.client})"

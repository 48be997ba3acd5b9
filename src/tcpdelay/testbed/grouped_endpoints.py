"""Many flows' media senders (or receivers) in one process: grouped endpoints.

A testbed run starts, by default, one process per flow end (:meth:`Host.spawn`): at 80 flows that
is 160 programs, each waking for its own packets, and on this 2-core machine their wake-ups and
the real-time throttling that follows are most of the one-way delay error (docs/testbed.md).
Here one process serves every flow end of a group: a thread per flow end, each moved into its
own host's network namespace for its whole life (setns(2) moves only the calling thread, and a
socket keeps the namespace it was created in: :func:`tcpdelay.testbed.netns.entered`), each
running the flow's own :func:`tcpdelay.transport.run_sender` or
:func:`tcpdelay.transport.run_receiver` — so every flow writes the same records as a process of
its own would (``sent/`` and ``received/`` in its flow directory, the same columns, the one
CLOCK_MONOTONIC) and returns the same result. Each thread becomes ``SCHED_RR`` itself
(:func:`tcpdelay.testbed.testbed.become_realtime` acts on the calling thread) once its sockets
are set up, as a process of its own does.

:func:`start_group` forks the group (with :meth:`Host.spawn`: it dies with the run, the testbed
kills it on close) and returns a :class:`MemberHandle` per member, shaped as the
:class:`~tcpdelay.testbed.testbed.CallHandle` the run path waits on: ``result``, ``died`` (the
group's death names the group), ``pid`` (SIGINT to it stops every member: the group's main
thread sets their ``stop`` event, and each writes its last records).

Flows over QUIC keep a process each (aioquic runs an asyncio loop per flow; not grouped here).

A member marked ``native`` keeps only its control exchange in its thread: its media sockets go to
the group's one ``tcpdelay-endpoint`` process (:mod:`tcpdelay.native`), started by the group's
main thread (the endpoint dies with the thread that started it) and closed when the group ends.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass
from typing import Any

from tcpdelay.errors import TestbedError
from tcpdelay.start_gate import Instant
from tcpdelay.testbed import netns as nsutil


#: The group's GIL switch interval (s; Python's default is 5 ms): a member due to send or read
#: waits at most about this long for another member's Python work (a records flush: building a
#: Parquet part takes milliseconds) before that member is made to let go.
SWITCH_INTERVAL_S = 0.0005


@dataclass(frozen=True)
class Member:
    """One flow end served by a group: its part key (``tx:<flow>``, ``rx:<flow>``), the
    namespace it runs in, and what it runs: a sender (``config``, ``source``, ``start_at``, the
    monotonic instant its flow starts) or a receiver (``config``)."""
    key: str
    netns: str
    config: Any
    source: Any = None
    start_at: Instant = None
    native: bool = False


def media_sender(config, source, start_at: Instant, realtime: bool, stop: threading.Event | None = None) -> dict:
    """One flow's media sender, in a process of its own (``stop`` None) or a group's thread:
    real-time once set up, then :func:`tcpdelay.transport.run_sender`, which offers the run at
    once and sends its first packet at the start instant."""
    from tcpdelay.testbed.testbed import become_realtime
    from tcpdelay.transport import run_sender

    if realtime:
        realtime = become_realtime()
    return {**run_sender(config, source, stop=stop, start_at=start_at).to_dict(), "realtime": realtime}


def media_receiver(config, realtime: bool, stop: threading.Event | None = None) -> list[dict]:
    """One flow's media receiver, in a process of its own (``stop`` None) or a group's thread."""
    from tcpdelay.testbed.testbed import become_realtime
    from tcpdelay.transport import run_receiver

    if realtime:
        realtime = become_realtime()
    return [{**r.to_dict(), "realtime": realtime} for r in run_receiver(config, stop=stop)]


def _sender(m: Member, realtime: bool, stop: threading.Event) -> dict:
    return media_sender(m.config, m.source, m.start_at, realtime, stop)


def _receiver(m: Member, realtime: bool, stop: threading.Event) -> list[dict]:
    return media_receiver(m.config, realtime, stop)


def _native_sender(m: Member, engine, stop: threading.Event) -> dict:
    from tcpdelay.native.sender import run_native_sender

    return run_native_sender(m.config, m.source, engine, stop=stop, start_at=m.start_at)


def _native_receiver(m: Member, engine, stop: threading.Event) -> list[dict]:
    from tcpdelay.native.receiver import run_native_receiver

    return run_native_receiver(m.config, engine, stop=stop)


def serve_group(members: list[Member], realtime: bool) -> dict[str, tuple[bool, Any]]:
    """Run every member in a thread of its own, inside its namespace; return, by key,
    ``(True, value)`` or ``(False, "Type: message")``. SIGINT (the run's stop) sets every
    member's ``stop``; the group returns once every member has. Native members share one
    ``tcpdelay-endpoint``, real-time (SCHED_RR) when ``realtime``."""
    import sys
    import traceback

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    stop = threading.Event()
    out: dict[str, tuple[bool, Any]] = {}
    engine = None
    if any(m.native for m in members):
        from tcpdelay.native.engine import NativeEngine
        from tcpdelay.testbed.testbed import REALTIME_PRIORITY

        engine = NativeEngine(rt_priority=REALTIME_PRIORITY if realtime else 0)

    def run(m: Member) -> None:
        try:
            with nsutil.entered(m.netns):
                if m.native:      # real time: the endpoint, which sends and reads
                    if m.key.startswith("tx:"):
                        out[m.key] = (True, {**_native_sender(m, engine, stop), "realtime": engine.realtime})
                    else:
                        out[m.key] = (True, [{**r, "realtime": engine.realtime}
                                             for r in _native_receiver(m, engine, stop)])
                    return
                fn = _sender if m.key.startswith("tx:") else _receiver
                out[m.key] = (True, fn(m, realtime, stop))
        except BaseException as err:  # noqa: BLE001 - the member's error goes back by its key
            out[m.key] = (False, f"{type(err).__name__}: {err}\n{traceback.format_exc()}")

    def interrupt(signum, frame) -> None:
        stop.set()
        if engine is not None:      # native members sleep on their events: wake them
            engine.interrupt()

    signal.signal(signal.SIGINT, interrupt)
    threads = [threading.Thread(target=run, args=(m,), name=m.key, daemon=True) for m in members]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)      # (a join with a timeout lets the SIGINT handler run)
    finally:
        if engine is not None:
            engine.close()
    return out


class GroupHandle:
    """The process of a group (a :class:`~tcpdelay.testbed.testbed.CallHandle`) and what it
    served; :meth:`member` gives each member's handle."""

    def __init__(self, call, label: str, keys: list[str]):
        self.call, self.label, self.keys = call, label, keys
        self._results: dict[str, tuple[bool, Any]] | None = None

    @property
    def pid(self) -> int:
        return self.call.pid

    def results(self, timeout_s: float | None) -> dict[str, tuple[bool, Any]]:
        if self._results is None:
            try:
                self._results = self.call.result(timeout_s)
            except TimeoutError:
                raise
            except Exception as err:  # noqa: BLE001 - the group died: every member with it
                raise TestbedError(f"{self.describe()}: {err}") from None
        return self._results

    def describe(self) -> str:
        return f"the grouped {self.label} process (pid {self.call.pid}, serving {len(self.keys)} flow ends)"

    def died(self) -> str | None:
        """How the group's process ended abnormally ("killed by SIGKILL"), None while it runs
        or when it returned."""
        return self.call.died()

    def member(self, key: str) -> "MemberHandle":
        return MemberHandle(self, key)


class MemberHandle:
    """One member's view of its group, waited on as a process of its own would be."""

    def __init__(self, group: GroupHandle, key: str):
        self.group, self.key = group, key

    @property
    def pid(self) -> int:
        return self.group.pid

    @property
    def done(self) -> bool:
        return self.group._results is not None

    def result(self, timeout_s: float | None = None) -> Any:
        ok, value = self.group.results(timeout_s).get(self.key, (False, "no result from the group"))
        if not ok:
            from tcpdelay.testbed.testbed import RemoteError

            raise RemoteError(f"{self.key} in {self.group.describe()} raised: {value}")
        return value

    def died(self) -> str | None:
        how = self.group.died()
        return f"was lost with {self.group.describe()}: {how}" if how else None

    def kill(self) -> None:
        self.group.call.kill()


#: Flow ends per group process at most: a run with more gets several groups of each side (one
#: Python thread runs at a time in a process; two processes per side can use both cores).
MAX_GROUP_MEMBERS = 40


def start_group(host, members: list[Member], realtime: bool, label: str) -> dict[str, MemberHandle]:
    """Fork the processes (through ``host``: they die with the testbed) serving ``members``, at
    most :data:`MAX_GROUP_MEMBERS` each, as evenly as that allows; their handles by key.
    ``label`` names the group in errors ("media senders")."""
    # native members' threads only do their control exchange: one group (one endpoint) for all
    limit = len(members) if members and all(m.native for m in members) else MAX_GROUP_MEMBERS
    n = -(-len(members) // limit)
    out: dict[str, MemberHandle] = {}
    for i in range(n):
        chunk = members[i::n]
        call = host.spawn(serve_group, chunk, realtime)
        call._what = f"the grouped {label} process"
        group = GroupHandle(call, label, [m.key for m in chunk])
        out.update({m.key: group.member(m.key) for m in chunk})
    return out


#: The environment variable that chooses how a testbed run starts its TCP and UDP media flow
#: ends: ``grouped`` (:func:`start_group`), ``per-flow`` (a process each), ``native`` (grouped,
#: with the media of every flow :func:`tcpdelay.native.supports` in ``tcpdelay-endpoint``), or
#: ``auto`` (the default: from :data:`GROUPED_FROM_FLOWS` such flows on, ``native`` where
#: ``tcpdelay-endpoint`` is built, else ``grouped``; a process each below that).
ENDPOINTS_ENV = "TCPDELAY_MEDIA_ENDPOINTS"
ENDPOINTS_CHOICES = ("auto", "grouped", "per-flow", "native")
#: ``auto`` groups a run's media flow ends from this many TCP/UDP media flows on (on the native
#: endpoint where it is built: at 80 VoIP flows on two cores the grouped Python ends left a delay
#: error of p99 625 ms after the first 2 s, the native ones 3.3-5.3 ms, docs/native-endpoint.md).
#: Below it a run keeps a process per flow end, as every smaller run has been measured with.
GROUPED_FROM_FLOWS = 21


def endpoints_mode(flows: int) -> str:
    """``grouped``, ``per-flow`` or ``native`` for a run of ``flows`` TCP/UDP media flows, by
    :data:`ENDPOINTS_ENV`; a value outside :data:`ENDPOINTS_CHOICES` is a ParameterError."""
    from tcpdelay.errors import ParameterError

    choice = os.environ.get(ENDPOINTS_ENV, "auto").strip() or "auto"
    if choice not in ENDPOINTS_CHOICES:
        raise ParameterError(f"{ENDPOINTS_ENV}: {choice!r} is not one of {', '.join(ENDPOINTS_CHOICES)}")
    if choice == "auto":
        if flows < GROUPED_FROM_FLOWS:
            return "per-flow"
        return "native" if native_endpoint_built() else "grouped"
    return choice


def native_endpoint_built() -> bool:
    """Whether ``tcpdelay-endpoint`` is found (:func:`tcpdelay.native.engine.find_binary`): what
    ``auto`` needs to choose the native endpoints; without it (no cargo on this machine) a large
    run is grouped on Python, as before the native endpoint, and says so in ``media_endpoints``."""
    from tcpdelay.errors import EnvironmentNotSupported
    from tcpdelay.native.engine import BINARY_ENV, find_binary

    try:
        find_binary()
    except EnvironmentNotSupported:
        if os.environ.get(BINARY_ENV):
            raise                      # named by the user and not there: one line, not a fallback
        return False
    return True


__all__ = ["Member", "GroupHandle", "MemberHandle", "serve_group", "start_group", "endpoints_mode",
           "native_endpoint_built"]

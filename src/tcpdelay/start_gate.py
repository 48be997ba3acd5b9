"""A run's start instant, fixed once every program of the run is ready.

A testbed run starts its programs (forked children of the run's process: media senders, cross
traffic clients, servers), each prepares (a media sender offers its run and opens its
connections) and then waits for its start instant. Fixing that instant before starting them
needs a margin for the slowest start this machine could have now, and the margin that is safe
under load is seconds too long on an idle machine (measured: the 110 clients of papers/004
§5.3 had all entered their functions 0.8 s after the first was started on an idle machine, ~3 s
beside four test workers and two busy loops; a fixed margin has to cover the second and is
wasted in the first). With a gate, each program reports it is ready and waits; once all are,
the run fixes ``t0`` a short margin later and tells them all at once.

A :class:`StartGate` lives in shared memory: it is made before the programs are forked, and
every child inherits it (the testbed forks; nothing is pickled). :meth:`StartGate.at` gives a
program its start instant as a :class:`StartAt` (``t0`` plus an offset), which
:func:`start_instant` resolves in the child: it reports ready, waits for the gate to open and
returns ``t0 + offset`` as a ``time.monotonic()`` instant. A program that only needs to know
when the run ends (a server, a sink) gets :meth:`StartGate.later`: it does not hold the run up,
and reads the instant with :func:`instant_if_fixed` while it serves.

Every function that takes a start instant also takes a plain ``time.monotonic()`` float (the
instant fixed in advance, as for a timed link whose schedule starts with the emulator) or
``None`` (now).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
import time
from typing import Callable, Union


class StartGate:
    """The start of one run, shared with the processes forked after it is made.

    In the run's process: :meth:`at` / :meth:`later` for each program's instant (before forking
    it), :meth:`wait_ready` for every :meth:`at` to be resolved, then :meth:`open` with ``t0``.
    """

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self._ready = ctx.Semaphore(0)          # released once by each program that is ready
        self._open = ctx.Event()
        self._t0 = ctx.RawValue("d", math.nan)  # the start instant (monotonic s), once open
        #: How many :class:`StartAt` that wait were handed out (what :meth:`wait_ready` waits for).
        self.expected = 0
        self.ready = 0

    def at(self, offset_s: float = 0.0) -> "StartAt":
        """A program's start instant, ``t0 + offset_s``: the run waits for it to be ready."""
        self.expected += 1
        return StartAt(self, float(offset_s), waits=True)

    def later(self, offset_s: float = 0.0) -> "StartAt":
        """An instant ``t0 + offset_s`` for a program the run does not wait for (a server)."""
        return StartAt(self, float(offset_s), waits=False)

    def wait_ready(self, timeout_s: float, *, gone: Callable[[], bool] = lambda: False,
                   poll_s: float = 0.05) -> bool:
        """Wait until every program given :meth:`at` is ready (True), ``timeout_s`` passes or
        ``gone()`` says a program ended before it was ready (False)."""
        deadline = time.monotonic() + timeout_s
        while self.ready < self.expected:
            if self._ready.acquire(timeout=poll_s):
                self.ready += 1
                continue
            if time.monotonic() >= deadline or gone():
                return False
        return True

    def open(self, t0: float) -> None:
        """Fix the start instant ``t0`` (``time.monotonic()``) and wake every waiting program."""
        if not self.is_open:
            self._t0.value = float(t0)
            self._open.set()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    @property
    def t0(self) -> float | None:
        """The start instant once :meth:`open`, else None."""
        return self._t0.value if self.is_open else None


class StartAt:
    """``t0 + offset_s`` of a :class:`StartGate`, resolved in the program that got it."""

    def __init__(self, gate: StartGate, offset_s: float, waits: bool):
        self.gate, self.offset_s, self.waits = gate, offset_s, waits
        self._reported = False

    def resolve(self, stop: threading.Event | None = None) -> float | None:
        """Report ready (once), wait for the gate, return the instant; None if ``stop`` was set
        first."""
        if self.waits and not self._reported:
            self._reported = True
            self.gate._ready.release()
        while not self.gate._open.wait(0.5):
            if stop is not None and stop.is_set():
                return None
        return self.gate._t0.value + self.offset_s

    def fixed(self) -> float | None:
        """The instant if the gate is open, else None (without waiting)."""
        t0 = self.gate.t0
        return None if t0 is None else t0 + self.offset_s

    def __repr__(self) -> str:
        return f"StartAt(t0 + {self.offset_s:g} s{'' if self.waits else ', not waited for'})"


#: A start instant as the programs take it: a ``time.monotonic()`` instant, a gate's, or now.
Instant = Union[float, StartAt, None]


def start_instant(start_at: Instant, stop: threading.Event | None = None) -> float | None:
    """The ``time.monotonic()`` instant a program starts at: ``start_at`` itself, now for None,
    and for a :class:`StartAt` the gate's (reporting ready and waiting for it to open; None if
    ``stop`` is set first)."""
    if start_at is None:
        return time.monotonic()
    if isinstance(start_at, StartAt):
        return start_at.resolve(stop)
    return float(start_at)


#: How long past its own duration a server keeps serving while its run's start is not fixed
#: yet (the run fixes it within seconds, or fails and stops its programs).
UNFIXED_GRACE_S = 60.0


def instant_if_fixed(start_at: Instant) -> float | None:
    """``start_at`` as a ``time.monotonic()`` instant if it is known now, else None (a gate not
    open yet); never waits. None is now."""
    if start_at is None:
        return time.monotonic()
    if isinstance(start_at, StartAt):
        return start_at.fixed()
    return float(start_at)


class Deadline:
    """``duration_s`` after a start instant that may be fixed only later (a server's end).

    Until the instant is fixed the deadline is ``duration_s`` + :data:`UNFIXED_GRACE_S` from
    when it was made; :meth:`value` reads it again each time until it is fixed."""

    def __init__(self, start_at: Instant, duration_s: float):
        self._start_at, self._duration_s = start_at, duration_s
        self._value = None
        self._provisional = time.monotonic() + duration_s + UNFIXED_GRACE_S
        self.value()

    def value(self) -> float:
        """The deadline (``time.monotonic()``)."""
        if self._value is None:
            t = instant_if_fixed(self._start_at)
            if t is not None:
                self._value = t + self._duration_s
        return self._provisional if self._value is None else self._value


def process_ended(pid: int) -> bool:
    """Whether child ``pid`` has ended (without reaping it)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


__all__ = ["StartGate", "StartAt", "Instant", "Deadline", "start_instant", "instant_if_fixed",
           "process_ended", "UNFIXED_GRACE_S"]

"""How punctually this process's sleeps end: timer slack and the kernel's timer resolution.

Every paced packet and every timed wake-up of a run is a sleep that the kernel ends a little
late. Two settings bound how late, and both differ between machines:

- the thread's *timer slack* (``prctl(2)``, ``PR_SET_TIMERSLACK``): the kernel may end a
  sleep up to this much late to batch wake-ups. 50 µs by default, inherited from the parent
  process, and set to milliseconds by some supervisors. A SCHED_FIFO thread has none.
- the *timer resolution* (``clock_getres(CLOCK_MONOTONIC)``): 1 ns with high-resolution
  timers; one scheduler tick (4 ms at HZ=250) without them, when no sleep ends between ticks.

The testbed and the command line drop the slack to 1 ns at start (children inherit it), and
runs record both values in their metadata.
"""

from __future__ import annotations

import ctypes
import time

_PR_SET_TIMERSLACK, _PR_GET_TIMERSLACK = 29, 30


def drop_timer_slack() -> int | None:
    """Ask for 1 ns of timer slack for this thread and what it starts afterwards.

    Returns the slack now in force in nanoseconds (0 for a SCHED_FIFO thread), or ``None``
    where ``prctl`` is not available (not Linux).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(1), 0, 0, 0)
    except (OSError, AttributeError):
        return None
    return timer_slack_ns()


def timer_slack_ns() -> int | None:
    """This thread's timer slack in nanoseconds, or ``None`` where it cannot be read."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        got = libc.prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0)
    except (OSError, AttributeError):
        return None
    return int(got) if got >= 0 else None


def clock_resolution_s() -> float:
    """The kernel's timer resolution for CLOCK_MONOTONIC, in seconds."""
    return time.clock_getres(time.CLOCK_MONOTONIC)

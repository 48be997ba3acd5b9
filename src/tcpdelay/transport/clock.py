"""The one clock of a run: CLOCK_MONOTONIC, in integer nanoseconds.

Inside the testbed every host is a network namespace of one kernel, and namespaces share
CLOCK_MONOTONIC (only time namespaces, which the testbed does not create, would offset it), so
``recv_time - send_time`` is the one-way delay. CLOCK_MONOTONIC rather than CLOCK_REALTIME
because NTP may step the real-time clock during a run; it never steps the monotonic one.

Across real hosts the two clocks have unrelated origins. A run is then marked
``"clock": "unsynchronized"`` in run.json and delays mean something only relative to the run's
minimum (delay - min(delay), as irtt reports one-way delays without synchronized clocks).
Whether sender and receiver share a kernel is decided by comparing the kernel's boot id
(``/proc/sys/kernel/random/boot_id``), which the sender sends in its hello.
"""

from __future__ import annotations

import time

CLOCK_NAME = "CLOCK_MONOTONIC"
SHARED = "shared-monotonic"
UNSYNCHRONIZED = "unsynchronized"

now_ns = time.monotonic_ns


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def clock_for_peer(peer_boot_id: str) -> str:
    """SHARED when the peer runs on this kernel (same boot id), else UNSYNCHRONIZED."""
    mine = boot_id()
    return SHARED if mine and peer_boot_id == mine else UNSYNCHRONIZED

"""Which parallel connection carries the next media packet (Brosh et al., "The
Delay-Friendliness of TCP for Real-Time Traffic", §7.2 and §8.2).

- :class:`BlindScheduler` — delay-agnostic round robin over the N connections.
- :class:`IntelligentScheduler` — delay-aware: the connection with the least unsent data that
  is not in loss recovery or timeout. "Unsent" is what waits in the application's queue for
  that connection plus what the kernel holds but has not yet sent (SIOCOUTQNSD); the TCP state
  is TCP_INFO ``tcpi_ca_state`` (Recovery = fast recovery, Loss = after a retransmission
  timeout). If every connection is in recovery or timeout, the least-unsent one of all is
  used. Ties go round robin from the connection after the last one chosen, so that while the
  flow is application-limited (every queue empty) the load is still spread and every
  connection's window stays open.

Both work on :class:`ConnectionView` snapshots, so they are pure and testable without sockets.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from tcpdelay.errors import ParameterError

# linux/tcp.h enum tcp_ca_state
CA_OPEN, CA_DISORDER, CA_CWR, CA_RECOVERY, CA_LOSS = range(5)
CA_STATE_NAMES = ("open", "disorder", "cwr", "recovery", "loss")
SCHEDULERS = ("blind", "intelligent")


class ConnectionView(NamedTuple):
    index: int
    unsent_bytes: int      # application queue + kernel unsent (SIOCOUTQNSD)
    ca_state: int          # tcpi_ca_state; CA_OPEN when unknown


class BlindScheduler:
    name = "blind"
    needs_state = False

    def __init__(self, connections: int):
        self.n = connections
        self._next = 0

    def pick(self, views: Sequence[ConnectionView] | None = None) -> int:
        i = self._next
        self._next = (i + 1) % self.n
        return i


class IntelligentScheduler:
    name = "intelligent"
    needs_state = True

    def __init__(self, connections: int):
        self.n = connections
        self._last = connections - 1

    def pick(self, views: Sequence[ConnectionView]) -> int:
        usable = [v for v in views if v.ca_state not in (CA_RECOVERY, CA_LOSS)] or list(views)
        start = self._last + 1

        def key(v: ConnectionView):
            return (v.unsent_bytes, (v.index - start) % self.n)

        choice = min(usable, key=key).index
        self._last = choice
        return choice


def make_scheduler(name: str, connections: int):
    if name == "blind":
        return BlindScheduler(connections)
    if name == "intelligent":
        return IntelligentScheduler(connections)
    raise ParameterError(f"scheduler: {name!r} is not one of {', '.join(SCHEDULERS)}")

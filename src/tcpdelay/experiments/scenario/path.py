"""The ``[path]`` and ``[access]`` tables: the links between the two sides, each direction
resolved into the link's own :class:`~tcpdelay.link.DirectionSpec`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from tcpdelay.experiments.scenario.base import StrictTable
from tcpdelay.link import (
    AqmSpec,
    DelaySeconds,
    DirectionSpec,
    JitterSeconds,
    LossSpec,
    Outage,
    QueueBytes,
    QueuePackets,
    RateBps,
)

#: The path MTU's bounds (the testbed's: 576 to 9000 bytes).
MIN_MTU_BYTES, MAX_MTU_BYTES = 576, 9000
#: The path MTU when ``mtu_bytes`` is unset.
DEFAULT_MTU_BYTES = 1500


# The loss models and outage windows are the link's own (:mod:`tcpdelay.link`); a direction's keys
# and limits are the link's, with ``trace`` for the emulator's ``trace_file`` and every key
# optional (resolved per direction, see :meth:`Path.direction`).
Loss = LossSpec


class Direction(StrictTable):
    """One direction of the path. Every key is optional: unset keys come from the ``[path]``
    table (the defaults for both directions), then from the built-in defaults (no delay, no
    loss, no rate limit, the backend's default queue, no outages)."""

    delay_s: DelaySeconds | None = None
    jitter_s: JitterSeconds | None = None
    reorder: bool | None = None
    loss: Loss | None = None
    rate_bps: RateBps | None = None
    trace: str | None = None
    queue_packets: QueuePackets | None = None
    queue_bytes: QueueBytes | None = None
    outages: tuple[Outage, ...] | None = None
    aqm: AqmSpec | None = None
    """The bottleneck's queue discipline (the link's ``aqm`` table: drop_tail, codel, fq_codel,
    pie, each with ``ecn``); unset: drop-tail."""

    @model_validator(mode="after")
    def _exclusive(self):
        if self.rate_bps is not None and self.trace is not None:
            raise ValueError("rate_bps and trace are exclusive: give at most one")
        if self.queue_packets is not None and self.queue_bytes is not None:
            raise ValueError("queue_packets and queue_bytes are exclusive: give at most one")
        return self


class Path(Direction):
    """The path between the two sides. Keys given here apply to both directions; ``forward``
    (the direction of the media, sender -> receiver) and ``reverse`` (its ACKs) override them.
    ``rtt_s`` is a shortcut for ``delay_s = rtt_s / 2`` each way."""

    rtt_s: Annotated[float, Field(ge=0.0, le=120.0, allow_inf_nan=False)] | None = None
    mtu_bytes: Annotated[int, Field(ge=MIN_MTU_BYTES, le=MAX_MTU_BYTES)] | None = None
    """The path MTU (bytes) of every interface and of the emulated link; unset: 1500."""
    forward: Direction = Field(default_factory=Direction)
    reverse: Direction = Field(default_factory=Direction)

    @model_validator(mode="after")
    def _rtt(self):
        if self.rtt_s is not None and self.delay_s is not None:
            raise ValueError("rtt_s and delay_s are exclusive: give the RTT or the one-way delay")
        return self

    def direction(self, which: Literal["forward", "reverse"]) -> DirectionSpec:
        """``forward`` or ``reverse`` with the path-wide keys filled in: the link's own
        :class:`~tcpdelay.link.DirectionSpec` (the scenario's ``trace`` is its ``trace_file``;
        outages in seconds from the run's start, see :meth:`~tcpdelay.link.DirectionSpec.later`)."""
        out: dict[str, Any] = {"delay_s": self.rtt_s / 2} if self.rtt_s is not None else {}
        return _resolved(out, (self, getattr(self, which)), {"rtt_s", "mtu_bytes", "forward", "reverse"})

    @property
    def mtu(self) -> int:
        """The path MTU in bytes (``mtu_bytes``, default 1500)."""
        return DEFAULT_MTU_BYTES if self.mtu_bytes is None else int(self.mtu_bytes)


def _resolved(out: dict[str, Any], levels: tuple[Direction, ...], exclude: set[str]) -> DirectionSpec:
    """``out`` with each level's keys laid over it in turn (the scenario's ``trace`` is the link's
    ``trace_file``): the link's :class:`~tcpdelay.link.DirectionSpec`."""
    for level in levels:
        given = level.model_dump(exclude_none=True, exclude=exclude)
        # rate/trace and queue_packets/queue_bytes are each one choice: a level that makes it
        # replaces the other's choice.
        for group in (("rate_bps", "trace"), ("queue_packets", "queue_bytes")):
            if any(k in given for k in group):
                for k in group:
                    out.pop("trace_file" if k == "trace" else k, None)
        for key in given:
            out["trace_file" if key == "trace" else key] = getattr(level, key)
    return DirectionSpec(**out)


class Access(Direction):
    """Every host's own access link into its side's router (papers/004 Fig 1: each source and
    each sink reaches the shared bottleneck through a link of its own). Keys here apply to every
    access link; ``left`` (the side that sends forward flows) and ``right`` override them per
    side; each applies to both directions of a link (papers/004's packet errors hit the sinks'
    links both ways). With ``[access]`` every flow gets a sending host and a receiving host of
    its own, each with its own link and loss process."""

    left: Direction = Field(default_factory=Direction)
    right: Direction = Field(default_factory=Direction)

    def side(self, which: Literal["left", "right"]) -> DirectionSpec:
        """The access link of a host on side ``which`` (the same both ways)."""
        return _resolved({}, (self, getattr(self, which)), {"left", "right"})

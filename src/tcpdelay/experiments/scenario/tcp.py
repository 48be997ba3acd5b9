"""The ``tcp`` table of a flow, a cross-traffic entry or a stream: a preset with overrides, and
the congestion-control choice."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, field_validator

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario.base import StrictTable
from tcpdelay.experiments.scenario.path import MAX_MTU_BYTES

#: TCP presets (the testbed's :data:`tcpdelay.testbed.spec.PRESETS`): the paper-era stack and
#: today's Linux defaults.
TCP_PRESETS = ("newreno-2008", "linux-default")

#: IPv4 + TCP headers and the timestamp option a data segment carries besides its payload.
MSS_OVERHEAD_BYTES = 52
#: The smallest payload per segment tcp.mss_bytes takes (Linux's TCP_MIN_MSS, 88, less 12).
MIN_MSS_BYTES = 76
#: Per-socket TCP keys only the ``transfers`` cross kind applies.
TRANSFERS_ONLY_TCP_KEYS = ("mss_bytes", "window_clamp_bytes")


class Tcp(StrictTable):
    """TCP settings of a flow: a ``preset`` with overrides on top. Host-wide knobs (SACK, RACK,
    TLP, window validation after idle, metrics caching, initial window) and per-socket knobs
    (congestion control, Nagle, TCP_NOTSENT_LOWAT, buffer sizes) are listed together; a backend
    applies each where it belongs."""

    preset: str | None = None
    congestion_control: str | dict[str, Any] | None = None
    """A name (``cubic``, ``vegas``: ``tcpdelay cc list``) or a table with the variant's
    parameters, ``{name = "vegas", alpha = 1, beta = 3}``."""
    initcwnd_segments: Annotated[int, Field(ge=1, le=1000)] | None = None
    sack: bool | None = None
    rack: bool | None = None
    tlp: bool | None = None
    slow_start_after_idle: bool | None = None
    no_metrics_save: bool | None = None
    ecn: Annotated[int, Field(ge=0, le=2)] | None = None
    nodelay: bool | None = None
    notsent_lowat_bytes: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    sndbuf_bytes: Annotated[int, Field(ge=1024, le=2**31 - 1)] | None = None
    rcvbuf_bytes: Annotated[int, Field(ge=1024, le=2**31 - 1)] | None = None
    mss_bytes: Annotated[int, Field(ge=MIN_MSS_BYTES, le=MAX_MTU_BYTES - MSS_OVERHEAD_BYTES)] | None = None
    """The most payload bytes a data segment carries (the MSS as papers/001 counts it: payload
    per segment, TCP/IP headers and options not included). Linux: ``TCP_MAXSEG`` of
    ``mss_bytes + 12`` (the timestamp option, which Linux subtracts) on both sockets of a
    connection, set before connect/listen, so each SYN advertises it; ns-3: ``SegmentSize``.
    It must fit ``path.mtu_bytes`` with 52 bytes of IP, TCP and timestamp headers. ``transfers``
    only."""
    window_clamp_bytes: Annotated[int, Field(ge=1024, le=2**30)] | None = None
    """The largest window the receiver advertises (papers/001's ``W_max`` times the MSS). Linux:
    ``TCP_WINDOW_CLAMP`` on the receiving socket (the transfers client), set before connect so
    the SYN's window already respects it and again after the first read (Linux replaces the
    clamp with what the receive buffer holds at the first segment above 536 bytes), with the
    socket's receive buffer locked at twice the clamp (receive-buffer autotuning would move the
    clamp with the buffer); ns-3: the receiver's ``RcvBufSize`` (ns-3 advertises
    its free receive buffer). Linux rounds the window it advertises down to a multiple of its
    receive MSS, which counts the 12-byte timestamp option: ``W`` whole segments of ``mss_bytes``
    need ``W * (mss_bytes + 12)`` here (``W * mss_bytes`` gives ``W - 1`` on Linux, ``W`` in
    ns-3); the transfers rows report the window in force at the end (``peer_window_last_bytes``)
    and the largest advertised (``peer_window_max_bytes``).
    ``transfers`` only."""

    @field_validator("preset")
    @classmethod
    def _preset(cls, v):
        if v is not None and v not in TCP_PRESETS:
            raise ValueError(f"{v!r} is not one of {', '.join(TCP_PRESETS)}")
        return v

    @field_validator("congestion_control")
    @classmethod
    def _cc(cls, v):
        # Which algorithms exist depends on the kernel; the backend checks availability.
        if v is None:
            return v
        name, params = congestion_choice(v)
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_+]{1,15}", name):
            raise ValueError(f"{name!r} is not a congestion-control name (e.g. reno, cubic, vegas: tcpdelay cc list)")
        from tcpdelay.testbed.congestion import VARIANTS, check_params

        if name in VARIANTS:
            try:
                check_params(name, params)
            except ParameterError as err:
                raise ValueError(str(err)) from None
        elif params:
            raise ValueError(f"{name!r} takes no parameters (a kernel algorithm, not one of {', '.join(VARIANTS)})")
        return v


def congestion_choice(value: str | dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``(name, parameters)`` of a ``congestion_control`` value (a name or a table with ``name``)."""
    if isinstance(value, dict):
        return value.get("name"), {k: x for k, x in value.items() if k != "name"}
    return value, {}

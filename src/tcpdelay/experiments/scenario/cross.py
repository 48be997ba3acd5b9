"""The ``[[cross]]`` tables: cross traffic, one class per kind (``kind`` picks it)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from tcpdelay.experiments.scenario.base import FlowDirection, PositiveSeconds, Seconds, StrictTable
from tcpdelay.experiments.scenario.tcp import Tcp


class _Cross(StrictTable):
    """Common keys: ``count`` flows (0 turns the entry off, handy in a sweep), each starting at
    ``start_s`` plus a uniform random ``start_spread_s`` (drawn per flow from the run's seed),
    stopping at ``stop_s`` (default: the end of the run) or when its work is done."""

    count: Annotated[int, Field(ge=0, le=200)] = 1
    start_s: Seconds = 0.0
    start_spread_s: Seconds = 0.0
    stop_s: PositiveSeconds | None = None
    direction: FlowDirection = "forward"

    @model_validator(mode="after")
    def _times(self):
        if self.stop_s is not None and self.stop_s <= self.start_s + self.start_spread_s:
            raise ValueError(f"stop_s {self.stop_s:g} must be after the latest start "
                             f"{self.start_s + self.start_spread_s:g}")
        return self


class BulkCross(_Cross):
    """Bulk TCP (FTP-like): ``count`` connections each sending ``size_bytes`` (unset: until the
    flow stops), e.g. the five FTP flows of Brosh et al. §5.3 or the 28 MB download of the HSPA audio study."""

    kind: Literal["bulk"]
    size_bytes: Annotated[int, Field(ge=1)] | None = None
    tcp: Tcp = Field(default_factory=Tcp)


class WebOnOffCross(_Cross):
    """The web traffic of Brosh et al. §5.3 (SRI/ISI generator), in one of two readings
    (:mod:`tcpdelay.traffic.web_onoff`). ``mode = "connections"``: each of ``count`` web flows
    alternates a response of exponentially distributed duration (mean ``on_mean_s``) sent in
    ``packet_size_bytes`` segments over a new TCP connection, and an exponentially distributed
    idle time (mean ``off_mean_s``). ``mode = "poisson"``: one TCP connection per flow carrying
    a ``packet_size_bytes`` message at exponentially distributed intervals (mean
    ``gap_mean_s``)."""

    kind: Literal["web_onoff"]
    mode: Literal["connections", "poisson"] = "connections"
    on_mean_s: PositiveSeconds = 0.05
    off_mean_s: PositiveSeconds = 0.05
    gap_mean_s: Annotated[float, Field(ge=1e-4, le=3600.0, allow_inf_nan=False)] = 0.05
    packet_size_bytes: Annotated[int, Field(ge=64, le=1448)] = 512
    tcp: Tcp = Field(default_factory=Tcp)


class PageLoadCross(_Cross):
    """The page load of the HSPA audio study: ``connections`` parallel TCP connections fetching
    ``total_bytes`` in total, all starting at one instant drawn uniformly from [``start_s``,
    ``start_s + start_spread_s``] (defaults 10-12 s). The initial window is
    ``tcp.initcwnd_segments`` (IW3 or IW10). ``count`` independent page loads."""

    kind: Literal["page_load"]
    connections: Annotated[int, Field(ge=1, le=100)] = 1
    total_bytes: Annotated[int, Field(ge=1)] = 372_000
    start_s: Seconds = 10.0
    start_spread_s: Seconds = 2.0
    tcp: Tcp = Field(default_factory=Tcp)

    @model_validator(mode="after")
    def _split(self):
        if self.total_bytes < self.connections:
            raise ValueError(f"total_bytes {self.total_bytes} is less than one byte per connection")
        return self


class TransfersCross(_Cross):
    """Timed transfers (Cardwell, Savage, Anderson, "Modeling TCP Latency", §III-IV;
    :mod:`tcpdelay.traffic.transfers`): ``transfers`` transfers of ``size_bytes`` each, one
    after another, each on a fresh connection opened ``gap_s`` after the previous one closed (so
    no connection inherits another's window: a fresh connection starts in slow start with
    ``tcp.initcwnd_segments``). Data flows server -> client, so the path's forward loss is the
    paper's ``p_f`` (SYN/ACK and data) and its reverse loss ``p_r`` (SYN). Every transfer's
    handshake time, transfer time, retransmissions, RTOs and papers/001 class go into the
    flow's result (``transfers``). ``count`` independent sequences."""

    kind: Literal["transfers"]
    size_bytes: Annotated[int, Field(ge=1, le=2**31 - 1)]
    transfers: Annotated[int, Field(ge=1, le=100_000)] = 1
    gap_s: Annotated[float, Field(ge=0.0, le=3600.0, allow_inf_nan=False)] = 0.1
    #: A transfer not done this long after its connect() is given up (counted incomplete) and
    #: the next one starts: a stack that abandons a connection must not stall the sequence.
    timeout_s: Annotated[float, Field(gt=0.0, le=86_400.0, allow_inf_nan=False)] = 120.0
    tcp: Tcp = Field(default_factory=Tcp)


class UdpCross(_Cross):
    """Constant-rate UDP background: ``count`` flows of ``rate_bps`` in ``packet_size_bytes``
    datagrams."""

    kind: Literal["udp"]
    rate_bps: Annotated[float, Field(gt=0.0, le=10e9, allow_inf_nan=False)]
    packet_size_bytes: Annotated[int, Field(ge=32, le=1472)] = 1200


Cross = Annotated[Union[BulkCross, WebOnOffCross, PageLoadCross, TransfersCross, UdpCross], Field(discriminator="kind")]
CROSS_KINDS = ("bulk", "web_onoff", "page_load", "transfers", "udp")

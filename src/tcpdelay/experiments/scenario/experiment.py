"""The scenario's top table: one experiment (duration, seeds, metrics, the sweep) holding its
path, flows, cross traffic and streams, with the checks that span them."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from tcpdelay.experiments.scenario.base import StrictTable
from tcpdelay.experiments.scenario.cross import Cross
from tcpdelay.experiments.scenario.flows import Flow
from tcpdelay.experiments.scenario.host_kernel import HostKernel
from tcpdelay.experiments.scenario.path import Access, Path
from tcpdelay.experiments.scenario.quic import Quic
from tcpdelay.experiments.scenario.streams import Stream
from tcpdelay.experiments.scenario.tcp import MSS_OVERHEAD_BYTES, TRANSFERS_ONLY_TCP_KEYS

#: Metrics a scenario may ask for: what ``tcpdelay report`` shows (see
#: :mod:`tcpdelay.report.shown_metrics`); every one is computed from the per-packet records by
#: tcpdelay.metrics whatever the scenario lists.
METRICS = (
    "delay",        # mean, std, percentiles, max of one-way delay
    "late",         # late fraction against playout delay
    "jitter",       # RFC 3550 interarrival jitter
    "loss",         # network loss
    "quality",      # loss-period quality levels (HSPA audio study) 0-5
    "rtpi",         # Real-Time Performance Index (Papadimitriou and Tsaoussidis), delayed packets rate
    "goodput",
    "fairness",     # Jain's index across flows
    "playout",      # picture discards (Watanabe et al.) and buffer underflows
    "mos",          # ITU-T G.107 E-model
    "tcp",          # retransmissions and TCP_INFO samples
)
DEFAULT_METRICS = ("delay", "late", "loss")

#: The longest run a scenario may ask for (s): a day.
MAX_DURATION_S = 86_400.0

#: The sampling period of the TCP state when a scenario does not say (s).
DEFAULT_TCP_STATE_PERIOD_S = 0.01


class Scenario(StrictTable):
    """One experiment. ``seeds`` (or ``seed, seed+1, ...`` for ``repetitions`` runs) seed the
    loss processes and the random sources of each repetition."""

    name: str | None = None
    description: str = ""
    duration_s: Annotated[float, Field(gt=0.0, le=MAX_DURATION_S, allow_inf_nan=False)]
    repetitions: Annotated[int, Field(ge=1, le=1000)] | None = None
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 1
    seeds: tuple[Annotated[int, Field(ge=0, le=2**63 - 1)], ...] | None = None
    path: Path = Field(default_factory=Path)
    #: Per-host access links (papers/004's topology); unset: hosts reach the bottleneck directly.
    access: Access | None = None
    #: The hosts of a side as QEMU guests booting a reference kernel (testbed only; unset: none).
    host_kernel: HostKernel | None = None
    flows: tuple[Flow, ...] = ()
    cross: tuple[Cross, ...] = ()
    #: Streams a client pulls (papers/003's video over HTTP). A scenario has flows, streams or
    #: cross traffic (cross traffic alone: papers/004 §4.1's FTP-only reference).
    streams: tuple[Stream, ...] = ()
    metrics: tuple[str, ...] = DEFAULT_METRICS
    sweep: dict[str, Any] = Field(default_factory=dict)
    #: TCP state over time: every TCP flow's TCP_INFO sampled this often into the run's
    #: ``tcp_state`` records (docs/metrics.md); 0 = off; unset = 0.01 s (DEFAULT_TCP_STATE_PERIOD_S).
    tcp_state_period_s: Annotated[float, Field(ge=0.0, le=60.0, allow_inf_nan=False)] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v):
        # The name is a folder (out/<name>): one path component, no ".", "..", hidden name or option
        # (a name of "../../../tmp/x" put a sweep's output outside out/, issue 53).
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}", v):
            raise ValueError(f"{v!r:.80} must be 1-128 of A-Z a-z 0-9 _ . + -, starting with a letter, "
                             "digit or _ (it names the output folder out/<name>)")
        return v

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, v):
        for m in v:
            if m not in METRICS:
                raise ValueError(f"{m!r} is not one of {', '.join(METRICS)}")
        return v

    @model_validator(mode="after")
    def _check(self):
        if self.seeds is not None:
            if len(set(self.seeds)) != len(self.seeds):
                raise ValueError("seeds: repeated seeds would repeat a run")
            if self.repetitions is not None and self.repetitions != len(self.seeds):
                raise ValueError(f"repetitions {self.repetitions} does not match the {len(self.seeds)} seeds; give one of them")
        for i, f in enumerate(self.flows):
            if f.stop_s is not None and f.stop_s > self.duration_s:
                raise ValueError(f"flows[{i}].stop_s {f.stop_s:g} is after duration_s {self.duration_s:g}")
            if f.start_s >= self.duration_s:
                raise ValueError(f"flows[{i}].start_s {f.start_s:g} is not before duration_s {self.duration_s:g}")
        if not self.flows and not self.streams and not any(c.count for c in self.cross):
            raise ValueError("a scenario needs at least one of flows, streams or cross traffic")
        for i, st in enumerate(self.streams):
            if st.start_s >= self.duration_s:
                raise ValueError(f"streams[{i}].start_s {st.start_s:g} is not before duration_s {self.duration_s:g}")
        for i, c in enumerate(self.cross):
            last = c.start_s + c.start_spread_s
            if c.count and last >= self.duration_s:
                raise ValueError(f"cross[{i}] starts at {last:g} s, not before duration_s {self.duration_s:g}")
        self._check_tcp_keys()
        names = [f.name for f in self.flows if f.name is not None]
        if len(set(names)) != len(names):
            raise ValueError("flow names must be unique")
        return self

    def _check_tcp_keys(self) -> None:
        """Per-socket keys only ``transfers`` applies are refused elsewhere (never ignored), and
        an MSS must fit the path MTU with its headers."""
        tables = [(f"flows[{i}].tcp", f.tcp, None) for i, f in enumerate(self.flows)]
        tables += [(f"cross[{i}].tcp", getattr(c, "tcp", None), c.kind) for i, c in enumerate(self.cross)]
        tables += [(f"streams[{i}].tcp", st.tcp, st.kind) for i, st in enumerate(self.streams)]
        mtu = self.path.mtu
        for where, tcp, kind in tables:
            if tcp is None:
                continue
            for key in TRANSFERS_ONLY_TCP_KEYS:
                if getattr(tcp, key) is not None and kind != "transfers":
                    what = f"kind {kind!r}" if kind else "a media flow"
                    raise ValueError(f"{where}.{key}: only cross kind 'transfers' applies it ({what} would ignore it)")
            if tcp.mss_bytes is not None and tcp.mss_bytes + MSS_OVERHEAD_BYTES > mtu:
                raise ValueError(f"{where}.mss_bytes: {tcp.mss_bytes} + {MSS_OVERHEAD_BYTES} bytes of headers does "
                                 f"not fit path.mtu_bytes {mtu}; raise path.mtu_bytes to at least "
                                 f"{tcp.mss_bytes + MSS_OVERHEAD_BYTES}")

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The seed of each repetition."""
        if self.seeds is not None:
            return tuple(self.seeds)
        return tuple(self.seed + i for i in range(self.repetitions or 1))

    def flow_name(self, index: int) -> str:
        return self.flows[index].name or f"flow{index}"

    def to_data(self) -> dict:
        """Plain data (no ``None``: TOML has no null) that :func:`~tcpdelay.experiments.scenario.parse_scenario` reads back to
        an equal scenario."""
        data = self.model_dump(mode="json", exclude_none=True)
        for key in ("sweep", "streams"):      # empty: left out, so older scenarios keep their cell ids
            if not data.get(key):
                data.pop(key, None)
        default_quic = Quic().model_dump(mode="json", exclude_none=True)
        for flow in data.get("flows") or []:  # the default quic table too (added after many sweeps ran)
            if flow.get("quic") == default_quic:
                flow.pop("quic")
        return data

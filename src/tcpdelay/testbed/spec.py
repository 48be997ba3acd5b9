"""What a testbed is made of, as validated data: hosts, their TCP settings, the emulated link.

A :class:`TestbedSpec` is declarative (flent style): the orchestrator in
:mod:`tcpdelay.testbed.testbed` turns it into namespaces, devices and an emulator process.
Every quantity carries its unit in its name (``delay_s``, ``rate_bps``, ``size_bytes``).
Bad values raise :class:`tcpdelay.errors.ParameterError` naming the field and what is allowed.

The link (``LinkSpec``, ``DirectionSpec``, the loss models, ``Outage``) is the one link vocabulary
of :mod:`tcpdelay.link`, re-exported here; ``a_to_b`` is the left-to-right ("data") direction,
``b_to_a`` the right-to-left ("ACK") direction.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from tcpdelay.errors import ParameterError
from tcpdelay.link import (
    LinkSpec,
    SpecModel as _Model,
    build as _build,
    validation_message,
)

#: Host names become part of namespace names: short, lower case, start with a letter.
HOST_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")


# --------------------------------------------------------------------------- TCP settings

CongestionControl = str


class TcpSettings(_Model):
    """Per-host TCP settings; ``None`` leaves the kernel's value alone.

    Each is applied in the host's namespace and read back (see :mod:`tcpdelay.testbed.tcp_settings`):

    - ``congestion_control``: a congestion control by name (:mod:`tcpdelay.testbed.congestion`:
      the kernel's own, or a variant tcpdelay loads as a BPF program for the testbed's life, with
      ``congestion_params``), applied as the namespace's ``net.ipv4.tcp_congestion_control`` when
      the kernel allows it there (``tcp_allowed_congestion_control`` of the root namespace),
      otherwise as the ``congctl`` attribute of the host's routes (which every TCP connection
      over them uses);
    - ``initcwnd_segments`` / ``initrwnd_segments``: ``ip route ... initcwnd N`` (IW3 of RFC 3390
      against IW10 of RFC 6928);
    - ``sack``: ``tcp_sack`` (RFC 2018); ``rack``: bit 0 of ``tcp_recovery`` (RFC 8985);
      ``tlp``: ``tcp_early_retrans`` 3 (tail-loss probe on) or 0 (off);
    - ``slow_start_after_idle``: congestion-window validation after idle (RFC 2861 / RFC 7661);
    - ``no_metrics_save``: ``tcp_no_metrics_save`` (1 = no ssthresh inheritance between
      connections to the same destination);
    - ``rmem_bytes`` / ``wmem_bytes``: ``tcp_rmem`` / ``tcp_wmem`` (min, default, max).
    """

    congestion_control: CongestionControl | None = None
    congestion_params: dict[str, float] | None = None
    initcwnd_segments: int | None = Field(default=None, ge=1, le=1000)
    initrwnd_segments: int | None = Field(default=None, ge=1, le=1000)
    sack: bool | None = None
    rack: bool | None = None
    tlp: bool | None = None
    slow_start_after_idle: bool | None = None
    no_metrics_save: bool | None = None
    ecn: int | None = Field(default=None, ge=0, le=2)
    rmem_bytes: tuple[int, int, int] | None = None
    wmem_bytes: tuple[int, int, int] | None = None

    @model_validator(mode="after")
    def _check(self) -> "TcpSettings":
        cc = self.congestion_control
        if cc is not None and not re.fullmatch(r"[a-z0-9_+]{1,15}", cc):
            raise ValueError(f"congestion_control {cc!r} is not a congestion-control name")
        if self.congestion_params:
            if cc is None:
                raise ValueError("congestion_params without congestion_control")
            from tcpdelay.testbed.congestion import check_params

            try:
                check_params(cc, self.congestion_params)
            except ParameterError as err:
                raise ValueError(str(err)) from None
        for name in ("rmem_bytes", "wmem_bytes"):
            v = getattr(self, name)
            if v is not None and not (1 <= v[0] <= v[1] <= v[2] <= 2**31 - 1):
                raise ValueError(f"{name} {v} must be three sizes min <= default <= max, each >= 1")
        return self

    def merged(self, other: "TcpSettings") -> "TcpSettings":
        """These settings with every non-``None`` field of ``other`` on top."""
        return TcpSettings(**{**self.model_dump(), **other.model_dump(exclude_none=True)})


#: The paper-era stack (papers of 2008): NewReno-style Reno with SACK, no RACK, no TLP, IW3,
#: window validation after idle, metrics caching on (ssthresh inheritance) as in 2.6 kernels.
NEWRENO_2008 = TcpSettings(
    congestion_control="reno", initcwnd_segments=3, sack=True, rack=False, tlp=False,
    slow_start_after_idle=True, no_metrics_save=False,
)
#: Today's Linux defaults, set explicitly so that a run does not depend on the machine's tuning.
LINUX_DEFAULT = TcpSettings(
    congestion_control="cubic", initcwnd_segments=10, sack=True, rack=True, tlp=True,
    slow_start_after_idle=True, no_metrics_save=False,
)
PRESETS: dict[str, TcpSettings] = {"newreno-2008": NEWRENO_2008, "linux-default": LINUX_DEFAULT}


def preset(name: str) -> TcpSettings:
    """A named preset of :data:`PRESETS`."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ParameterError(f"TCP preset {name!r} is unknown; allowed: {', '.join(PRESETS)}") from None


# --------------------------------------------------------------------------- hosts and testbed


class HostSpec(_Model):
    """A host: its own network namespace on the ``left`` or ``right`` side of the bottleneck.

    ``access`` gives the host its own emulated link into its side's router (papers/004 Fig 1:
    each source and sink has an access link into the shared bottleneck): ``a_to_b`` is host ->
    router, ``b_to_a`` router -> host; one emulator process per access link, seeded with
    ``access_seed`` (default: the testbed's seed + 1 + the host's index). Without it the host
    is attached to its side's bridge by a veth pair (no emulation)."""

    name: str
    side: Literal["left", "right"]
    tcp: TcpSettings = Field(default_factory=TcpSettings)
    access: LinkSpec | None = None
    access_seed: int | None = Field(default=None, ge=0, le=2**63 - 1)

    @model_validator(mode="after")
    def _name(self) -> "HostSpec":
        if not HOST_NAME_RE.fullmatch(self.name):
            raise ValueError(f"host name {self.name!r} must be 1-12 of a-z0-9, starting with a letter")
        return self


class TestbedSpec(_Model):
    """A dumbbell: ``hosts`` on two sides of one emulated ``link``.

    With exactly one host per side the emulator's TUN devices live in the hosts themselves
    ("pair" topology, the fastest path); with more, each side gets a router namespace holding
    the TUN device and a bridge to which every host of that side is attached by a veth pair.
    """

    __test__ = False  # not a pytest test class despite the name

    hosts: tuple[HostSpec, ...] = (HostSpec(name="left0", side="left"), HostSpec(name="right0", side="right"))
    link: LinkSpec = Field(default_factory=LinkSpec)
    mtu_bytes: int = Field(default=1500, ge=576, le=9000)
    txqueuelen_packets: int = Field(default=10000, ge=1, le=1_000_000)
    seed: int = Field(default=1, ge=0, le=2**63 - 1)
    realtime: bool = True
    #: PM QoS request held while the testbed is open (/dev/cpu_dma_latency, as cyclictest does):
    #: 0 keeps idle CPUs polling instead of halting, so timer wake-ups (the emulator's delays)
    #: are not late by a halted CPU's wake-up; on a VM that is milliseconds at p99. ``None``
    #: leaves the machine's idle policy alone. The kernel drops the request when the process ends.
    cpu_dma_latency_us: int | None = Field(default=0, ge=0, le=2_000_000_000)
    events_file: str | None = None
    #: The bottleneck's queue-length trace: each direction's length (packets, bytes) every
    #: ``queue_sample_s`` into this CSV file (docs/emulator.md); None: no trace.
    queue_file: str | None = None
    queue_sample_s: float = Field(default=0.01, ge=0.0001, le=60.0)
    #: Further top-level keys of the emulator's configuration (docs/emulator.md), passed as
    #: given, e.g. ``{"spin_us": 50, "events_format": "jsonl"}``; the emulator validates them.
    emulator_options: dict[str, Any] = Field(default_factory=dict)
    #: Congestion controls kept loaded while the testbed is up (their default parameters), for
    #: any program in its namespaces to select with TCP_CONGESTION (``testbed up --cc``); the
    #: hosts' own ``congestion_control`` are loaded anyway.
    congestion_controls: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _hosts(self) -> "TestbedSpec":
        names = [h.name for h in self.hosts]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"host names must be unique; repeated: {', '.join(sorted(dup))}")
        for side in ("left", "right"):
            n = sum(h.side == side for h in self.hosts)
            if not 1 <= n <= 200:
                raise ValueError(f"the {side} side has {n} hosts; allowed 1 to 200")
        for name in ("a_to_b", "b_to_a"):
            q = getattr(self.link, name).queue_bytes
            if q is not None and q < self.mtu_bytes:
                # The emulator refuses it too: a drop-tail queue must hold one full packet.
                raise ValueError(f"link.{name}.queue_bytes {q} is less than mtu_bytes {self.mtu_bytes}: "
                                 "the queue must hold one full packet")
        return self

    @classmethod
    def dumbbell(cls, left: int = 1, right: int = 1, *, link: LinkSpec | None = None,
                 tcp: TcpSettings | None = None, **kw) -> "TestbedSpec":
        """``left`` hosts named left0.. and ``right`` hosts named right0.., all with ``tcp``."""
        if not isinstance(left, int) or not isinstance(right, int) or left < 1 or right < 1:
            raise ParameterError(f"dumbbell: left={left!r}, right={right!r}; each must be an integer >= 1")
        tcp = tcp or TcpSettings()
        hosts = [HostSpec(name=f"left{i}", side="left", tcp=tcp) for i in range(left)]
        hosts += [HostSpec(name=f"right{i}", side="right", tcp=tcp) for i in range(right)]
        return _build(cls, {"hosts": hosts, "link": link or LinkSpec(), **kw}, "testbed")

    @property
    def topology(self) -> str:
        """``pair`` (TUNs in the two hosts) or ``dumbbell`` (TUNs in two router namespaces; always
        when a host has an access link)."""
        return "pair" if len(self.hosts) == 2 and not any(h.access for h in self.hosts) else "dumbbell"


def parse_spec(data: dict) -> TestbedSpec:
    """A :class:`TestbedSpec` from plain data (JSON/TOML), or one-line :class:`ParameterError`."""
    return _build(TestbedSpec, data, "testbed")

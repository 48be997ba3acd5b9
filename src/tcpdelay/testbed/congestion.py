"""The TCP congestion controls tcpdelay can run, by name, and what runs for a choice on this kernel.

Three are the kernel's own (``reno``, ``cubic``, ``bbr``). The variants of the papers the kernel
does not ship run as BPF ``struct_ops`` programs inside the kernel's TCP (``bpf/cc/``, loaded by
:mod:`tcpdelay.testbed.bpf_cc`): Vegas and Westwood/Westwood+ (Grieco and Mascolo, *Performance
evaluation and comparison of Westwood+, New Reno, and Vegas TCP congestion control*), and a
NewReno clone that anchors the loader; Compound TCP, CCP and CCPD (Watanabe et al., *Performance
Characterization of Streaming Video over TCP Variants*). docs/congestion-control.md gives each
one's source, equations, readings and parameters.

A *choice* is a variant's name and parameters (``vegas`` with ``alpha = 1``). :func:`resolve`
turns it into an :class:`Algorithm`: the kernel's own algorithm of that name when the kernel has
it and the parameters are the defaults (the kernel's are not settable per flow), else a BPF
instance under a name of its own (``tdvegas``, or ``tdvegas_3f2`` for other parameters), which
is what ``TCP_CONGESTION`` and ``ip route ... congctl`` are given.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Mapping

from tcpdelay.errors import ParameterError

#: Every kernel name of a BPF instance starts with this (how leftovers are recognized).
PREFIX = "td"
#: TCP_CA_NAME_MAX - 1 (the kernel's names are 16 bytes with the NUL).
NAME_MAX = 15


@dataclass(frozen=True)
class Param:
    """A parameter of a variant, given in ``unit``; the BPF program gets ``round(value * scale)``
    in its ``param_<name>`` global (fixed point where ``scale`` > 1: BPF has no floating point)."""

    name: str
    default: float
    unit: str
    minimum: float
    maximum: float
    scale: int = 1
    doc: str = ""

    def encode(self, value: float) -> int:
        return int(round(value * self.scale))

    def check(self, variant: str, value) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ParameterError(f"congestion control {variant!r}: {self.name} = {value!r} is not a number")
        if not self.minimum <= value <= self.maximum:
            raise ParameterError(f"congestion control {variant!r}: {self.name} = {value!r} is out of range "
                                 f"[{self.minimum:g}, {self.maximum:g}] {self.unit}")
        if self.scale == 1 and value != int(value):
            raise ParameterError(f"congestion control {variant!r}: {self.name} = {value!r} must be a whole number")
        return float(value)


@dataclass(frozen=True)
class Variant:
    """A congestion control by name: the kernel's own, a BPF program, or both."""

    name: str
    description: str
    source: str
    """Where it comes from (authors, title; the Linux file a port follows)."""
    builtin: str | None = None
    """The kernel's algorithm of the same behaviour, used when the kernel has it (default parameters)."""
    bpf_object: str | None = None
    """The BPF program (``bpf/cc/<bpf_object>.bpf.c``), loaded when the kernel lacks the algorithm."""
    base_name: str | None = None
    """The BPF instance's kernel name with the default parameters."""
    params: tuple[Param, ...] = ()
    state: tuple[str, ...] = ()
    """What its four published state values are (``tcp_state`` records' ``cc_state_0..3``)."""

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        allowed = ", ".join(p.name for p in self.params) or "none"
        raise ParameterError(f"congestion control {self.name!r}: no parameter {name!r}; allowed: {allowed}")


def _p(name, default, unit, lo, hi, scale=1, doc=""):
    return Param(name, default, unit, lo, hi, scale, doc)


# What CCP and CCPD share (bpf/cc/ccp.h).
_CCP_KP = _p("kp", 1, "", 0, 64, 1024, "proportional gain Kp")
_CCP_STORAGE = _p("storage", 0, "", 0, 1, doc="B from the segments outstanding at a loss: "
                  "0 the largest of the connection, 1 the latest")
_CCP_STATE = ("backlog x (1/1000 segments)", "storage B (segments)", "inflight (segments)", "RTT_min (us)")

VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("reno", "NewReno (RFC 5681, RFC 6582)", "the kernel's own (net/ipv4/tcp_cong.c)", builtin="reno"),
    Variant("cubic", "CUBIC (RFC 9438)", "the kernel's own (net/ipv4/tcp_cubic.c)", builtin="cubic"),
    Variant("bbr", "BBR v1 (Cardwell et al., ACM Queue 2016)", "the kernel's own (net/ipv4/tcp_bbr.c)", builtin="bbr"),
    Variant("newreno", "NewReno as a BPF program: the loader's correctness anchor",
            "bpf/cc/newreno.bpf.c, through the kernel's own tcp_reno_* functions",
            bpf_object="newreno", base_name="tdnewreno"),
    Variant("vegas", "Vegas: keeps alpha..beta packets queued",
            "Brakmo and Peterson, TCP Vegas: end to end congestion avoidance on a global Internet "
            "(IEEE JSAC 1995); a port of Linux's net/ipv4/tcp_vegas.c",
            builtin="vegas", bpf_object="vegas", base_name="tdvegas",
            params=(_p("alpha", 2, "packets", 0, 1000, doc="fewer queued: grow cwnd by one a round"),
                    _p("beta", 4, "packets", 0, 1000, doc="more queued: shrink cwnd by one a round"),
                    _p("gamma", 1, "packets", 0, 1000, doc="more queued in slow start: leave it"),
                    _p("diff_by_rtt", 0, "", 0, 1, doc="1: diff = cwnd*(RTT-baseRTT)/RTT as the paper and ns-2; "
                       "0: divided by baseRTT as Linux")),
            state=("diff (packets queued)", "baseRTT (us)", "minRTT of the round (us)", "RTT samples in the round")),
    Variant("westwood", "Westwood: bandwidth estimate from every ACK, low-pass filtered",
            "Mascolo, Casetti, Gerla, Sanadidi and Wang, TCP Westwood: bandwidth estimation for "
            "enhanced transport over wireless links (MobiCom 2001)",
            bpf_object="westwood", base_name="tdwestwood",
            params=(_p("tau_ms", 500, "ms", 1, 10000, doc="time constant of the low-pass filter"),
                    _p("m", 2, "", 2, 1000, doc="a virtual null sample every tau/m without ACKs")),
            state=("bandwidth estimate (bytes/s)", "RTT_min (us)", "last sample (bytes/s)", "-")),
    Variant("westwood+", "Westwood+: one bandwidth sample a round trip, EWMA 7/8",
            "Grieco and Mascolo, Performance evaluation and comparison of Westwood+, New Reno, and "
            "Vegas TCP congestion control (CCR 2004); a port of Linux's net/ipv4/tcp_westwood.c",
            builtin="westwood", bpf_object="westwoodplus", base_name="tdwestwoodp",
            params=(_p("min_window_us", 50000, "us", 1000, 10_000_000, doc="shortest sampling window (Linux: 50 ms)"),),
            state=("bandwidth estimate (bytes/s)", "RTT_min (us)", "last sample (bytes/s)", "-")),
    Variant("compound", "Compound TCP: a loss window plus a delay window dwnd",
            "Tan, Song, Zhang and Sridharan, A Compound TCP approach for high-speed and long distance "
            "networks (INFOCOM 2006) and the CTCP Internet-Draft; Watanabe et al. eqs 3-4",
            bpf_object="compound", base_name="tdcompound",
            params=(_p("alpha", 0.125, "", 0, 16, 1024, "dwnd grows by alpha*W^k - 1 a round"),
                    _p("beta", 0.5, "", 0, 1, 1024, "on loss the window keeps 1 - beta of W"),
                    _p("eta", 1, "", 0, 16, 1024, "dwnd shrinks by eta*diff a round (the draft's zeta)"),
                    _p("k", 0.75, "", 0, 1, 1024, "exponent of dwnd's growth"),
                    _p("gamma", 30, "packets", 0, 100000, doc="queued above it: dwnd shrinks"),
                    _p("low_window", 38, "packets", 0, 1000000, doc="dwnd is 0 while the window is below it"),
                    _p("grow_with_dwnd", 0, "", 0, 1, doc="1: growth alpha*dwnd^k - 1 as papers/003 prints it; "
                       "0: alpha*win^k - 1 as the draft"),
                    _p("loss_with_dwnd", 0, "", 0, 1, doc="1: on loss dwnd = dwnd*(1-beta) - cwnd/2 as papers/003 "
                       "prints it; 0: win*(1-beta) - cwnd/2 as the draft")),
            state=("dwnd (segments)", "diff (1/1000 segments)", "baseRTT (us)", "loss window cwnd (segments)")),
    Variant("ccp", "CCP: window = [Kp(B - x) - inflight]/2 on every ACK; no change on loss",
            "Cavendish, Kumazoe, Tsuru, Oie and Gerla, Capacity and Congestion Probing: TCP Congestion "
            "Avoidance via Path Capacity and Storage Estimation (Evolving Internet 2010); Watanabe et al. eq 5",
            bpf_object="ccp", base_name="tdccp",
            params=(_CCP_KP, _CCP_STORAGE), state=_CCP_STATE),
    Variant("ccpd", "CCPD: CCP's law plus a derivative of backlog + inflight between ACKs",
            "Cavendish, Kuwahara, Kumazoe, Tsuru and Oie, TCP Congestion Avoidance using Proportional plus "
            "Derivative Control (Evolving Internet 2011); Watanabe et al. eq 6",
            bpf_object="ccpd", base_name="tdccpd",
            params=(_CCP_KP,
                    _p("kd", 2000, "time units", 0, 1_000_000, doc="derivative gain Kd"),
                    _p("time_unit_us", 1, "us", 1, 1_000_000, doc="the unit of t_k in Kd/(t_k - t_k-1)"),
                    _p("min_dt_us", 1000, "us", 1, 1_000_000, doc="the derivative over at least this interval "
                       "(ACKs that arrive together would make it thousands of segments)"),
                    _CCP_STORAGE),
            state=_CCP_STATE),
)}


@dataclass(frozen=True)
class Algorithm:
    """What runs for a choice on this kernel."""

    variant: str
    kernel_name: str
    """The name ``TCP_CONGESTION`` / ``congctl`` take."""
    source: str
    """``builtin`` (the kernel's own) or ``bpf`` (an instance tcpdelay loads)."""
    params: dict[str, float] = field(default_factory=dict)
    """The parameters as given (every one, defaults filled in)."""
    values: dict[str, int] = field(default_factory=dict)
    """What the BPF program's ``param_<name>`` globals get (empty for a built-in)."""

    @property
    def bpf_object(self) -> str | None:
        return VARIANTS[self.variant].bpf_object if self.source == "bpf" else None


def get_variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ParameterError(f"congestion control: {name!r} is not one of {', '.join(VARIANTS)}") from None


def check_params(name: str, params: Mapping[str, float] | None) -> dict[str, float]:
    """Every parameter of variant ``name`` (defaults filled in); unknown or out-of-range → ParameterError."""
    v = get_variant(name)
    given = dict(params or {})
    for key in given:
        v.param(key)
    return {p.name: p.check(name, given[p.name]) if p.name in given else float(p.default) for p in v.params}


def resolve(name: str, params: Mapping[str, float] | None = None, *,
            available: list[str] | tuple[str, ...] = ()) -> Algorithm:
    """The algorithm that runs choice (``name``, ``params``) given the kernel's ``available``
    algorithms (``tcp_available_congestion_control``). A name that is not a variant is a kernel
    algorithm passed through as it is (e.g. ``htcp`` where the kernel has it), without parameters."""
    if name not in VARIANTS:
        if params:
            raise ParameterError(f"congestion control {name!r} takes no parameters (not one of {', '.join(VARIANTS)})")
        return Algorithm(variant=name, kernel_name=name, source="builtin")
    v = VARIANTS[name]
    full = check_params(name, params)
    default = all(full[p.name] == p.default for p in v.params)
    if v.builtin is not None and (v.bpf_object is None or (default and v.builtin in available)):
        if not default:
            raise ParameterError(f"congestion control {name!r} is the kernel's own: its parameters are not settable per flow")
        return Algorithm(variant=name, kernel_name=v.builtin, source="builtin", params=full)
    values = {p.name: p.encode(full[p.name]) for p in v.params}
    return Algorithm(variant=name, kernel_name=instance_name(v, full), source="bpf", params=full, values=values)


def instance_name(v: Variant, params: Mapping[str, float]) -> str:
    """``base_name`` for the default parameters, else ``base_name[:11]_xxx`` (3 hex digits of a
    hash of the parameters): at most 15 characters, stable for the same parameters."""
    assert v.base_name is not None
    if all(params.get(p.name, p.default) == p.default for p in v.params):
        return v.base_name
    text = ",".join(f"{p.name}={params.get(p.name, p.default)!r}" for p in v.params)
    return f"{v.base_name[:NAME_MAX - 4]}_{hashlib.sha1(text.encode()).hexdigest()[:3]}"


def run_instance_name(kernel_name: str, run_id: str) -> str:
    """A run's own name for an instance whose usual name another run holds: ``kernel_name[:8]``,
    ``_`` and the 6-character run id (at most 15 characters, unique among live runs)."""
    return f"{kernel_name[:NAME_MAX - 7]}_{run_id[:6]}"


def choice_key(name: str, params: Mapping[str, float] | None) -> str:
    """A choice as one string (``vegas`` or ``vegas(alpha=1,beta=3)``), for grouping and messages."""
    if not params:
        return name
    return f"{name}({','.join(f'{k}={params[k]:g}' for k in sorted(params))})"

"""Validated parameters of the CBR-over-TCP delay chain (Brosh et al., Section 4, Appendix A).

Every reading of the garbled Table 6 that the paper leaves open is a named field here with a
documented default (see ``docs/models/delay.md``, "Choices"). All sizes are kept in whole
*packets* of ``packet_bytes`` (the paper's ``b / a``); ``mss_bytes / packet_bytes`` packets fit in
one full segment.

Reference: Brosh, Baset, Misra, Rubenstein, Schulzrinne, "The Delay-Friendliness of TCP for
Real-Time Traffic", IEEE/ACM ToN 2010 (SIGMETRICS 2008): Table 1 (notation), Table 2 (state
classification), eqs (1)-(5), Table 6, Appendix A.1-A.3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tcpdelay import checks
from tcpdelay.errors import ParameterError
from tcpdelay.model.delay.stacks import check_stack
from tcpdelay.model.throughput import default_t0_s

LOSS_MODELS = ("random", "correlated")
QUEUES = ("packets", "bytes")
AL_FR_BACKLOGS = ("table", "eq4")
BACKLOG_ROUNDINGS = ("split", "nearest", "floor")
MAX_ONE_WAY_S = 1e6
"""The largest one-way delay taken (11.6 days); beyond it the delay moments overflow."""
MAX_BACKOFF_STAGE = 6
"""Timeout back-off stages l = 1..6 (Table 2); the back-off time is capped at 64·T0 (eq 5)."""


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ParameterError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    return value


def _check_bool(name: str, value) -> bool:
    """True/False (also NumPy booleans and 0/1); anything else is a ParameterError."""
    try:
        ok = not isinstance(value, str) and value in (True, False)
    except (TypeError, ValueError):  # arrays and other values without a single truth
        ok = False
    if not ok:
        raise ParameterError(f"{name}: {value!r} is not a boolean (True or False)")
    return bool(value)


@dataclass(frozen=True)
class DelayParams:
    """One CBR source over one TCP connection.

    Attributes
    ----------
    rate_pps : packets per second of the CBR source, ``f``.
    packet_bytes : packet size ``a`` in bytes (payload + 12-byte RTP header + 2-byte RFC 4571
        framing for the built-in profiles).
    rtt_s : round-trip time ``RTT``.
    loss : segment loss probability ``p`` in [0, 1).
    one_way_s : one-way network delay ``L`` [default RTT/2, a symmetric path].
    mss_bytes : maximum segment size [default 1448, Ethernet with TCP timestamps].
    t0_s : first retransmission timeout ``T0`` [default RTT + 200 ms, the RTO a Linux sender
        settles at on a path with little RTT variance: SRTT + max(4·RTTVAR, 200 ms)].
    loss_model : ``"random"`` (Bernoulli per segment, SACK-style recovery of Sikdar et al.) or
        ``"correlated"`` (the rest of the round is lost, PFTK's A(w, k)); Appendix A.1.
    queue : ``"packets"`` (every segment is dropped with ``p``) or ``"bytes"`` (a segment of
        ``M_s`` bytes is dropped with ``p·M_s/MSS``: small application-limited segments are
        less likely to be dropped); Appendix A.1.
    limited_transmit : RFC 3042 limited transmit (Appendix A.2, eqs 6-7) [default on, as in
        Linux].
    al_fr_backlog : **[choice]** backlog after a fast retransmit from an application-limited
        state: ``"table"`` = 3 packets (Table 6) [default] or ``"eq4"`` = 0 (eq 4 with w >= r).
    backlog_rounding : **[choice]** how a fractional backlog (``r = f·RTT`` and ``MSS/a`` need
        not be integers) becomes whole packets: ``"split"`` [default] moves to the two
        neighbouring integers with probabilities that keep the mean exact; ``"nearest"``;
        ``"floor"``.
    growth_requires_backlog : **[choice]** the appendix writes ``{w+1|2w}`` with the condition
        ``0 < b'``; Section 4.3 grows the window in every loss-free network-limited round.
        ``False`` [default] follows Section 4.3; ``True`` the appendix's literal condition.
    count_fresh_packets : **[choice]** Table 6 counts only the packets backlogged at the start
        of a round (``min(b, w·MSS)/a``) although eq (4) lets the window also carry packets
        that arrive during the round. ``False`` [default] is the paper; ``True`` also counts
        those packets, with delay ``L`` (they leave as they arrive), so that every packet the
        source emits is counted. [default: ``False``, or ``True`` with ``hol_ramp``]
    hol_ramp : **[choice, not the paper's]** add the head-of-line ramp behind every fast
        retransmit: the ``m`` packets written during the recovery round trip (``m = ⌊r⌋`` from an
        application-limited state, the fresh packets that fit in the inflated window from a
        network-limited one) wait at the receiver for the retransmission, with delays
        ``L + RTT − q/f``, q = 0..m−1. Table 6 counts only the lost packet and the two behind it
        (``L + RTT + i/f``); Linux holds all of them (docs/models/delay.md, "The head-of-line
        ramp"). Implies ``count_fresh_packets`` (an explicit ``count_fresh_packets=False`` with
        it is an error). ``False`` [default] is the paper's model.
    stack : whose loss recovery the chain follows (:mod:`tcpdelay.model.delay.stacks`):
        ``"paper"`` [default here] is Table 6 as published; ``"linux"`` (RACK-TLP, CUBIC, PRR)
        and ``"classic"`` (three duplicate ACKs, RTO on a lost retransmission, NewReno) have
        their own window rules (:mod:`.stack_chain`) and add the receiver's head-of-line delay
        per loss episode (:mod:`.repair`); with them every packet is counted
        (``count_fresh_packets``) and ``hol_ramp`` does not apply. :func:`.predict.predict`
        defaults to ``"linux"``.
    max_window : the window bound ``w_m`` in segments [default ceil(8 r), Appendix A.3, at
        least 4].
    backlog_bound_packets : the initial backlog bound ``b_m`` in packets [default
        ceil(4·T0·f), at least 16]; doubled while the stationary mass at the bound exceeds
        ``truncation_tol``, up to ``max_states`` states.
    truncation_tol : stationary probability at the backlog bound that counts as negligible.
    max_states : the largest chain the bound may grow to.
    """

    rate_pps: float
    packet_bytes: float
    rtt_s: float
    loss: float
    one_way_s: float | None = None
    mss_bytes: float = 1448.0
    t0_s: float | None = None
    loss_model: str = "random"
    queue: str = "packets"
    limited_transmit: bool = True
    al_fr_backlog: str = "table"
    backlog_rounding: str = "split"
    growth_requires_backlog: bool = False
    count_fresh_packets: bool | None = None
    hol_ramp: bool = False
    stack: str = "paper"
    max_window: int | None = None
    backlog_bound_packets: int | None = None
    truncation_tol: float = 1e-5
    max_states: int = 1_500_000

    def __post_init__(self) -> None:
        f = checks.positive_float("rate_pps", self.rate_pps)
        a = checks.positive_float("packet_bytes", self.packet_bytes)
        rtt = checks.positive_float("rtt_s", self.rtt_s)
        mss = checks.positive_float("mss_bytes", self.mss_bytes)
        try:
            p = float(self.loss)
        except (TypeError, ValueError):
            raise ParameterError(f"loss: {self.loss!r} is not a number") from None
        if not (0.0 <= p < 1.0):
            raise ParameterError(f"loss: {self.loss!r} is outside [0, 1)")
        if a > mss:
            raise ParameterError(
                f"packet_bytes: {a:g} exceeds mss_bytes {mss:g}; packets larger than one segment "
                "are not modelled (split them: --split N)")
        one_way = rtt / 2 if self.one_way_s is None else float(self.one_way_s)
        if not (0 <= one_way <= (MAX_ONE_WAY_S if self.one_way_s is not None else math.inf)):
            raise ParameterError(f"one_way_s: {self.one_way_s!r} must be in [0, {MAX_ONE_WAY_S:g}] seconds")
        t0 = float(default_t0_s(rtt)) if self.t0_s is None else checks.positive_float("t0_s", self.t0_s)
        hol_ramp = _check_bool("hol_ramp", self.hol_ramp)
        stack = check_stack(self.stack)
        if stack != "paper":
            if hol_ramp:
                raise ParameterError(
                    f"hol_ramp: applies to stack 'paper' only; stack {stack!r} holds every packet "
                    "behind a loss already (the per-loss-episode head-of-line delay)")
            if self.count_fresh_packets is False:
                raise ParameterError(f"count_fresh_packets: stack {stack!r} counts every packet; leave it unset")
            count_fresh = True
        elif self.count_fresh_packets is None:
            count_fresh = hol_ramp
        else:
            count_fresh = _check_bool("count_fresh_packets", self.count_fresh_packets)
            if hol_ramp and not count_fresh:
                raise ParameterError(
                    "hol_ramp: needs count_fresh_packets (the ramp is weighed against every packet the "
                    "source emits); leave count_fresh_packets unset or True")
        _check_choice("loss_model", self.loss_model, LOSS_MODELS)
        _check_choice("queue", self.queue, QUEUES)
        _check_choice("al_fr_backlog", self.al_fr_backlog, AL_FR_BACKLOGS)
        _check_choice("backlog_rounding", self.backlog_rounding, BACKLOG_ROUNDINGS)
        if a < 1:
            raise ParameterError(f"packet_bytes: {a:g} is below one byte")
        r = f * rtt
        if not math.isfinite(8 * r):
            raise ParameterError(
                f"rtt_s: {rtt:g} is too large: f*RTT = {r:g} packets per round trip at {f:g} packets/s")
        if not math.isfinite(4 * t0 * f):
            raise ParameterError(f"t0_s: {t0:g} is too large: 4*T0*f = {4 * t0 * f:g} packets")
        wm = max(4, math.ceil(8 * r - 1e-9)) if self.max_window is None else int(self.max_window)
        if wm < max(1, math.ceil(r - 1e-9)):
            raise ParameterError(
                f"max_window: {wm} is below r = f*RTT = {r:g}; it must admit the application-limited window")
        bm = (max(16, math.ceil(4 * t0 * f - 1e-9)) if self.backlog_bound_packets is None
              else int(self.backlog_bound_packets))
        if bm < 1:
            raise ParameterError(f"backlog_bound_packets: {bm} must be >= 1")
        if not (0 < self.truncation_tol < 1):
            raise ParameterError(f"truncation_tol: {self.truncation_tol!r} must be in (0, 1)")
        for name, value in (("rate_pps", f), ("packet_bytes", a), ("rtt_s", rtt), ("mss_bytes", mss),
                            ("loss", p), ("one_way_s", one_way), ("t0_s", t0),
                            ("max_window", wm), ("backlog_bound_packets", bm),
                            ("limited_transmit", bool(self.limited_transmit)),
                            ("growth_requires_backlog", bool(self.growth_requires_backlog)),
                            ("count_fresh_packets", count_fresh), ("hol_ramp", hol_ramp)):
            object.__setattr__(self, name, value)

    # Derived quantities (Table 1).
    @property
    def r(self) -> float:
        """Packets per round trip, ``f·RTT``."""
        return self.rate_pps * self.rtt_s

    @property
    def packets_per_segment(self) -> float:
        """``MSS / a``: packets one full segment carries (TCP coalesces backlogged packets)."""
        return self.mss_bytes / self.packet_bytes

    @property
    def rate_bps(self) -> float:
        """The source's rate on TCP, ``8·f·a`` bits per second."""
        return 8.0 * self.rate_pps * self.packet_bytes

    def with_backlog_bound(self, bm: int) -> "DelayParams":
        return replace(self, backlog_bound_packets=int(bm))

    def to_dict(self) -> dict:
        return {
            "rate_pps": self.rate_pps, "packet_bytes": self.packet_bytes, "rate_bps": self.rate_bps,
            "rtt_s": self.rtt_s, "loss": self.loss, "one_way_s": self.one_way_s,
            "mss_bytes": self.mss_bytes, "t0_s": self.t0_s, "loss_model": self.loss_model,
            "queue": self.queue, "limited_transmit": self.limited_transmit,
            "al_fr_backlog": self.al_fr_backlog, "backlog_rounding": self.backlog_rounding,
            "growth_requires_backlog": self.growth_requires_backlog,
            "count_fresh_packets": self.count_fresh_packets, "hol_ramp": self.hol_ramp,
            "stack": self.stack, "max_window": self.max_window, "backlog_bound_packets": self.backlog_bound_packets,
        }

"""What to change on a path so that real-time media over TCP meets its delay budget: the options
the delay model can quantify, ranked (pure: math, no I/O).

The options are those of Brosh, Baset, Misra, Rubenstein, Schulzrinne, *The Delay-Friendliness of
TCP for Real-Time Traffic*: the playout delay L + RTT + 3/f and the one the budget needs (§6.6,
§8.2), split-N (§7.1), N blind parallel connections (§7.2), a byte- instead of a packet-limited
bottleneck queue (§6.5), limited transmit (§8.1), and UDP instead of TCP. Each is one call of
:func:`tcpdelay.model.delay.predict` with the settings it names (``delay_args`` spells them as
``tcpdelay delay`` flags), so its numbers are ``tcpdelay delay``'s for the same settings.

A budget is a playout delay ``D`` and the late fraction ``ε`` allowed at it (a percentile bound
"pP ≤ B" is ``D = B``, ``ε = 1 − P/100``). An option meets it when at most ``ε`` of the packets
arrive later than its playout delay and that playout delay is at most ``D``. Options are ranked:
quantified before unquantified, meeting the budget first, then by the playout delay the option
needs for ``ε`` late (its ``1 − ε`` quantile: the smaller, the more room), then by cost. Options
the model cannot quantify (the caller's ``extra``: RACK/TLP, TCP variants, ...) follow, with no
numbers.

"Does not fit": when the source's rate is not below TCP's achievable throughput on the path (the
PFTK throughput the delay model uses, and the bottleneck's rate when given) the delay grows
without bound; :func:`fit` says so with the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tcpdelay.errors import ParameterError
from tcpdelay.model.delay.params import DelayParams
from tcpdelay.model.delay.predict import predict, resolve_source, tcp_throughput_bps
from tcpdelay.model.delay.playout import recommended_playout_s

TCP_IP_HEADER_BYTES = 52
"""Bytes of IPv4 (20) + TCP (20) + the timestamp option (12) on every data segment."""
UDP_IP_HEADER_BYTES = 28
"""Bytes of IPv4 (20) + UDP (8) on every datagram."""
RFC4571_PREFIX_BYTES = 2
"""The length prefix of RTP over TCP (RFC 4571), not needed over UDP."""

DEFAULT_SPLITS = (2, 4)
DEFAULT_CONNECTIONS = (2, 5)
"""The split-N and blind-connection counts tried (Brosh et al. Figs 25-28 use 2 and 4, 2 and 5)."""

#: Sources of an option's numbers.
MODEL, NS3, MEASURED = "model", "ns3", "measured"
MEASUREMENT_ONLY = "measurement only: the model cannot quantify this"

#: Cost order among options that need the same playout delay: the cheaper first.
_COST_ORDER = {"as-is": 0, "playout": 1, "tcp": 2, "queue": 3, "split": 4, "connections": 5, "variant": 6,
               "udp": 7}


@dataclass(frozen=True)
class Budget:
    """At most ``late_fraction`` of the packets later than ``playout_s``."""

    playout_s: float
    late_fraction: float

    def __post_init__(self):
        if not (isinstance(self.playout_s, (int, float)) and math.isfinite(self.playout_s) and self.playout_s > 0):
            raise ParameterError(f"playout_s: {self.playout_s!r} must be a positive number of seconds")
        if not (isinstance(self.late_fraction, (int, float)) and 0 <= self.late_fraction < 1):
            raise ParameterError(f"late_budget: {self.late_fraction!r} must be in [0, 1)")

    @classmethod
    def from_percentile(cls, percentile: float, bound_s: float) -> "Budget":
        """"The ``percentile`` of delay is at most ``bound_s``"."""
        if not (0 < percentile < 100):
            raise ParameterError(f"percentile: {percentile!r} must be in (0, 100)")
        return cls(bound_s, 1.0 - percentile / 100.0)

    def to_dict(self) -> dict:
        return {"playout_s": self.playout_s, "late_fraction": self.late_fraction}


def _num(x) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def quantified(pred, playout_s: float, late_budget: float) -> dict:
    """An option's ``predicted`` from a :class:`DelayPrediction`, read at ``playout_s``."""
    if pred.unstable:
        return {"unstable": True, "mean_s": None, "p95_s": None, "p99_s": None, "playout_s": playout_s,
                "late_fraction": 1.0, "needed_playout_s": None}
    return {"unstable": False, "mean_s": pred.mean_s, "p95_s": pred.percentile_s(95), "p99_s": pred.percentile_s(99),
            "playout_s": playout_s, "late_fraction": float(pred.late_fraction(playout_s)),
            "needed_playout_s": needed_playout_s(pred, late_budget)}


def needed_playout_s(pred, late_budget: float) -> float | None:
    """The smallest playout delay with at most ``late_budget`` of the packets late (None: none)."""
    if pred.unstable:
        return None
    return float(pred.quantile(1.0 - late_budget))


def meets(predicted: dict | None, budget: Budget) -> bool | None:
    """The budget holds (None: no numbers)."""
    if predicted is None:
        return None
    return bool(not predicted["unstable"] and predicted["late_fraction"] <= budget.late_fraction + 1e-12
                and predicted["playout_s"] <= budget.playout_s + 1e-12)


def cost(*, extra_bps: float = 0.0, extra_connections: int = 0, fairness: str = "as a single TCP flow",
         added_delay_s: float = 0.0, note: str = "") -> dict:
    """An option's cost: bandwidth and headers (b/s, negative saves), connections beyond the
    one, its fairness to other flows, playout delay added (s, negative removes), and a note."""
    return {"extra_bps": extra_bps, "extra_connections": extra_connections, "fairness": fairness,
            "added_delay_s": added_delay_s, "note": note}


def option(name: str, kind: str, *, what: str, predicted: dict | None, budget: Budget, cost_: dict,
           source: str = MODEL, settings: dict | None = None, delay_args: list[str] | None = None,
           reference: str = "") -> dict:
    """One option as the ranked list holds it."""
    return {"name": name, "kind": kind, "what": what, "predicted": predicted, "cost": cost_,
            "meets_budget": meets(predicted, budget), "source": source, "settings": settings or {},
            "delay_args": delay_args, "reference": reference}


def rank_key(opt: dict, index: int = 0) -> tuple:
    """Quantified first; meeting the budget first; then the playout delay needed for the late
    budget; then the cheaper; then the order given."""
    num = opt.get("measured") or opt.get("predicted")
    if num is None:
        return (1, 1, math.inf, _COST_ORDER.get(opt["kind"], 9), index)
    ok = opt["meets_budget"]
    needed = num.get("needed_playout_s")
    return (0, 0 if ok else 1, math.inf if needed is None else needed, _COST_ORDER.get(opt["kind"], 9), index)


def rank(options: list[dict]) -> list[dict]:
    """``options`` best first (:func:`rank_key`); each gets its ``rank`` (1 = best)."""
    ordered = [o for _, o in sorted(((rank_key(o, i), o) for i, o in enumerate(options)), key=lambda t: t[0])]
    for i, o in enumerate(ordered, 1):
        o["rank"] = i
    return ordered


def _bps(x: float) -> str:
    """``579.2 kb/s``, ``1.25 Mb/s``: a rate for a message (four significant digits)."""
    for scale, unit in ((1e9, "Gb/s"), (1e6, "Mb/s"), (1e3, "kb/s")):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {unit}"
    return f"{x:.4g} b/s"


def fit(rate_bps: float, params: DelayParams, bottleneck_bps: float | None = None,
        max_connections: int = 1) -> dict:
    """Whether a source of ``rate_bps`` fits the path over TCP: ``max_rate_bps`` is the most one
    connection carries (PFTK throughput of full segments with the path's RTT, loss, T0 and MSS;
    no more than the bottleneck's rate when given)."""
    tput = tcp_throughput_bps(params)
    bound = tput if bottleneck_bps is None else min(tput, float(bottleneck_bps))
    out = {"rate_bps": rate_bps, "tcp_throughput_bps": tput, "bottleneck_bps": bottleneck_bps,
           "max_rate_bps": bound, "fits": rate_bps < bound}
    if out["fits"]:
        out["message"] = f"fits: {_bps(rate_bps)} below the {_bps(bound)} one TCP connection achieves here"
    else:
        why = ("the bottleneck's rate" if bottleneck_bps is not None and bottleneck_bps <= tput
               else "TCP's achievable throughput (PFTK)")
        out["message"] = (f"this rate does not fit this path: at most {_bps(bound)} ({why}) on one TCP "
                          f"connection; {_bps(rate_bps)} makes the delay grow without bound")
    return out


def advise_model(profile=None, *, rate_bps=None, packet_bytes=None, rtt_s: float, loss: float, budget: Budget,
                 one_way_s: float | None = None, mss_bytes: float = 1448, t0_s: float | None = None,
                 loss_model: str = "random", queue: str = "packets", limited_transmit: bool = True,
                 bottleneck_bps: float | None = None, splits=DEFAULT_SPLITS, connections=DEFAULT_CONNECTIONS,
                 extra: list[dict] | tuple = (), **choices) -> dict:
    """The options for a source on a path, ranked (see the module doc).

    ``extra``: options the caller adds (those the model cannot quantify, already shaped by
    :func:`option` with ``predicted=None``). ``choices``: the [choice] options of
    :func:`~tcpdelay.model.delay.predict`, passed to every prediction. Returns ``{"options",
    "fit", "budget", "path", "source"}``; ``options`` best first."""
    src = resolve_source(profile, rate_bps, packet_bytes)
    if bottleneck_bps is not None and not (math.isfinite(bottleneck_bps) and bottleneck_bps > 0):
        raise ParameterError(f"bottleneck_bps: {bottleneck_bps!r} must be a positive number of bits/s")
    base = dict(rtt_s=rtt_s, loss=loss, one_way_s=one_way_s, mss_bytes=mss_bytes, t0_s=t0_s, loss_model=loss_model,
                queue=queue, limited_transmit=limited_transmit, **choices)
    eps, D = budget.late_fraction, budget.playout_s

    def run(**kw):
        return predict(src, **{**base, **kw})

    as_is = run()
    L = as_is.one_way_s
    opts = [option("as-is", "as-is", what="the path and application as they are",
                   predicted=quantified(as_is, D, eps), budget=budget, cost_=cost(), delay_args=[])]

    # Playout delay (§6.6, §8.2): the same distribution read at another playout delay.
    rec = recommended_playout_s(rtt_s, src.rate_pps, L)
    for name, x, what in (
            ("playout L+RTT+3/f", rec, f"set the playout delay to L + RTT + 3/f = {rec * 1e3:.0f} ms "
                                       "(the time fast retransmit needs; Brosh et al. §6.6, §8.2)"),
            ("playout for the budget", needed_playout_s(as_is, eps),
             f"set the playout delay to the smallest one with at most {eps * 100:g} % late")):
        if x is None:  # unstable: no playout delay suffices
            continue
        pred = quantified(as_is, x, eps)
        if pred["late_fraction"] <= eps + 1e-12:
            pred["needed_playout_s"] = x
        opts.append(option(name, "playout", what=what, predicted=pred, budget=budget,
                           cost_=cost(added_delay_s=x - D, note="every packet is played this late"),
                           settings={"playout_s": x}, delay_args=[]))

    for n in splits:
        pred = run(split=n)
        opts.append(option(
            f"split-{n}", "split", what=f"send every packet as {n} packets of a/{n} bytes at {n}·f (Brosh et al. §7.1)",
            predicted=quantified(pred, D, eps), budget=budget, settings={"split": n}, delay_args=["--split", str(n)],
            cost_=cost(extra_bps=(n - 1) * src.rate_pps * TCP_IP_HEADER_BYTES * 8.0,
                       note=f"{n}x the segments and TCP/IP headers ({TCP_IP_HEADER_BYTES} B each), "
                            "and about as many more ACKs"),
            reference="Brosh et al. §7.1, Figs 25-26"))
    for n in connections:
        pred = run(connections=n)
        opts.append(option(
            f"{n} connections (blind)", "connections",
            what=f"spread the packets round-robin over {n} parallel TCP connections (Brosh et al. §7.2)",
            predicted=quantified(pred, D, eps), budget=budget, settings={"connections": n, "scheduler": "blind"},
            delay_args=["--connections", str(n)],
            cost_=cost(extra_connections=n - 1,
                       fairness=(f"{n} congestion controls: under congestion up to {n} fair shares; "
                                 "while the source's rate limits them they take no more than one flow"),
                       note=f"{n - 1} more handshakes and connection states; the receiver reorders"),
            reference="Brosh et al. §7.2, Figs 27-28"))

    # Byte- instead of packet-limited queue (§6.5): matters only for packets below the MSS.
    other_queue = "bytes" if queue == "packets" else "packets"
    if src.packet_bytes < mss_bytes:
        pred = run(queue=other_queue)
        opts.append(option(
            f"{other_queue}-limited queue", "queue",
            what=f"a bottleneck queue limited in {other_queue} instead of {queue} (Brosh et al. §6.5)",
            predicted=quantified(pred, D, eps), budget=budget, settings={"queue": other_queue},
            delay_args=["--queue", other_queue],
            cost_=cost(note="a setting of the bottleneck router, not of the endpoints")))

    if not limited_transmit:
        pred = run(limited_transmit=True)
        opts.append(option(
            "limited transmit", "tcp", what="enable limited transmit (RFC 3042; Brosh et al. §8.1)",
            predicted=quantified(pred, D, eps), budget=budget, settings={"limited_transmit": True},
            delay_args=["--limited-transmit"], cost_=cost(note="none: a sender-side TCP mechanism"),
            reference="Brosh et al. §8.1"))

    opts.append(udp_option(src, L, loss, loss_model, budget, bottleneck_bps))
    opts.extend(extra)

    conn_fit = fit(src.rate_bps, _params_of(as_is), bottleneck_bps)
    stable = [o["name"] for o in opts if o["kind"] == "connections" and o["predicted"] is not None
              and not o["predicted"]["unstable"]]
    if not conn_fit["fits"] and stable and (bottleneck_bps is None or src.rate_bps < bottleneck_bps):
        conn_fit["message"] += f"; it fits over parallel connections ({', '.join(stable)}), each one a fair share"
    return {"options": rank(opts), "fit": conn_fit, "budget": budget.to_dict(),
            "path": {"rtt_s": rtt_s, "loss": loss, "one_way_s": L, "loss_model": loss_model, "queue": queue,
                     "mss_bytes": mss_bytes, "t0_s": _params_of(as_is).t0_s, "limited_transmit": limited_transmit,
                     "bottleneck_bps": bottleneck_bps},
            "source": {"profile": src.name, "rate_bps": src.rate_bps, "packet_bytes": src.packet_bytes,
                       "rate_pps": src.rate_pps}}


def _params_of(pred) -> DelayParams:
    p = dict(pred.info["params"])
    keep = {k: p[k] for k in ("rate_pps", "packet_bytes", "rtt_s", "loss", "one_way_s", "mss_bytes", "t0_s",
                              "loss_model", "queue", "limited_transmit") if k in p}
    return DelayParams(**keep)


def udp_option(src, one_way_s: float, loss: float, loss_model: str, budget: Budget,
               bottleneck_bps: float | None) -> dict:
    """UDP instead of TCP: every packet that is not lost arrives after the one-way delay ``L``
    (the queueing a UDP flow adds to the bottleneck is not modelled); the path's loss ``p``
    becomes the application's (plus what exceeds the bottleneck's rate, when given)."""
    lost = loss
    if bottleneck_bps is not None and src.rate_bps > bottleneck_bps:
        lost = 1.0 - (1.0 - loss) * bottleneck_bps / src.rate_bps
    late_at = 1.0 if one_way_s > budget.playout_s else lost

    def q(pct):
        return one_way_s if lost < 1.0 - pct / 100.0 else None

    predicted = {"unstable": False, "mean_s": one_way_s, "p95_s": q(95), "p99_s": q(99),
                 "playout_s": budget.playout_s, "late_fraction": late_at, "expected_loss": lost,
                 "needed_playout_s": one_way_s if lost <= budget.late_fraction else None,
                 "delay_of_received_s": one_way_s}
    per_packet = (UDP_IP_HEADER_BYTES - TCP_IP_HEADER_BYTES - RFC4571_PREFIX_BYTES) * 8.0 * src.rate_pps
    burst = (" Bursty loss takes several packets in a row: a concealment the codec may not mask."
             if loss_model == "correlated" else "")
    return option("UDP", "udp", what="send the media over UDP (RTP) instead of TCP: no retransmission, "
                                     f"{lost * 100:.3g} % of the packets lost",
                  predicted=predicted, budget=budget, settings={"transport": "udp"}, delay_args=None,
                  cost_=cost(extra_bps=per_packet, fairness="no congestion control unless the application adds one",
                             note="lost packets are gone (the late fraction is the loss); needs a path that "
                                  "passes UDP, which NATs and firewalls often do not (why media rides over TCP)."
                                  + burst))

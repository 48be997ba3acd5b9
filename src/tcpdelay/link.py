"""The emulated link's vocabulary: one direction's settings, loss models, outages, and their limits.

One schema for a link, used by every layer that speaks about one: the scenario file
(:mod:`tcpdelay.experiments.scenario`, which resolves its ``[path]`` table into these classes),
the testbed (:mod:`tcpdelay.testbed.spec`, ``TestbedSpec.link``) and the emulator's configuration
file (``tcpdelay-link``, ``emulator/src/config.rs``, which reads the same keys with serde and
enforces the same :data:`LIMITS`; ``tcpdelay-link --schema`` prints its side, and
``tests/test_link_schema.py`` holds the two together). The keys are documented in
``docs/emulator.md``; ``a_to_b`` is the left-to-right ("data") direction, ``b_to_a`` the
right-to-left ("ACK") direction.

Every quantity carries its unit in its name (``delay_s``, ``rate_bps``, ``queue_bytes``). A model
built on its own turns a bad value into one :class:`tcpdelay.errors.ParameterError` line naming
the field and what is allowed; inside a larger model (a testbed spec, a scenario) the larger
model reports it with its own path.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal, NamedTuple, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from tcpdelay.errors import ParameterError

# --------------------------------------------------------------------------- limits


class Limit(NamedTuple):
    """Allowed range of one setting: ``min <= x <= max`` (``min < x`` when ``min_exclusive``)."""

    min: float
    max: float
    unit: str
    min_exclusive: bool = False


#: The one table of limits of a link's settings, by key (``loss.p`` is ``p`` of a loss model,
#: ``outages.at_s`` the ``at_s`` of an outage window). The Python models and the emulator
#: (``LIMITS`` in ``emulator/src/config.rs``) enforce exactly these.
LIMITS: dict[str, Limit] = {
    "delay_s": Limit(0.0, 60.0, "s"),
    "jitter_s": Limit(0.0, 60.0, "s"),
    "rate_bps": Limit(1.0, 1e12, "bit/s"),
    "queue_packets": Limit(1, 1_000_000, "packets"),
    # Also at least the link's MTU (a drop-tail queue must hold one full packet): checked where
    # the MTU is known (TestbedSpec, the emulator).
    "queue_bytes": Limit(1, 2**31 - 1, "bytes"),
    "loss.p": Limit(0.0, 1.0, "probability"),
    "loss.r": Limit(0.0, 1.0, "probability", min_exclusive=True),
    "loss.k": Limit(0.0, 1.0, "probability"),
    "loss.h": Limit(0.0, 1.0, "probability"),
    "outages.at_s": Limit(0.0, 3600.0, "s"),
    "outages.duration_s": Limit(0.0, 3600.0, "s", min_exclusive=True),
    "aqm.target_s": Limit(0.0, 60.0, "s", min_exclusive=True),
    "aqm.interval_s": Limit(0.0, 60.0, "s", min_exclusive=True),
    "aqm.quantum_bytes": Limit(64, 1_000_000, "bytes"),
    "aqm.flows": Limit(1, 65536, "flows"),
    "aqm.t_update_s": Limit(0.0, 60.0, "s", min_exclusive=True),
    "aqm.max_burst_s": Limit(0.0, 60.0, "s"),
    "aqm.alpha": Limit(0.0, 100.0, "1/s"),
    "aqm.beta": Limit(0.0, 100.0, "1/s"),
}

#: Settings that are whole numbers (``rate_bps`` is written as a float but must have no fraction).
WHOLE = ("rate_bps", "queue_packets", "queue_bytes", "aqm.quantum_bytes", "aqm.flows")


def _whole_bps(x: float) -> float:
    if not float(x).is_integer():
        raise ValueError(f"must be a whole number of bits per second, got {x:g}")
    return x


def _bounded(name: str, kind: type = float) -> Any:
    """``kind`` limited to ``LIMITS[name]`` (finite, for floats)."""
    lim = LIMITS[name]
    low = {"gt": lim.min} if lim.min_exclusive else {"ge": lim.min}
    if kind is int:
        return Annotated[int, Field(le=lim.max, **low)]
    return Annotated[float, Field(le=lim.max, allow_inf_nan=False, **low)]


DelaySeconds = _bounded("delay_s")
JitterSeconds = _bounded("jitter_s")
RateBps = Annotated[_bounded("rate_bps"), AfterValidator(_whole_bps)]
QueuePackets = _bounded("queue_packets", int)
QueueBytes = _bounded("queue_bytes", int)
OutageStart = _bounded("outages.at_s")
OutageDuration = _bounded("outages.duration_s")

# --------------------------------------------------------------------------- the base model

_depth: contextvars.ContextVar[int] = contextvars.ContextVar("tcpdelay_spec_depth", default=0)


def validation_message(err: ValidationError, what: str) -> str:
    """One line from a pydantic error: where, what is wrong (and so what is allowed)."""
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"])
    msg = e["msg"].removeprefix("Value error, ")
    where = f"{what}.{loc}" if loc else what
    extra = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{where}: {msg}{extra}"


@contextlib.contextmanager
def as_part() -> Iterator[None]:
    """Validate models of this family as parts of a larger model (e.g. a scenario): their
    errors stay pydantic errors, which the larger model words with its own path."""
    token = _depth.set(_depth.get() + 1)
    try:
        yield
    finally:
        _depth.reset(token)


class SpecModel(BaseModel):
    """Frozen, no unknown keys; built on its own, a bad value is one :class:`ParameterError`.

    Only the outermost model turns pydantic's error into a ParameterError line; nested models
    (pydantic calls their ``__init__`` too) let it through so its path stays whole. The testbed's
    spec (:mod:`tcpdelay.testbed.spec`) builds on this base too, so a link inside a testbed spec
    reports with the testbed's path.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, **data):
        depth = _depth.get()
        token = _depth.set(depth + 1)
        try:
            super().__init__(**data)
        except ValidationError as err:
            if depth:
                raise
            raise ParameterError(validation_message(err, type(self).__name__)) from None
        finally:
            _depth.reset(token)


def build(model: type[BaseModel], data: dict, what: str):
    """``model(**data)`` or one-line :class:`ParameterError` starting with ``what``."""
    try:
        return model(**data)
    except ValidationError as err:
        raise ParameterError(validation_message(err, what)) from None


class KnownKeys(BaseModel):
    """An unknown key is an error that lists the allowed ones (as the scenario file and the
    emulator word it). The scenario's models use it too."""

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key not in cls.model_fields:
                    raise ValueError(f"unknown key {key!r}; allowed: {', '.join(cls.model_fields)}")
        return data


class _LinkModel(SpecModel, KnownKeys):
    """A part of a link's settings: frozen, no unknown keys, one-line errors."""


# --------------------------------------------------------------------------- loss models

Probability = _bounded("loss.p")


class NoLoss(_LinkModel):
    """No random loss."""

    model: Literal["none"] = "none"


class BernoulliLoss(_LinkModel):
    """Independent loss: each packet is dropped with probability ``p`` (Brosh et al. §5.1)."""

    model: Literal["bernoulli"] = "bernoulli"
    p: Probability


class GilbertElliottLoss(_LinkModel):
    """Bursty loss, a two-state Markov chain evaluated once per packet (Gilbert–Elliott).

    ``p``: probability Good -> Bad; ``r``: probability Bad -> Good; ``k``: probability that a
    packet is delivered in Good; ``h``: probability that a packet is delivered in Bad (the
    parameter names of netem's ``gemodel`` and of Hasslinger and Hohlfeld, "The Gilbert-Elliott
    model for packet loss in real time services on the Internet"). With ``k = 1, h = 0`` the mean
    loss-burst length is ``1 / r`` packets and the loss ratio ``p / (p + r)``.
    """

    model: Literal["gilbert_elliott"] = "gilbert_elliott"
    p: Probability
    r: _bounded("loss.r")
    k: _bounded("loss.k") = 1.0
    h: _bounded("loss.h") = 0.0

    @property
    def loss_ratio(self) -> float:
        """Stationary loss probability."""
        good = self.r / (self.p + self.r)
        return good * (1 - self.k) + (1 - good) * (1 - self.h)

    @property
    def mean_burst_packets(self) -> float:
        """Mean sojourn in Bad, packets: the mean loss-burst length when ``k = 1, h = 0``."""
        return 1.0 / self.r


LOSS_MODELS: tuple[type[_LinkModel], ...] = (NoLoss, BernoulliLoss, GilbertElliottLoss)
LossSpec = Annotated[Union[NoLoss, BernoulliLoss, GilbertElliottLoss], Field(discriminator="model")]


# --------------------------------------------------------------------------- queue disciplines


class DropTail(_LinkModel):
    """The drop-tail queue (the default): arrivals beyond ``queue_packets``/``queue_bytes`` are
    dropped (Brosh et al. §5.3's routers)."""

    discipline: Literal["drop_tail"] = "drop_tail"


class CoDel(_LinkModel):
    """CoDel (RFC 8289, Nichols, Jacobson, McGregor, Iyengar, "Controlled Delay Active Queue
    Management"): drops at dequeue once packets' sojourn times stayed above ``target_s`` for
    ``interval_s`` (§4.2-4.4), then ``interval / sqrt(count)`` apart (§5.5). ``ecn``: mark CE
    instead of dropping ECN-capable packets."""

    discipline: Literal["codel"] = "codel"
    target_s: _bounded("aqm.target_s") = 0.005
    interval_s: _bounded("aqm.interval_s") = 0.1
    ecn: bool = False


class FqCoDel(_LinkModel):
    """FQ-CoDel (RFC 8290, Hoeiland-Joergensen et al.): ``flows`` queues by 5-tuple hash, served
    by deficit round robin (``quantum_bytes``) new flows first, CoDel on each (§4); on overflow
    the fattest flow's head is dropped (§4.1.2)."""

    discipline: Literal["fq_codel"] = "fq_codel"
    target_s: _bounded("aqm.target_s") = 0.005
    interval_s: _bounded("aqm.interval_s") = 0.1
    quantum_bytes: _bounded("aqm.quantum_bytes", int) = 1514
    flows: _bounded("aqm.flows", int) = 1024
    ecn: bool = False


class Pie(_LinkModel):
    """PIE (RFC 8033, Pan et al.): random drop at enqueue with a probability updated every
    ``t_update_s`` from the queueing delay against ``target_s`` (gains ``alpha``, ``beta`` in
    1/s, §4.2), no drop during a burst allowance of ``max_burst_s`` (§4.3)."""

    discipline: Literal["pie"] = "pie"
    target_s: _bounded("aqm.target_s") = 0.015
    t_update_s: _bounded("aqm.t_update_s") = 0.015
    max_burst_s: _bounded("aqm.max_burst_s") = 0.15
    alpha: _bounded("aqm.alpha") = 0.125
    beta: _bounded("aqm.beta") = 1.25
    ecn: bool = False


AQM_DISCIPLINES: tuple[type[_LinkModel], ...] = (DropTail, CoDel, FqCoDel, Pie)
AqmSpec = Annotated[Union[DropTail, CoDel, FqCoDel, Pie], Field(discriminator="discipline")]


def aqm_named(discipline: str, ecn: bool = False) -> "DropTail | CoDel | FqCoDel | Pie":
    """The discipline called ``discipline`` (``drop_tail``, ``codel``, ``fq_codel``, ``pie``)
    with its RFC defaults and ``ecn``; a one-line :class:`ParameterError` for another name or
    ECN with drop-tail."""
    names = {m.model_fields["discipline"].default: m for m in AQM_DISCIPLINES}
    if discipline not in names:
        raise ParameterError(f"queue discipline: must be one of {', '.join(names)}, got {discipline!r}")
    if discipline == "drop_tail":
        if ecn:
            raise ParameterError("ecn: needs an AQM discipline (codel, fq_codel or pie); drop-tail never marks")
        return DropTail()
    return names[discipline](ecn=ecn)


class Outage(_LinkModel):
    """The link is down (every packet dropped, reason ``outage``) from ``at_s`` for
    ``duration_s``, in seconds since the emulator started (in a scenario: since the run's t0)."""

    at_s: OutageStart
    duration_s: OutageDuration


# --------------------------------------------------------------------------- a direction, a link


class DirectionSpec(_LinkModel):
    """One direction of the emulated link, exactly the emulator's ``a_to_b``/``b_to_a`` table."""

    delay_s: DelaySeconds = 0.0
    jitter_s: JitterSeconds = 0.0
    reorder: bool = False
    loss: LossSpec = Field(default_factory=NoLoss)
    rate_bps: RateBps | None = None
    trace_file: str | None = None
    queue_packets: QueuePackets | None = None
    queue_bytes: QueueBytes | None = None
    outages: tuple[Outage, ...] = ()
    pcap_file: str | None = None
    aqm: AqmSpec | None = None

    @model_validator(mode="after")
    def _exclusive(self) -> "DirectionSpec":
        if self.rate_bps is not None and self.trace_file is not None:
            raise ValueError("rate_bps and trace_file are exclusive: give at most one")
        if self.queue_packets is not None and self.queue_bytes is not None:
            raise ValueError("queue_packets and queue_bytes are exclusive: give at most one")
        return self

    def later(self, lead_s: float) -> "DirectionSpec":
        """This direction with every outage ``lead_s`` seconds later: a scenario counts outages
        from the run's start, the emulator from its own, ``lead_s`` before. An outage pushed
        past its limit is a one-line :class:`ParameterError`."""
        if not self.outages or lead_s == 0:
            return self
        return DirectionSpec(**{**dict(self), "outages": tuple(
            Outage(at_s=o.at_s + lead_s, duration_s=o.duration_s) for o in self.outages)})

    def settings(self) -> dict:
        """This direction as the emulator's ``DIRECTION`` JSON object (every key, ``None`` as
        null; ``aqm`` only when a discipline is set): what the testbed writes into
        ``link.json``."""
        out = self.model_dump(mode="json")
        if out["aqm"] is None:
            del out["aqm"]
        return out


class LinkSpec(_LinkModel):
    """The emulated bottleneck: ``a_to_b`` = left -> right (data), ``b_to_a`` = right -> left."""

    a_to_b: DirectionSpec = Field(default_factory=DirectionSpec)
    b_to_a: DirectionSpec = Field(default_factory=DirectionSpec)

    @classmethod
    def symmetric(cls, **direction) -> "LinkSpec":
        """The same settings both ways, e.g. ``LinkSpec.symmetric(delay_s=0.02)``."""
        d = build(DirectionSpec, direction, "link")
        return cls(a_to_b=d, b_to_a=d)


# --------------------------------------------------------------------------- the schema


def schema() -> dict:
    """The key sets and limits of a link's settings as plain data: what ``tcpdelay-link
    --schema`` prints for its side (``tests/test_link_schema.py`` compares them) and what the key
    table of ``docs/emulator.md`` shows (:func:`key_table`)."""
    return {
        "direction": list(DirectionSpec.model_fields),
        "loss": {m.model_fields["model"].default: list(m.model_fields) for m in LOSS_MODELS},
        "outage": list(Outage.model_fields),
        "aqm": {m.model_fields["discipline"].default: list(m.model_fields) for m in AQM_DISCIPLINES},
        "limits": {k: {"min": v.min, "max": v.max, "unit": v.unit, "min_exclusive": v.min_exclusive}
                   for k, v in LIMITS.items()},
        "whole": list(WHOLE),
    }


def _num(x: float) -> str:
    x = float(x)
    if x == 2**31 - 1:
        return "2^31 − 1"
    if x.is_integer() and abs(x) >= 1e5:
        mant, exp = f"{x:e}".split("e")
        return f"{mant.rstrip('0').rstrip('.')}e{int(exp)}"
    return f"{x:g}"


def limit_text(key: str) -> str:
    """``[0, 60] s``, ``(0, 1] probability``: the range of ``LIMITS[key]`` as the docs write it."""
    lim = LIMITS[key]
    return f"{'(' if lim.min_exclusive else '['}{_num(lim.min)}, {_num(lim.max)}] {lim.unit}"


#: Type, default and meaning of each direction key, for the docs' key table (:func:`key_table`);
#: ``$key$`` stands for the range of ``LIMITS[key]``.
_KEY_DOCS: dict[str, tuple[str, str]] = {
    "delay_s": ("$delay_s$, 0", "one-way propagation delay"),
    "jitter_s": ("$jitter_s$, 0", "delay variation, uniform ±"),
    "reorder": ("bool, false", "let jitter reorder packets"),
    "loss": ("table, `{model = \"none\"}`",
             "`{model = \"bernoulli\", p}` or `{model = \"gilbert_elliott\", p, r, k = 1, h = 0}`; "
             "`p`, `k`, `h` in $loss.p$, `r` in $loss.r$"),
    "rate_bps": ("whole number in $rate_bps$ or null", "serialization rate"),
    "trace_file": ("path or null", "Mahimahi trace; exclusive with `rate_bps`"),
    "queue_packets": ("whole number in $queue_packets$ or null", "drop-tail limit in packets"),
    "queue_bytes": ("whole number in $queue_bytes$ or null",
                    "drop-tail limit in bytes, at least `mtu`; exclusive with `queue_packets`"),
    "outages": ("list of `{at_s, duration_s}`",
                "link down at `at_s` in $outages.at_s$ (after the loop starts) for `duration_s` in "
                "$outages.duration_s$; windows must not overlap"),
    "pcap_file": ("path or null", "pcap of what this direction delivers"),
    "aqm": ("table or null (drop-tail)",
            "queue discipline: `{discipline = \"codel\", target_s = 0.005, interval_s = 0.1, ecn = false}`, "
            "`{discipline = \"fq_codel\", target_s, interval_s, quantum_bytes = 1514, flows = 1024, ecn}`, "
            "`{discipline = \"pie\", target_s = 0.015, t_update_s = 0.015, max_burst_s = 0.15, alpha = 0.125, "
            "beta = 1.25, ecn}` or `{discipline = \"drop_tail\"}`; times in $aqm.target_s$ (`max_burst_s` "
            "$aqm.max_burst_s$), `quantum_bytes` $aqm.quantum_bytes$, `flows` $aqm.flows$, `alpha`, `beta` "
            "$aqm.alpha$; the limit is `queue_packets`/`queue_bytes`"),
}


def key_table() -> str:
    """The per-direction key table of ``docs/emulator.md`` (Markdown), from :func:`schema`;
    ``tests/test_link_schema.py`` checks that the page holds exactly this text."""
    def fill(text: str) -> str:
        return re.sub(r"\$([a-z_.]+)\$", lambda m: limit_text(m.group(1)), text)

    rows = ["| key | type, default | meaning |", "|---|---|---|"]
    for key in schema()["direction"]:
        typ, meaning = _KEY_DOCS[key]
        rows.append(f"| `{key}` | {fill(typ)} | {fill(meaning)} |")
    return "\n".join(rows) + "\n"

"""The delay model's media profiles: the CBR profiles of Brosh et al. §5 with their working-region
criteria (§6.1).

Sizes, intervals, nominal rates and descriptions come from the one profile table,
:mod:`tcpdelay.profiles` (sizes include the 12-byte RTP header, RFC 3550, and the 2-byte
framing of RTP over TCP, RFC 4571; the nominal codec rates exclude them, so the rate on TCP is
``8·a/interval``); this module adds only the criteria, by name. Criteria (Section 6.1): VoIP is
satisfactory while the 95th percentile delay is at most 200 ms (at the boundary 5 % of packets
miss playout); live video while its delay is at most 5 s (the paper's "maximum"; we use the
99.9th percentile, video quality dropping rapidly at 0.1 % late packets). Interactive video is
not given a criterion in the paper: we use ITU-T G.114's 400 ms at the 95th percentile
(documented choice).
"""

from __future__ import annotations

from dataclasses import dataclass

from tcpdelay import profiles as media_profiles
from tcpdelay.errors import ParameterError


@dataclass(frozen=True)
class Criterion:
    """A working-region criterion: the ``percentile`` of delay is at most ``bound_s``."""

    percentile: float
    bound_s: float

    def __post_init__(self):
        if not (0 < self.percentile < 100):
            raise ParameterError(f"percentile: {self.percentile!r} must be in (0, 100)")
        if not (self.bound_s > 0):
            raise ParameterError(f"bound_s: {self.bound_s!r} must be positive")


@dataclass(frozen=True)
class Profile:
    """A constant-bit-rate source: ``packet_bytes`` every ``interval_s``."""

    name: str
    packet_bytes: float
    interval_s: float
    nominal_bps: float | None
    criterion: Criterion
    description: str = ""

    @property
    def rate_pps(self) -> float:
        return 1.0 / self.interval_s

    @property
    def rate_bps(self) -> float:
        """Rate on TCP including RTP header and framing."""
        return 8.0 * self.packet_bytes / self.interval_s


VOIP_CRITERION = Criterion(95.0, 0.2)
VIDEO_CRITERION = Criterion(99.9, 5.0)
INTERACTIVE_CRITERION = Criterion(95.0, 0.4)

#: The working-region criterion of each of the delay model's profiles, by name.
CRITERIA: dict[str, Criterion] = {
    "voip": VOIP_CRITERION,
    "voip-low": VOIP_CRITERION,
    "ivideo": INTERACTIVE_CRITERION,
    "ivideo-low": INTERACTIVE_CRITERION,
    "video": VIDEO_CRITERION,
    "video-low": VIDEO_CRITERION,
}


def _with_criterion(name: str) -> Profile:
    m = media_profiles.PROFILES[name]
    return Profile(m.name, m.size_bytes, m.interval_s, m.nominal_bps, CRITERIA[name], m.description)


PROFILES: dict[str, Profile] = {name: _with_criterion(name) for name in media_profiles.DELAY_MODEL_PROFILES}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ParameterError(f"profile: {name!r} is not one of {', '.join(PROFILES)}") from None


def custom_profile(rate_bps: float, packet_bytes: float, criterion: Criterion = VOIP_CRITERION) -> Profile:
    """A custom source of ``rate_bps`` (on TCP, headers included) in packets of ``packet_bytes``."""
    try:
        rate, a = float(rate_bps), float(packet_bytes)
    except (TypeError, ValueError):
        raise ParameterError("rate_bps and packet_bytes must be numbers") from None
    if not (rate > 0) or not (a > 0):
        raise ParameterError(f"rate_bps {rate_bps!r} and packet_bytes {packet_bytes!r} must be positive")
    return Profile("custom", a, 8.0 * a / rate, None, criterion, f"{rate:g} b/s in {a:g} B packets")

"""CBR sources from the delay model's traffic profiles.

The six profiles of the delay model (Brosh et al., *The Delay-Friendliness of TCP for Real-Time
Traffic*, §5–6: VoIP, interactive video and video at a 20 ms and a 30 ms packet interval). The
sizes in the table are on-the-wire application bytes over TCP: the 12-byte RTP header and the
2-byte RFC 4571 length prefix included. A :class:`~tcpdelay.traffic.source.Packet` does not count
the prefix, so the source's packets are ``size_bytes - 2`` bytes (e.g. voip: 172 B every 20 ms).
This table is the one of the delay-model issue; it is kept here so the sources do not depend on
the model package.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from tcpdelay.errors import ParameterError
from tcpdelay.traffic.cbr import CbrSource
from tcpdelay.traffic.voip import VoipOnOffSource

#: Bytes of the RFC 4571 length prefix included in a profile's size.
RFC4571_PREFIX_BYTES = 2


class Profile(NamedTuple):
    size_bytes: int
    """Application bytes per packet over TCP (RTP header + 2-byte RFC 4571 prefix included)."""
    interval_s: float


PROFILES: Mapping[str, Profile] = {
    "voip": Profile(174, 0.020),
    "voip-low": Profile(174, 0.030),
    "ivideo": Profile(724, 0.020),
    "ivideo-low": Profile(724, 0.030),
    "video": Profile(1448, 0.020),
    "video-low": Profile(1448, 0.030),
}


def source_from_profile(name: str, *, on_off: bool = False) -> CbrSource | VoipOnOffSource:
    """The CBR source of profile ``name`` (packets of ``size_bytes - 2`` every ``interval_s``);
    with ``on_off`` (VoIP profiles only) the same packets in exponential talk spurts and
    silences (:class:`VoipOnOffSource`, means 1.0 s / 1.35 s)."""
    if name not in PROFILES:
        raise ParameterError(f"profile: {name!r} is not one of {', '.join(PROFILES)}")
    prof = PROFILES[name]
    packet_bytes = prof.size_bytes - RFC4571_PREFIX_BYTES
    if on_off:
        if not name.startswith("voip"):
            raise ParameterError(f"profile {name!r}: talk spurts (on_off) apply to voip, voip-low")
        return VoipOnOffSource(packet_bytes, prof.interval_s, name=f"{name}-onoff")
    return CbrSource(packet_bytes, prof.interval_s, name=name)

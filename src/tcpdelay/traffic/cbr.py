"""Constant bit rate: one packet of a fixed size every ``interval_s`` (the delay model's CBR
source, Brosh et al., *The Delay-Friendliness of TCP for Real-Time Traffic*, §3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from tcpdelay import checks
from tcpdelay.traffic.source import Packet, check_packet_bytes


@dataclass(frozen=True)
class CbrSource:
    """Packets of ``packet_bytes`` (RTP header included) at ``0, interval_s, 2*interval_s, ...``."""

    packet_bytes: int
    interval_s: float
    name: str = "cbr"

    def __post_init__(self) -> None:
        check_packet_bytes("packet_bytes", self.packet_bytes)
        checks.positive_float("interval_s", self.interval_s)

    @property
    def nominal_interval_s(self) -> float:
        return self.interval_s

    @property
    def rate_bps(self) -> float:
        return self.packet_bytes * 8 / self.interval_s

    def packets(self, duration_s: float, seed: int = 0) -> Iterator[Packet]:
        """The schedule is deterministic; ``seed`` is accepted for the interface and unused.
        Times are ``k * interval_s`` (computed by multiplication, so no drift accumulates)."""
        duration = checks.non_negative_float("duration_s", duration_s)
        k = 0
        while (t := k * self.interval_s) < duration:
            yield Packet(t, self.packet_bytes)
            k += 1

"""VoIP with talk spurts and silences: the two-state on/off model of a speaker behind voice
activity detection, with exponentially distributed talk spurts (default mean 1.0 s) and silences
(default mean 1.35 s), the values commonly used for VoIP on/off sources. During a spurt the
codec emits one packet every ``interval_s``; during a silence nothing. Brosh et al. (*The
Delay-Friendliness of TCP for Real-Time Traffic*, §8, "Idle periods") point out that these
silences let TCP's window decay; the transport can add keep-alives (``tcpdelay.transport``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from tcpdelay import checks
from tcpdelay.traffic.source import Packet, check_packet_bytes


@dataclass(frozen=True)
class VoipOnOffSource:
    """Exponential on/off voice source. The flow starts at the beginning of a talk spurt; the
    packets of a spurt that starts at ``t0`` and lasts ``on`` are at ``t0 + k*interval_s`` for
    every ``k*interval_s < on`` (at least one packet per spurt)."""

    packet_bytes: int = 172
    interval_s: float = 0.02
    mean_on_s: float = 1.0
    mean_off_s: float = 1.35
    name: str = "voip-onoff"

    def __post_init__(self) -> None:
        check_packet_bytes("packet_bytes", self.packet_bytes)
        checks.positive_float("interval_s", self.interval_s)
        checks.positive_float("mean_on_s", self.mean_on_s)
        checks.positive_float("mean_off_s", self.mean_off_s)

    @property
    def nominal_interval_s(self) -> float:
        return self.interval_s

    @property
    def activity(self) -> float:
        """Long-run fraction of time in talk spurts, mean_on / (mean_on + mean_off)."""
        return self.mean_on_s / (self.mean_on_s + self.mean_off_s)

    def periods(self, duration_s: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Start times and lengths of the talk spurts that begin before ``duration_s`` (the
        silence after spurt i is ``starts[i+1] - starts[i] - lengths[i]``)."""
        duration = checks.non_negative_float("duration_s", duration_s)
        rng = np.random.default_rng(seed)
        starts, lengths = [], []
        t = 0.0
        while t < duration:
            on = float(rng.exponential(self.mean_on_s))
            off = float(rng.exponential(self.mean_off_s))
            starts.append(t)
            lengths.append(on)
            t += on + off
        return np.asarray(starts), np.asarray(lengths)

    def packets(self, duration_s: float, seed: int = 0) -> Iterator[Packet]:
        duration = checks.non_negative_float("duration_s", duration_s)
        starts, lengths = self.periods(duration, seed)
        for t0, on in zip(starts, lengths):
            n = max(1, int(np.ceil(on / self.interval_s)))
            for k in range(n):
                t = t0 + k * self.interval_s
                if t >= duration:
                    return
                yield Packet(float(t), self.packet_bytes)

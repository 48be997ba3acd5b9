"""How late a program did something against its schedule, kept in bounded memory.

A media sender adds, for every packet, its actual send instant minus its scheduled one
(``send_lateness_us`` of its result); a receiver that can compare its read instant with the
kernel's receive timestamp adds that lag (``recv_lag_us``). :class:`LatenessHistogram` keeps
them in a log-linear histogram — exact below 64 µs, then 32 buckets per power of two (at most
3 % off) — so a run of any length costs a few hundred integers, and an addition is a few
integer operations. :meth:`LatenessHistogram.summary` is the shape every endpoint reports,
the Python ones and the native one alike: ``{"p99", "max", "count"}`` in µs (p99 and max None
without values).
"""

from __future__ import annotations

#: Values below this (µs) have a bucket each.
_EXACT_US = 64
#: Buckets per power of two above :data:`_EXACT_US` (the relative resolution: 1/32).
_SUB = 32


def _bucket(us: int) -> int:
    if us < _EXACT_US:
        return us
    shift = us.bit_length() - 6          # keep the top six bits: us >> shift in [32, 63]
    return _EXACT_US + (shift - 1) * _SUB + ((us >> shift) - _SUB)


def _upper_us(bucket: int) -> int:
    """The largest value (µs) that falls in ``bucket``."""
    if bucket < _EXACT_US:
        return bucket
    shift, sub = divmod(bucket - _EXACT_US, _SUB)
    shift += 1
    return ((sub + _SUB + 1) << shift) - 1


class LatenessHistogram:
    """Lateness values in µs (negative: early, counted as 0), their count and exact maximum."""

    __slots__ = ("counts", "count", "max_us")

    def __init__(self):
        self.counts: dict[int, int] = {}
        self.count = 0
        self.max_us = 0.0

    def add_ns(self, late_ns: int) -> None:
        """One value, in nanoseconds."""
        us = late_ns // 1000 if late_ns > 0 else 0
        b = us if us < _EXACT_US else _bucket(us)
        self.counts[b] = self.counts.get(b, 0) + 1
        self.count += 1
        if late_ns > self.max_us * 1000:
            self.max_us = late_ns / 1000

    def quantile_us(self, q: float) -> float | None:
        """The ``q`` quantile (0..1), as the upper edge of its bucket (never above the maximum):
        at most 1 µs or 1/32 above the exact value, never below it."""
        if not self.count:
            return None
        rank = max(1, int(q * self.count + 0.999999))
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen >= rank:
                edge = b + 1 if b < _EXACT_US else _upper_us(b) + 1
                return float(min(edge, self.max_us))
        return self.max_us

    def summary(self) -> dict:
        """``{"p99", "max", "count"}``: µs, µs, values added."""
        return {"p99": self.quantile_us(0.99), "max": round(self.max_us, 3) if self.count else None,
                "count": self.count}

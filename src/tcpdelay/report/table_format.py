"""How a results report writes numbers in its tables: milliseconds, percent, kb/s, a number;
``—`` for a value that is missing or not finite."""

from __future__ import annotations

import math

__all__ = ["kbps", "mean_std", "ms", "num", "pct"]


def _ok(x) -> bool:
    return x is not None and math.isfinite(x)


def ms(x: float | None) -> str:
    return f"{x * 1e3:.1f}" if _ok(x) else "—"


def pct(x: float | None, digits: int = 2) -> str:
    return f"{x * 100:.{digits}f}" if _ok(x) else "—"


def num(x: float | None, fmt: str = ".3g") -> str:
    return format(x, fmt) if _ok(x) else "—"


def kbps(x: float | None) -> str:
    return f"{x / 1e3:.1f}" if _ok(x) else "—"


def mean_std(xs) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (0 for one value) of the values that are not None."""
    vals = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    if not vals:
        return None, None
    m = sum(vals) / len(vals)
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return m, sd

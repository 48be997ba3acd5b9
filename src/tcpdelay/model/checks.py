"""Parameter validation at the model boundary (SciPy style: check once, then compute).

Each helper converts its input to a float ndarray and raises
:class:`tcpdelay.errors.ParameterError` naming the parameter, the offending value and the
allowed range.
"""

from __future__ import annotations

import numpy as np

from tcpdelay.errors import ParameterError


def _first_bad(x: np.ndarray, bad: np.ndarray) -> float:
    return float(np.asarray(x)[bad].flat[0]) if np.ndim(x) else float(x)


def as_array(name: str, value) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"{name}: {value!r} is not a number") from None
    if np.isnan(arr).any():
        raise ParameterError(f"{name}: NaN is not allowed")
    return arr


def probability(name: str, value, *, allow_one: bool = False) -> np.ndarray:
    """A probability in [0, 1) (or [0, 1] with ``allow_one``)."""
    arr = as_array(name, value)
    bad = (arr < 0) | ((arr > 1) if allow_one else (arr >= 1))
    if bad.any():
        upper = "1]" if allow_one else "1)"
        raise ParameterError(f"{name}: {_first_bad(arr, bad):g} is outside [0, {upper}")
    return arr


def positive(name: str, value, *, allow_inf: bool = False) -> np.ndarray:
    """Strictly positive and finite (``allow_inf`` admits +inf, e.g. an unlimited window)."""
    arr = as_array(name, value)
    bad = ~(arr > 0) | (~np.isfinite(arr) if not allow_inf else np.zeros(arr.shape, bool))
    if bad.any():
        what = "positive (inf allowed)" if allow_inf else "positive and finite"
        raise ParameterError(f"{name}: {_first_bad(arr, bad):g} must be {what}")
    return arr


def non_negative(name: str, value) -> np.ndarray:
    arr = as_array(name, value)
    bad = ~(arr >= 0) | ~np.isfinite(arr)
    if bad.any():
        raise ParameterError(f"{name}: {_first_bad(arr, bad):g} must be >= 0 and finite")
    return arr


def at_least(name: str, value, lower: float, *, allow_inf: bool = False) -> np.ndarray:
    arr = as_array(name, value)
    bad = ~(arr >= lower)
    if not allow_inf:
        bad |= ~np.isfinite(arr)
    if bad.any():
        raise ParameterError(f"{name}: {_first_bad(arr, bad):g} must be >= {lower:g}")
    return arr

"""Parameter validation at a boundary (SciPy style: check once, then compute).

Shared by every layer (the models, the traffic sources, the metrics): one helper per check.
Each raises :class:`tcpdelay.errors.ParameterError` naming the parameter, the offending value
and the allowed range.

- Array helpers (:func:`as_array`, :func:`probability`, :func:`positive`,
  :func:`non_negative`, :func:`at_least`) take a scalar or an array and return a float
  ndarray: the vectorised inputs of the models and metrics.
- Scalar helpers (:func:`positive_float`, :func:`non_negative_float`) take one setting (a
  source's interval, a run's duration) and return a Python float; the message quotes the
  value as given (``repr``).
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


def _float(name: str, value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name}: {value!r} is not a number") from None


def positive_float(name: str, value) -> float:
    """One strictly positive, finite number (a NaN is refused as not positive)."""
    v = _float(name, value)
    if not (v > 0 and v < float("inf")):
        raise ParameterError(f"{name}: {value!r} must be positive and finite")
    return v


def non_negative_float(name: str, value) -> float:
    """One number >= 0 and finite (a NaN is refused)."""
    v = _float(name, value)
    if not (v >= 0 and v < float("inf")):
        raise ParameterError(f"{name}: {value!r} must be >= 0 and finite")
    return v

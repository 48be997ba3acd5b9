"""JSON in and out, one way for the whole package: plain JSON values from NumPy and floats, and
files written whole or not at all.

JSON (RFC 8259 §6) has no NaN or infinity; every non-finite float becomes ``null``.

A float is given as the decimal it was computed from when arithmetic only added rounding noise
(:func:`short_float`): 0.1 + 0.2 (0.30000000000000004) is written 0.3. The rule moves no value by
more than one unit in its last place (a relative 2.2e-16, far below what any clock or counter
here resolves), so a measured value keeps its precision; a value with no such decimal is
written exactly.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from tcpdelay.atomic_file import write_text_atomic


#: Significant digits of a decimal that survives a round trip through a double unchanged
#: (C's DBL_DIG): such a decimal is what a float "came from".
DECIMAL_DIGITS = 15


def short_float(f: float) -> float:
    """``f``, or the decimal of at most :data:`DECIMAL_DIGITS` significant digits within one
    ulp of it when there is one (the nearest: its ``repr`` is then that decimal). One ulp is the
    noise of one rounded operation on decimal inputs (0.1 + 0.2, 3 * 0.1, 1.1 * 1.1); a double
    that is not that close to any 15-digit decimal (most measured values) comes back unchanged."""
    if not math.isfinite(f) or f == 0.0:
        return f
    d = float(f"{f:.{DECIMAL_DIGITS}g}")
    return d if abs(d - f) <= math.ulp(f) else f


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types: dict keys as strings, tuples and arrays as lists, NumPy
    scalars unwrapped, non-finite floats as None, rounding noise taken off floats
    (:func:`short_float`)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return short_float(f) if math.isfinite(f) else None
    return value


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` to ``path`` (indented, keys sorted, anything else as ``str``) through a
    hidden temporary file renamed into place, so a reader sees the old file or the new one,
    never half of one; the temporary file is removed if writing fails (e.g. a full disk), and
    the OSError raised names ``path``."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str))

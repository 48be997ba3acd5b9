"""JSON in and out, one way for the whole package: plain JSON values from NumPy and floats, and
files written whole or not at all.

JSON (RFC 8259 §6) has no NaN or infinity; every non-finite float becomes ``null``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from tcpdelay.atomic_file import write_text_atomic


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types: dict keys as strings, tuples and arrays as lists, NumPy
    scalars unwrapped, non-finite floats as None."""
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
        return f if math.isfinite(f) else None
    return value


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` to ``path`` (indented, keys sorted, anything else as ``str``) through a
    hidden temporary file renamed into place, so a reader sees the old file or the new one,
    never half of one; the temporary file is removed if writing fails (e.g. a full disk), and
    the OSError raised names ``path``."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str))

"""Plain data -> :class:`Scenario`, or one line naming the bad key (pydantic's errors rewritten:
``flows[1].profile: 'voip2' is not one of voip, voip-low, ...``)."""

from __future__ import annotations

import re

from pydantic import ValidationError

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario.experiment import Scenario
from tcpdelay.link import as_part

#: The tags of the tagged unions (loss models, cross kinds, stream kinds): left out of a key's path.
_UNION_TAGS = {"none", "bernoulli", "gilbert_elliott", "bulk", "web_onoff", "page_load", "transfers", "udp", "http_video"}


def format_loc(loc: tuple) -> str:
    """``('flows', 1, 'profile')`` -> ``flows[1].profile`` (union tags are left out)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _UNION_TAGS or str(part).startswith("function-"):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _message(err: ValidationError) -> str:
    e = err.errors(include_url=False)[0]
    loc = format_loc(tuple(e["loc"]))
    typ = e["type"]
    given = e.get("input")
    if typ == "literal_error":
        allowed = re.findall(r"'([^']*)'", e["ctx"]["expected"])
        msg = f"{given!r} is not one of {', '.join(allowed)}"
    elif typ == "union_tag_invalid":
        allowed = re.findall(r"'([^']*)'", e["ctx"]["expected_tags"])
        msg = f"{e['ctx']['tag']!r} is not one of {', '.join(allowed)}"
        loc = f"{loc}.{e['ctx']['discriminator'].strip(chr(39))}" if loc else loc
    elif typ == "union_tag_not_found":
        msg = f"missing key {e['ctx']['discriminator']}"
    elif typ == "missing":
        msg = "missing (required)"
    elif typ == "too_short":
        msg = f"needs at least {e['ctx']['min_length']} entry"
    elif typ in ("model_type", "model_attributes_type", "dict_type"):
        msg = f"{given!r} must be a table"
    elif typ in ("tuple_type", "list_type"):
        msg = f"{given!r} must be a list"
    else:
        msg = e["msg"].removeprefix("Value error, ")
        if typ not in ("value_error", "assertion_error") and given is not None and not isinstance(given, (dict, list)):
            msg = f"{given!r}: {msg[0].lower()}{msg[1:]}"
    return f"{loc}: {msg}" if loc else msg


def validate(data: dict, source: str) -> Scenario:
    """``data`` as a :class:`Scenario`; any problem is one
    :class:`~tcpdelay.errors.ParameterError` line, ``source: key: what is wrong``."""
    try:
        with as_part():  # the link's models report through the scenario's messages
            return Scenario.model_validate(data)
    except ValidationError as err:
        raise ParameterError(f"{source}: {_message(err)}") from None

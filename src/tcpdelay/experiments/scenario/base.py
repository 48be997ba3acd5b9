"""What every table of a scenario shares: unknown keys refused, values frozen, the time types."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from tcpdelay.link import KnownKeys


class StrictTable(KnownKeys):
    """Unknown keys are errors that list the allowed ones; values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Seconds = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]

#: Which way a flow, a cross-traffic entry or a stream runs: ``forward`` is the path's forward
#: direction (sender -> receiver).
FlowDirection = Literal["forward", "reverse"]

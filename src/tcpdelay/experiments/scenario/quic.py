"""The ``quic`` table of a media flow over a QUIC transport (docs/transports-quic.md): the
congestion control aioquic runs for it and the stream mapping's knobs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tcpdelay.experiments.scenario.base import PositiveSeconds, StrictTable

#: The flow transports over QUIC (:mod:`tcpdelay.transport.quic_config`).
QUIC_TRANSPORTS = ("quic-stream", "quic-frame-streams", "quic-datagram")


class Quic(StrictTable):
    """``congestion_control``: ``newreno`` or ``cubic`` (aioquic 1.7 has no BBR).
    ``deadline_s``: quic-frame-streams: a frame's (or group's) stream not acknowledged this
    long after it opened is reset (RESET_STREAM); quic-datagram: a DATAGRAM frame congestion
    control has not let out this long after its packet was written is dropped, never sent. ``streams_per``: ``frame`` or ``gop`` (a
    stream per group of pictures, from each I frame). ``max_datagram_bytes``: the largest UDP
    payload QUIC sends (1200 fits every path; aioquic does no path MTU discovery)."""

    congestion_control: Literal["newreno", "cubic"] = "newreno"
    deadline_s: PositiveSeconds | None = None
    streams_per: Literal["frame", "gop"] = "frame"
    max_datagram_bytes: Annotated[int, Field(ge=1200, le=65527)] = 1200

"""The ``[[streams]]`` tables: streams a client pulls (papers/003's video over HTTP)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from tcpdelay.experiments.scenario.base import FlowDirection, Seconds, StrictTable
from tcpdelay.experiments.scenario.tcp import Tcp

#: papers/003 Sec. V: "TCP sender and receiver maximum buffer size: 256Mbytes".
HTTP_TCP_BUFFER_MAX_BYTES = 256 * 1024 * 1024


class VideoFile(StrictTable):
    """The H.264 file an HTTP stream serves, made reproducibly by ffmpeg/x264
    (:mod:`tcpdelay.traffic.video_file`; papers/003 Sec. V: 30 fps, 5.24 Mb/s on average,
    10 min 24 s)."""

    duration_s: Annotated[float, Field(gt=0.0, le=3600.0, allow_inf_nan=False)] = 624.0
    rate_bps: Annotated[float, Field(ge=100e3, le=100e6, allow_inf_nan=False)] = 5.24e6
    fps: Annotated[int, Field(ge=1, le=120)] = 30


class HttpVideo(StrictTable):
    """A video file pulled over HTTP (papers/003): a real HTTP server (nginx) on the sending side
    serves it to a player on the receiving side, ``model`` (traffic/http_player.py: logs every
    frame, discards and underflows computed from the log) or ``vlc`` (VLC headless, its own
    counters). ``tcp`` is the server's (its congestion control above all); both ends' TCP
    buffers may grow to ``tcp_buffer_max_bytes`` (tcp_rmem/tcp_wmem maxima)."""

    kind: Literal["http_video"]
    name: str | None = None
    video: VideoFile = Field(default_factory=VideoFile)
    player: Literal["model", "vlc"] = "model"
    playout_buffer_bytes: Annotated[int, Field(ge=1024, le=2**31 - 1)] = 656_000
    #: After a freeze: ``rebuffer`` (wait for ``rebuffer_bytes``, default half the playout buffer,
    #: then go on late) or ``skip`` (never move the clock, skip what is late): docs/video-over-http.md.
    catch_up: Literal["rebuffer", "skip"] = "rebuffer"
    rebuffer_bytes: Annotated[int, Field(ge=1)] | None = None
    direction: FlowDirection = "forward"
    start_s: Seconds = 0.0
    tcp: Tcp = Field(default_factory=Tcp)
    tcp_buffer_max_bytes: Annotated[int, Field(ge=65536, le=2**31 - 1)] = HTTP_TCP_BUFFER_MAX_BYTES


Stream = Annotated[Union[HttpVideo], Field(discriminator="kind")]
STREAM_KINDS = ("http_video",)

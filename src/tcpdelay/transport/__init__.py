"""Media over real sockets: a sender and a receiver over TCP (RFC 4571) and UDP (RTP).

- :mod:`.framing` — RTP packets, RFC 4571 framing, the bounded streaming parser
- :mod:`.control` — the versioned control exchange (hello/accept/end/summary)
- :mod:`.sockopts` — per-connection TCP knobs (TCP_NODELAY, TCP_CONGESTION, ...)
- :mod:`.tcp_state` — TCP_INFO and SIOCOUTQNSD
- :mod:`.scheduler` — blind and intelligent parallel-connection schedulers
- :mod:`.send` — :func:`run_sender`, by transport: :mod:`.sender` (TCP, UDP) or :mod:`.quic_sender`
- :mod:`.receiver` — :func:`run_receiver`
- :mod:`.clock` — the one clock of a run (CLOCK_MONOTONIC)

See docs/transport.md.
"""

from tcpdelay.transport.config import ReceiverConfig, RunParams, SenderConfig, parse_host_port
from tcpdelay.transport.framing import FrameParser, FramingError
from tcpdelay.transport.receiver import ReceiverResult, run_receiver
from tcpdelay.transport.send import run_sender
from tcpdelay.transport.sender import SenderError, SenderResult
from tcpdelay.transport.sockopts import TcpOptions

__all__ = [
    "FrameParser", "FramingError", "ReceiverConfig", "ReceiverResult", "RunParams",
    "SenderConfig", "SenderError", "SenderResult", "TcpOptions", "parse_host_port",
    "run_receiver", "run_sender",
]

"""Media over QUIC: the three mappings, their typed options and aioquic's configuration.

The transports (``RunParams.transport``; docs/transports-quic.md):

- ``quic-stream``: every RTP packet on one client-initiated bidirectional stream (stream 0),
  framed as over TCP (RFC 4571 §2): one ordered, reliable byte stream, like TCP's.
- ``quic-frame-streams``: each video frame (``streams_per = "frame"``) or each group of pictures
  (``"gop"``: a new group at every I frame) on its own client-initiated unidirectional stream,
  RFC 4571-framed, FIN after its last packet; a packet without a frame (VoIP) is a frame of its
  own. A stream whose data is not all acknowledged ``deadline_s`` after it was opened is reset
  (RESET_STREAM, RFC 9000 §19.4) with :data:`DEADLINE_ERROR_CODE`: its data is no longer
  retransmitted, and packets of its frame not yet sent are skipped (``dropped`` in "sent").
  This is the moq-transport drafts' stream-per-group mapping with a delivery timeout.
- ``quic-datagram``: every RTP packet in one DATAGRAM frame (RFC 9221), never retransmitted; a
  packet larger than what one DATAGRAM frame carries is sent as split-N pieces (the receiver
  reassembles them as UDP's). DATAGRAM frames are congestion-controlled (RFC 9221 §5.4) and wait
  in the sender's queue while the window is full; with ``deadline_s`` one still queued that
  long after its packet was written is dropped there (counted in ``deadline_dropped_datagrams``),
  the datagram form of the delivery timeout: a late datagram is not sent at all.

Congestion control is aioquic's: ``newreno`` (RFC 9002 §7, aioquic's "reno") or ``cubic``
(RFC 9438). aioquic 1.7 has no BBR, so ``bbr`` is refused.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from tcpdelay.errors import ParameterError

QUIC_TRANSPORTS = ("quic-stream", "quic-frame-streams", "quic-datagram")
#: Congestion controls by our name -> aioquic's registered name.
CONGESTION_CONTROLS = {"newreno": "reno", "cubic": "cubic"}
STREAMS_PER = ("frame", "gop")
#: ALPN of the media connection (RFC 7301): a peer that offers another protocol is refused in
#: the handshake (no_application_protocol).
ALPN = "tcpdelay-media/1"
#: RESET_STREAM's application error code for a stream past its deadline.
DEADLINE_ERROR_CODE = 0x1
#: aioquic's default and RFC 9000 §14's smallest maximum UDP payload: it fits every path.
DEFAULT_MAX_DATAGRAM_BYTES = 1200
#: Flow-control windows (connection and per stream) far above any media backlog, so QUIC's
#: flow control, like TCP's autotuned receive buffer, never limits a media flow.
FLOW_CONTROL_WINDOW_BYTES = 64 * 2**20
#: Bytes of a 1-RTT packet around a DATAGRAM frame's payload: 1-byte header flags, the
#: 8-byte connection id, up to 4 bytes of packet number, the 16-byte AEAD tag, the frame type
#: and its length (up to 1 + 4 bytes), and room for an ACK frame aioquic may put first.
DATAGRAM_OVERHEAD_BYTES = 64


def is_quic(transport: str) -> bool:
    return transport in QUIC_TRANSPORTS


@dataclass(frozen=True)
class QuicOptions:
    """The sender's QUIC knobs (the receiver learns the mapping from ``RunParams.transport``).

    ``congestion``: ``newreno`` or ``cubic``. ``deadline_s``: quic-frame-streams: reset a
    frame's stream that is not fully acknowledged this long after it was opened; quic-datagram:
    drop a DATAGRAM frame still queued this long after its packet was written (None = never).
    ``streams_per``: ``frame`` or ``gop``. ``max_datagram_bytes``: the largest UDP payload
    QUIC sends (aioquic does no path MTU discovery; 1200 fits every path).
    """
    congestion: str = "newreno"
    deadline_s: float | None = None
    streams_per: str = "frame"
    max_datagram_bytes: int = DEFAULT_MAX_DATAGRAM_BYTES

    def __post_init__(self):
        if self.congestion == "bbr":
            raise ParameterError("congestion: aioquic has no BBR; QUIC takes newreno or cubic")
        if self.congestion not in CONGESTION_CONTROLS:
            raise ParameterError(f"congestion: {self.congestion!r} is not one of "
                                 f"{', '.join(CONGESTION_CONTROLS)} (QUIC)")
        if self.deadline_s is not None and (isinstance(self.deadline_s, bool)
                                            or not isinstance(self.deadline_s, (int, float))
                                            or not math.isfinite(self.deadline_s)
                                            or not 0 < self.deadline_s <= 3600):
            raise ParameterError(f"quic deadline_s: {self.deadline_s!r} must be a number in (0, 3600]")
        if self.streams_per not in STREAMS_PER:
            raise ParameterError(f"streams_per: {self.streams_per!r} is not one of {', '.join(STREAMS_PER)}")
        if isinstance(self.max_datagram_bytes, bool) or not isinstance(self.max_datagram_bytes, int) \
                or not 1200 <= self.max_datagram_bytes <= 65527:
            raise ParameterError(f"max_datagram_bytes: {self.max_datagram_bytes!r} must be an "
                                 "integer in [1200, 65527] (RFC 9000 §14)")

    @property
    def datagram_payload_bytes(self) -> int:
        """The largest RTP packet one DATAGRAM frame carries."""
        return self.max_datagram_bytes - DATAGRAM_OVERHEAD_BYTES

    def to_dict(self) -> dict:
        return asdict(self)


def client_configuration(opts: QuicOptions, transport: str):
    """aioquic's configuration of the sending end (the QUIC client). The server's certificate
    is not checked against a CA (it is self-signed, made per run): the sender pins it by the
    SHA-256 the receiver sent over the control connection (:mod:`.quic_tls`)."""
    import ssl

    from aioquic.quic.configuration import QuicConfiguration

    return QuicConfiguration(
        is_client=True, alpn_protocols=[ALPN], verify_mode=ssl.CERT_NONE,
        congestion_control_algorithm=CONGESTION_CONTROLS[opts.congestion],
        max_datagram_size=opts.max_datagram_bytes, max_data=FLOW_CONTROL_WINDOW_BYTES,
        max_stream_data=FLOW_CONTROL_WINDOW_BYTES, idle_timeout=60.0,
        max_datagram_frame_size=65535 if transport == "quic-datagram" else None)


def server_configuration(transport: str, cert_path: str, key_path: str,
                         window_bytes: int = FLOW_CONTROL_WINDOW_BYTES):
    """aioquic's configuration of the receiving end (the QUIC server), with the run's
    certificate and key (:func:`tcpdelay.transport.quic_tls.make_certificate`) and its initial
    flow-control windows (``window_bytes``, per connection and per stream; the receiver keeps
    them fixed, :mod:`.quic_receiver`)."""
    from aioquic.quic.configuration import QuicConfiguration

    cfg = QuicConfiguration(
        is_client=False, alpn_protocols=[ALPN], max_datagram_size=DEFAULT_MAX_DATAGRAM_BYTES,
        max_data=window_bytes, max_stream_data=window_bytes,
        idle_timeout=60.0, max_datagram_frame_size=65535 if transport == "quic-datagram" else None)
    cfg.load_cert_chain(cert_path, key_path)
    return cfg

"""The receiving end of one QUIC media run (the QUIC server), driven by the receiver's loop.

The receiver listens on one address: TCP for control and TCP media, UDP on the same port for
UDP media *and* QUIC (:mod:`.receiver`). A run's hello names its transport, so while a QUIC run
is being served, the datagrams on that UDP socket from the sender's address are QUIC packets
of this run's connection (one run at a time, as for UDP media): no QUIC connection-id routing
between runs is needed, and QUIC packets never reach a UDP run nor the reverse. The first
datagram must be a long-header Initial (RFC 9000 §17.2.2); its destination connection id
creates the server connection (aioquic's ``QuicConnection``). A first packet of a QUIC version
aioquic does not speak is answered with Version Negotiation (RFC 9000 §6) and noted
(``versions_refused``); the peer's handshake then fails with that reason.

Media is read as aioquic hands it over (events of :meth:`QuicMedia.poll`):

- stream mappings: each stream's bytes through its own RFC 4571 :class:`FrameParser`; a stream
  ending inside a message is "truncated"; a stream reset by the sender (RESET_STREAM: its
  deadline passed) ends its parser, and a message cut by it is counted in ``reset_partial_packets``
  (the packets whose bytes never came are simply not in "received": lost or late).
- quic-datagram: each DATAGRAM frame is one RTP packet (split-N pieces are reassembled by the
  receiver as UDP's).

Bounded (docs/transport.md "Security"): aioquic doubles its flow-control windows as data comes
(a peer's four stream frames at high offsets once took 480 MB); the receiver's connection keeps
them fixed instead (:class:`_BoundedConnection`): a stream's credit ends ``window_bytes`` past
what it has delivered, the connection's ``window_bytes`` past what all its streams delivered,
so what aioquic buffers for one connection (out-of-order stream data) stays below about
``window_bytes``, plus its crypto buffers (512 KiB per epoch, aioquic's own bound). An
exception aioquic raises on a packet (a forged Initial once made ``datagrams_to_send`` raise
IndexError) discards a connection whose handshake has not completed (the packet was not the
sender's: its real Initial may still come) and fails the run otherwise; it never ends the
receiver. Likewise an Initial from another port of the sender's address replaces a connection
that has never answered (its first Initial was unreadable: forged or garbage).

Unlike TCP's receiver, a QUIC server sends: ACKs, flow-control credit and the handshake. QUIC's
own anti-amplification limit (RFC 9000 §8.1: at most three times what it received before the
address is validated) bounds what it sends to an unvalidated address.
"""

from __future__ import annotations

import socket

from tcpdelay.transport import clock
from tcpdelay.transport.framing import FrameParser, FramingError, decode
from tcpdelay.transport.quic_config import FLOW_CONTROL_WINDOW_BYTES, server_configuration
from tcpdelay.transport.quic_tls import RunCertificate


_BOUNDED = None


def _bounded_connection_class():
    """aioquic's QuicConnection with fixed flow-control windows (made on first use: aioquic is
    imported only by QUIC runs)."""
    global _BOUNDED
    if _BOUNDED is not None:
        return _BOUNDED
    from aioquic.quic.connection import QuicConnection

    class _BoundedConnection(QuicConnection):
        window_bytes = FLOW_CONTROL_WINDOW_BYTES
        consumed_bytes = 0          # stream bytes delivered to the receiver (QuicMedia counts)

        def _write_connection_limits(self, builder, space) -> None:
            limit = self._local_max_data
            limit.value = max(limit.value, self.consumed_bytes + self.window_bytes)
            used, limit.used = limit.used, 0        # aioquic doubles the window past half used
            try:
                super()._write_connection_limits(builder, space)
            finally:
                limit.used = used

        def _write_stream_limits(self, builder, space, stream) -> None:
            rcv = stream.receiver
            if stream.max_stream_data_local:
                stream.max_stream_data_local = max(stream.max_stream_data_local,
                                                   rcv.starting_offset() + self.window_bytes)
            highest, rcv.highest_offset = rcv.highest_offset, 0     # likewise per stream
            try:
                super()._write_stream_limits(builder, space, stream)
            finally:
                rcv.highest_offset = highest

    _BOUNDED = _BoundedConnection
    return _BOUNDED


class QuicMedia:
    """One run's QUIC server connection over the receiver's UDP socket."""

    def __init__(self, transport: str, cert: RunCertificate, udp: socket.socket,
                 max_message_bytes: int, flow_id: int, *, window_bytes: int = FLOW_CONTROL_WINDOW_BYTES):
        self.transport, self.cert, self.udp = transport, cert, udp
        self.max_message_bytes, self.flow_id = max_message_bytes, flow_id
        self.window_bytes = window_bytes
        self.config = server_configuration(transport, cert.cert_path, cert.key_path, window_bytes)
        self.conn = None
        self.addr = None
        self.parsers: dict[int, FrameParser] = {}
        self.terminated: str | None = None
        self.stats = {"cert_sha256": cert.sha256, "handshake_completed": False, "streams": 0,
                      "streams_finished": 0, "streams_reset": 0, "reset_partial_packets": 0,
                      "datagram_frames": 0, "wire_bytes_out": 0, "versions_refused": [],
                      "connections_discarded": 0, "discard_reason": None}

    @staticmethod
    def now() -> float:
        return clock.now_ns() / 1e9

    def receive(self, data: bytes, addr) -> bool:
        """Feed a datagram from the sender's address; False if it is not a QUIC packet of
        this run (no connection yet and not an Initial)."""
        from aioquic.buffer import Buffer
        from aioquic.quic.packet import QuicPacketType, encode_quic_version_negotiation, pull_quic_header

        if self.conn is not None and addr != self.addr and self.stats["wire_bytes_out"] == 0 \
                and not self.stats["handshake_completed"] and len(data) >= 1200 and data[0] & 0xF0 == 0xC0:
            # An Initial from another port while the connection has never answered: the first
            # Initial was not one aioquic could read (forged, or garbage), so it cannot have been
            # the sender's; the new one may be.
            self.stats["connections_discarded"] += 1
            self.stats["discard_reason"] = f"an Initial from port {addr[1]} replaced one never answered"
            self.conn = self.addr = None
            self.parsers.clear()
        if self.conn is None:
            try:
                header = pull_quic_header(Buffer(data=data), host_cid_length=self.config.connection_id_length)
            except ValueError:
                return False
            if header.version is not None and header.packet_type != QuicPacketType.VERSION_NEGOTIATION \
                    and header.version not in self.config.supported_versions:
                # RFC 9000 §6.1: answer a first packet of a version we lack (at least 1200
                # bytes, so the answer amplifies nothing) with the versions we speak.
                if len(data) >= 1200:
                    try:
                        self.udp.sendto(encode_quic_version_negotiation(
                            source_cid=header.destination_cid, destination_cid=header.source_cid,
                            supported_versions=self.config.supported_versions), addr)
                    except OSError:
                        pass
                if header.version not in self.stats["versions_refused"]:
                    self.stats["versions_refused"].append(header.version)
                return False
            if header.packet_type != QuicPacketType.INITIAL or len(data) < 1200:
                return False      # RFC 9000 §14.1: an Initial comes in a datagram of 1200 B or more
            self.conn = _bounded_connection_class()(
                configuration=self.config, original_destination_connection_id=header.destination_cid)
            self.conn.window_bytes = self.window_bytes
            self.addr = addr
        elif addr != self.addr:
            return False          # another port of the sender's host: not this connection
        try:
            self.conn.receive_datagram(data, addr, now=self.now())
        except Exception as err:  # noqa: BLE001 - aioquic on a packet it did not expect
            return self._discard_or_raise(err)
        return True

    def _discard_or_raise(self, err: Exception) -> bool:
        """aioquic raised on what a peer sent: before the handshake completed, the connection
        was not (yet) the sender's: forget it and wait for the real Initial (False); after, the
        run's connection is broken: raise."""
        if self.stats["handshake_completed"] or (self.conn is not None and self.conn._handshake_complete):
            raise err
        self.stats["connections_discarded"] += 1
        self.stats["discard_reason"] = f"{type(err).__name__}: {str(err)[:120]}"
        self.conn = None
        self.addr = None
        self.parsers.clear()
        return False

    def timer_s(self) -> float | None:
        """Seconds until aioquic's timer (None: none armed)."""
        if self.conn is None:
            return None
        t = self.conn.get_timer()
        return None if t is None else max(0.0, t - self.now())

    def service(self) -> None:
        """Run aioquic's timer if due and send what it has to send."""
        if self.conn is None:
            return
        t = self.conn.get_timer()
        if t is not None and t <= self.now():
            try:
                self.conn.handle_timer(now=self.now())
            except Exception as err:  # noqa: BLE001
                self._discard_or_raise(err)
        self.flush()

    def flush(self) -> None:
        if self.conn is None:
            return
        try:
            datagrams = self.conn.datagrams_to_send(now=self.now())
        except Exception as err:  # noqa: BLE001 - aioquic on a forged Initial (IndexError)
            self._discard_or_raise(err)
            return
        for data, addr in datagrams:
            try:
                self.stats["wire_bytes_out"] += self.udp.sendto(data, addr)
            except (BlockingIOError, InterruptedError, OSError):
                pass

    def poll(self) -> list[tuple]:
        """What aioquic has delivered since: ``("piece", piece)`` per RTP packet read, and
        ``("fail", status, reason)`` when the media is not the flow's packets."""
        from aioquic.quic.events import (ConnectionTerminated, DatagramFrameReceived, HandshakeCompleted,
                                         StreamDataReceived, StreamReset)

        out: list[tuple] = []
        if self.conn is None:
            return out
        while (ev := self.conn.next_event()) is not None:
            if isinstance(ev, StreamDataReceived):
                self._stream_data(ev.stream_id, ev.data, ev.end_stream, out)
            elif isinstance(ev, DatagramFrameReceived):
                self.stats["datagram_frames"] += 1
                try:
                    out.append(("piece", decode(ev.data, self.flow_id)))
                except FramingError as err:
                    out.append(("fail", "corrupted", f"DATAGRAM frame: {err}"))
            elif isinstance(ev, StreamReset):
                parser = self.parsers.pop(ev.stream_id, None)
                self.stats["streams_reset"] += 1
                if parser is not None and parser.buffered_bytes:
                    self.stats["reset_partial_packets"] += 1
            elif isinstance(ev, HandshakeCompleted):
                self.stats["handshake_completed"] = True
            elif isinstance(ev, ConnectionTerminated) and self.terminated is None:
                self.terminated = (f"QUIC connection closed (error {ev.error_code:#x}"
                                   + (f": {ev.reason_phrase}" if ev.reason_phrase else "") + ")")
        return out

    def _stream_data(self, sid: int, data: bytes, end: bool, out: list) -> None:
        if data:
            self.conn.consumed_bytes += len(data)      # credit for the window (fixed size)
        parser = self.parsers.get(sid)
        if parser is None:
            if not data and not end:
                return
            parser = self.parsers[sid] = FrameParser(self.max_message_bytes, flow_id=self.flow_id)
            self.stats["streams"] += 1
        try:
            if data:
                out.extend(("piece", piece) for piece in parser.feed(data))
            if end:
                del self.parsers[sid]
                self.stats["streams_finished"] += 1
                parser.finish()
        except FramingError as err:
            out.extend(("piece", piece) for piece in err.before)
            status = "truncated" if "truncated" in str(err) else "corrupted"
            out.append(("fail", status, f"QUIC stream {sid}: {err}"))

    def close(self) -> None:
        """CONNECTION_CLOSE (NO_ERROR) if the connection is open, and forget the run's key."""
        if self.conn is not None and self.terminated is None:
            try:
                self.conn.close(error_code=0)
                self.flush()
            except Exception:   # noqa: BLE001 - aioquic already closed it
                pass
        self.cert.remove()

"""The media sender over QUIC: :func:`run_quic_sender`, what :func:`tcpdelay.transport.run_sender`
runs for the ``quic-*`` transports (the mappings: :mod:`.quic_config`).

The run is the TCP/UDP sender's (:mod:`.sender`): the same control exchange, the same "sent"
records written as each packet is handed over, the same "end"/summary and statuses. What
differs is the media connection: one QUIC connection (aioquic's sans-I/O ``QuicConnection``)
over a UDP socket connected to the receiver's listening address, driven by this module's
single-threaded loop (``selectors``): it reads the socket, runs aioquic's timers (loss
detection, PTO, ACK delay; RFC 9002 §6), and writes what aioquic has to send, as soon as it can.

1. Control: hello; the receiver's accept carries, for QUIC, the SHA-256 of the certificate it
   made for this run (:mod:`.quic_tls`).
2. The QUIC handshake (RFC 9000 §7, TLS 1.3 per RFC 9001, ALPN ``tcpdelay-media/1``); the
   server's certificate must have that SHA-256, or the run does not start. The handshake is
   done before the source starts, as TCP's connections are set up before it.
3. Every source packet at its time: "sent" record, then its RTP packet(s) to aioquic
   (a stream write or a DATAGRAM frame); stream deadlines of quic-frame-streams are enforced.
4. After the last packet: FIN on the open streams and wait (``drain_timeout_s``) until every
   stream's data is acknowledged (or reset) and no DATAGRAM frame waits; then "end", the
   receiver's summary, and CONNECTION_CLOSE (RFC 9000 §10.2).

The transport's state is sampled every ``tcp_state_period_s`` into ``quic_state`` records
(:mod:`.quic_state`).
"""

from __future__ import annotations

import collections
import math
import re
import select
import selectors
import socket
import time

from tcpdelay import timing
from tcpdelay.records import RecordWriter
from tcpdelay.transport import clock, control, framing
from tcpdelay.transport.quic_config import DEADLINE_ERROR_CODE, client_configuration
from tcpdelay.transport.quic_state import QuicStateSampler, instrument
from tcpdelay.transport.quic_tls import fingerprint
from tcpdelay.transport.runmeta import update_run_metadata
from tcpdelay.transport.lateness import LatenessHistogram
from tcpdelay.transport.sender import (SenderError, SenderResult, _connect_control, _LoopSettings,
                                       _offer_run, _prepare_run, _SendRun)
from tcpdelay.transport.sockopts import apply_buffers

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_DRAIN_POLL_NS = 20_000_000
_PROGRESS_EVERY_S = 0.5
_UDP_BATCH = 256


class QuicLink:
    """One QUIC connection over a connected UDP socket: aioquic's ``QuicConnection`` and the
    I/O it asks for (read datagrams in, write datagrams out, run its timer)."""

    def __init__(self, sock: socket.socket, conn, peer):
        self.sock, self.conn, self.peer = sock, conn, peer
        self.wire_bytes = 0
        self.terminated: str | None = None     # why the connection ended, once it has

    @staticmethod
    def now() -> float:
        return clock.now_ns() / 1e9

    def flush(self) -> None:
        """Write what aioquic has to send now (a full socket buffer drops the rest: QUIC
        recovers it as a loss, as from a full router queue)."""
        for data, _ in self.conn.datagrams_to_send(now=self.now()):
            try:
                self.wire_bytes += self.sock.send(data)
            except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                pass

    def read(self) -> None:
        """Feed every datagram waiting on the socket to aioquic."""
        for _ in range(_UDP_BATCH):
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionRefusedError:   # ICMP port unreachable: the receiver is gone
                continue
            self.conn.receive_datagram(data, self.peer, now=self.now())

    def timer_ns(self) -> int | None:
        t = self.conn.get_timer()
        return None if t is None else int(t * 1e9)

    def run_timer(self) -> None:
        t = self.conn.get_timer()
        if t is not None and t * 1e9 <= clock.now_ns():
            self.conn.handle_timer(now=self.now())

    def events(self) -> list:
        from aioquic.quic.events import ConnectionTerminated

        out = []
        while (ev := self.conn.next_event()) is not None:
            if isinstance(ev, ConnectionTerminated) and self.terminated is None:
                self.terminated = (f"QUIC connection closed (error {ev.error_code:#x}"
                                   + (f": {ev.reason_phrase}" if ev.reason_phrase else "") + ")")
            out.append(ev)
        return out

    def handshake(self, deadline: float, cert_sha256: str) -> None:
        """Connect and wait for the handshake; the server's certificate must be the pinned one."""
        from aioquic.quic.events import HandshakeCompleted

        self.conn.connect(self.peer, now=self.now())
        self.flush()
        while True:
            for ev in self.events():
                if isinstance(ev, HandshakeCompleted):
                    cert = self.conn.tls._peer_certificate
                    got = fingerprint(cert) if cert is not None else "none"
                    if got != cert_sha256:
                        raise SenderError(f"the QUIC server's certificate (SHA-256 {got[:16]}…) is not "
                                          "the one the receiver announced for this run")
                    return
            if self.terminated:
                raise SenderError(f"QUIC handshake with {self.peer[0]}:{self.peer[1]} failed: "
                                  f"{self.terminated}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise SenderError(f"no QUIC handshake with {self.peer[0]}:{self.peer[1]} in time")
            t = self.timer_ns()
            wait = left if t is None else min(left, max(0.0, (t - clock.now_ns()) / 1e9))
            if select.select([self.sock], [], [], wait)[0]:
                self.read()
            self.run_timer()
            self.flush()

    def close(self) -> None:
        """CONNECTION_CLOSE (NO_ERROR), sent once."""
        try:
            self.conn.close(error_code=0)
            self.flush()
        except Exception:   # noqa: BLE001 - closing a connection aioquic already ended
            pass


def run_quic_sender(config, source, *, stop=None, on_progress=None) -> SenderResult:
    """:func:`tcpdelay.transport.run_sender` for the QUIC transports (same contract)."""
    timing.drop_timer_slack()
    cfg = config
    rp, run_id, run_dir = _prepare_run(cfg, source)
    interval_s = float(getattr(source, "nominal_interval_s", 0.02))
    deadline = time.monotonic() + cfg.connect_timeout_s

    ctl = _connect_control(cfg, deadline)
    sock = None
    link: QuicLink | None = None
    writer = state_writer = None
    meta = None
    result = SenderResult(run_id=run_id, run_dir=str(run_dir) if run_dir else None,
                          status="completed", clock=clock.UNSYNCHRONIZED, transport=rp.transport,
                          connections=1, scheduler=cfg.scheduler, split=rp.split,
                          source=rp.source, duration_s=rp.duration_s)
    try:
        reply = _offer_run(ctl, cfg, rp, run_id, deadline)
        if not isinstance(reply.get("token"), str):
            raise SenderError("receiver's accept carries no valid token")
        cert_sha256 = reply.get("cert_sha256")
        if not isinstance(cert_sha256, str) or not _SHA256.match(cert_sha256):
            raise SenderError("the receiver's accept carries no certificate fingerprint: it does "
                              f"not speak {rp.transport}")
        result.clock = reply.get("clock") if reply.get("clock") in (clock.SHARED, clock.UNSYNCHRONIZED) \
            else clock.UNSYNCHRONIZED
        peer = ctl.getpeername()[:2]

        from aioquic.quic.connection import QuicConnection

        sock = socket.socket(socket.AF_INET6 if ":" in peer[0] else socket.AF_INET, socket.SOCK_DGRAM)
        apply_buffers(sock, cfg.tcp)
        sock.connect(peer)
        sock.setblocking(False)
        conn = QuicConnection(configuration=client_configuration(cfg.quic, rp.transport))
        counters = instrument(conn)
        link = QuicLink(sock, conn, peer)
        link.handshake(deadline + 5.0, cert_sha256)
        result.per_connection_packets = [0]
        result.quic = {"options": cfg.quic.to_dict(), "cert_sha256": cert_sha256,
                       "alpn": conn.tls.alpn_negotiated, "streams_opened": 0, "streams_reset": 0,
                       "deadline_dropped_packets": 0, "deadline_dropped_datagrams": 0, "datagram_frames": 0,
                       "lost_packets": 0, "ptos": 0}

        common = {"clock": result.clock, "clock_source": clock.CLOCK_NAME, "run_id": run_id}
        meta = {"params": rp.to_dict(), "scheduler": cfg.scheduler, "tcp": cfg.tcp.to_dict(),
                "quic": cfg.quic.to_dict(), "seed": cfg.seed,
                "receiver": f"{cfg.to_host}:{cfg.to_port}", "status": "running"}
        sampler = None
        if run_dir is not None:
            update_run_metadata(run_dir, common, "sender", meta)
            writer = RecordWriter(run_dir, "sent", writer_id=f"sender-{run_id}")
            if cfg.tcp_state_period_s > 0:
                state_writer = RecordWriter(run_dir, "quic_state", writer_id=f"sender-{run_id}")
                sampler = QuicStateSampler(state_writer, cfg.tcp_state_period_s, conn, counters,
                                           rp.flow_id)
        run = _QuicSendRun(_LoopSettings(cfg, rp, interval_s, stop, on_progress), source, link,
                           ctl, writer, result, sampler)
        try:
            run.run()
        finally:
            result.quic.update(lost_packets=counters.lost_packets, ptos=counters.ptos)
    except KeyboardInterrupt:
        result.status = "interrupted"
    finally:
        if link is not None:
            link.close()
        for w in (writer, state_writer):
            if w is not None:
                w.close()
        if sock is not None:
            sock.close()
        ctl.close()
        if run_dir is not None and writer is not None:
            meta.update(status=result.status, result=result.to_dict())
            update_run_metadata(run_dir, common, "sender", meta)
    return result


class _QuicSendRun(_SendRun):
    """Steps 3-4 of the module docstring; the control side (reading the receiver's abort,
    "end" and the summary) is the TCP/UDP sender's (:class:`~tcpdelay.transport.sender._SendRun`)."""

    def __init__(self, settings: _LoopSettings, source, link: QuicLink, ctl, writer, result, sampler):
        self.settings, self.source, self.link, self.ctl = settings, source, link, ctl
        self.writer, self.result, self.qsampler = writer, result, sampler
        self.conns = []                  # no TCP connections: the base class's TCP steps are no-ops
        self.reader = control.ControlReader()
        self.conn = link.conn
        self.mapping = settings.params.transport
        self.opts = settings.cfg.quic
        self.deadline_ns = None if self.opts.deadline_s is None else int(self.opts.deadline_s * 1e9)
        self.open_streams: dict[int, int] = {}   # frame streams not yet finished: id -> opened (ns)
        self.cur_sid: int | None = None          # the stream of the current frame / group
        self.cur_key = None
        self.cur_reset = False
        self.rtp_seq = 0
        self.seq = 0
        # quic-datagram with a deadline: when each DATAGRAM frame still in aioquic's queue was
        # handed to it (ns), oldest first as the queue is (aioquic sends it first in, first out)
        self.datagram_queued_ns: collections.deque[int] = collections.deque()

    # -- streams ------------------------------------------------------------------------------

    def _stream_done(self, sid: int) -> bool:
        st = self.conn._streams.get(sid)
        return st is None or st.sender.is_finished

    def _frame_stream(self, p, now: int) -> int | None:
        """The stream of packet ``p`` (quic-frame-streams): its frame's or group's, opened at its
        first packet; None when that stream was reset at its deadline."""
        fid = int(p.frame_id)
        if self.opts.streams_per == "gop":    # a group starts at the first packet of an I frame
            new = self.cur_sid is None or (str(p.frame_type) == "I" and fid != self.cur_key)
            key = fid
        else:                                  # a frameless packet (VoIP) is a frame of its own
            key = fid if fid >= 0 else ("packet", self.seq)
            new = key != self.cur_key
        self.cur_key = key
        if not new:
            return None if self.cur_reset else self.cur_sid
        if self.cur_sid is not None and not self.cur_reset and self.opts.streams_per == "gop":
            self.conn.send_stream_data(self.cur_sid, b"", end_stream=True)   # the group is over
        sid = self.conn.get_next_available_stream_id(is_unidirectional=True)
        self.cur_sid, self.cur_reset = sid, False
        self.open_streams[sid] = now
        self.result.quic["streams_opened"] += 1
        return sid

    def _deadlines(self, now: int) -> int | None:
        """Reset the frame streams past their deadline; when the next one falls due (ns)."""
        nxt = None
        for sid, opened in list(self.open_streams.items()):
            if self._stream_done(sid):
                del self.open_streams[sid]
                continue
            if self.deadline_ns is None:
                continue
            if now - opened >= self.deadline_ns:
                self.conn.reset_stream(sid, DEADLINE_ERROR_CODE)
                self.result.quic["streams_reset"] += 1
                del self.open_streams[sid]
                if sid == self.cur_sid:
                    self.cur_reset = True
            elif nxt is None or opened + self.deadline_ns < nxt:
                nxt = opened + self.deadline_ns
        return nxt

    def _datagram_deadlines(self, now: int) -> int | None:
        """Drop the DATAGRAM frames queued longer than the deadline (never sent: RFC 9221 §5.4
        lets a sender drop what congestion control holds); when the next one falls due (ns)."""
        pending, queued = self.conn._datagrams_pending, self.datagram_queued_ns
        while len(queued) > len(pending):      # the oldest were sent since
            queued.popleft()
        while queued and now - queued[0] >= self.deadline_ns:
            queued.popleft()
            pending.popleft()
            self.result.quic["deadline_dropped_datagrams"] += 1
        return queued[0] + self.deadline_ns if queued else None

    def _queued_bytes(self) -> int:
        """Media bytes aioquic holds that are not yet acknowledged (streams) or sent (datagrams)."""
        if self.mapping == "quic-datagram":
            return sum(len(d) for d in self.conn._datagrams_pending)
        sids = [0] if self.mapping == "quic-stream" else list(self.open_streams)
        total = 0
        for sid in sids:
            st = self.conn._streams.get(sid)
            if st is not None:
                total += len(st.sender._buffer)
        return total

    def _drained(self) -> bool:
        if self.mapping == "quic-datagram":
            return not self.conn._datagrams_pending
        if self.mapping == "quic-stream":
            return self._stream_done(0)
        return all(self._stream_done(s) for s in self.open_streams)

    # -- packets ------------------------------------------------------------------------------

    def _emit(self, p, now: int) -> None:
        cfg, rp, result, writer = self.settings.cfg, self.settings.params, self.result, self.writer
        size = int(p.size_bytes)
        sid = 0
        dropped = False
        if self.mapping == "quic-frame-streams":
            sid = self._frame_stream(p, now)
            if sid is None:
                dropped = True
                result.quic["deadline_dropped_packets"] += 1
        if not dropped and self._queued_bytes() + size > cfg.max_queue_bytes:
            dropped = True
            result.queue_full_packets += 1
        row = dict(flow_id=rp.flow_id, connection=-1 if dropped else 0, seq=self.seq, size_bytes=size,
                   send_time_s=now / 1e9, frame_id=int(p.frame_id), frame_type=str(p.frame_type),
                   frame_last=bool(p.frame_last), dropped=dropped)
        result.packets += 1
        self.seq += 1
        try:
            if dropped:
                return
            n = rp.split
            if self.mapping == "quic-datagram":
                n = max(n, math.ceil(size / self.opts.datagram_payload_bytes))
            n = max(1, min(n, size // framing.MIN_MEDIA_RTP_BYTES, framing.MAX_PIECES))
            sizes = framing.split_sizes(size, n) if n > 1 else [size]
            ts = int(p.at_s * framing.RTP_CLOCK_HZ)
            for k, s in enumerate(sizes):
                pkt = framing.encode_media(flow_id=rp.flow_id, rtp_seq=self.rtp_seq, rtp_timestamp=ts,
                                           marker=bool(p.frame_last) and k == n - 1, seq=row["seq"],
                                           send_time_ns=now, piece=k, pieces=n, size_bytes=s)
                self.rtp_seq += 1
                if self.mapping == "quic-datagram":
                    self.conn.send_datagram_frame(pkt)
                    if self.deadline_ns is not None:
                        self.datagram_queued_ns.append(now)
                    result.quic["datagram_frames"] += 1
                else:
                    fin = (self.mapping == "quic-frame-streams" and self.opts.streams_per == "frame"
                           and bool(p.frame_last) and k == n - 1)
                    self.conn.send_stream_data(sid, framing.frame(pkt), end_stream=fin)
            result.rtp_packets += n
            result.per_connection_packets[0] += 1
            self.link.flush()
        finally:     # the record is written after the packet is handed to the transport
            if writer is not None:
                writer.append(**row)

    # -- the loop -----------------------------------------------------------------------------

    def _close_media_for_writing(self) -> None:
        """Nothing to do: the streams were finished (FIN) when draining began."""

    def _reset_media(self) -> None:
        """After a drain timeout: reset every stream still open (its data is not delivered
        after the run)."""
        sids = [0] if self.mapping == "quic-stream" else list(self.open_streams)
        for sid in sids:
            if not self._stream_done(sid):
                self.conn.reset_stream(sid, DEADLINE_ERROR_CODE)
        self.link.flush()

    def _start_drain(self) -> None:
        if self.mapping == "quic-stream":
            self.conn.send_stream_data(0, b"", end_stream=True)
        elif self.mapping == "quic-frame-streams" and self.cur_sid is not None and not self.cur_reset \
                and not self._stream_done(self.cur_sid) and self.opts.streams_per == "gop":
            self.conn.send_stream_data(self.cur_sid, b"", end_stream=True)
        self.link.flush()

    def _send(self) -> None:
        cfg, rp, result, link = self.settings.cfg, self.settings.params, self.result, self.link
        stop, on_progress = self.settings.stop, self.settings.on_progress
        sel = selectors.DefaultSelector()
        self.ctl.setblocking(False)
        sel.register(self.ctl, selectors.EVENT_READ, None)
        sel.register(link.sock, selectors.EVENT_READ, "quic")
        if self.mapping == "quic-stream":     # open stream 0 now, so its id is the first
            self.conn.send_stream_data(0, b"")
        packets = iter(self.source.packets(rp.duration_s, cfg.seed))
        nxt = next(packets, None)
        t0 = clock.now_ns()
        late = LatenessHistogram()      # send instant - scheduled instant (SenderResult.send_lateness_us)
        next_progress = t0
        state = "sending"
        drain_deadline = None
        try:
            while True:
                now = clock.now_ns()
                if stop is not None and stop.is_set():
                    result.status = "interrupted"
                    break
                while nxt is not None and (due_ns := t0 + int(nxt.at_s * 1e9)) <= now:
                    late.add_ns(now - due_ns)
                    self._emit(nxt, now)
                    nxt = next(packets, None)
                wake = [] if nxt is None else [t0 + int(nxt.at_s * 1e9)]
                if self.mapping == "quic-frame-streams":
                    due = self._deadlines(now)
                    if due is not None:
                        wake.append(due)
                elif self.mapping == "quic-datagram" and self.deadline_ns is not None:
                    link.flush()        # what the window lets out now goes before any is dropped
                    due = self._datagram_deadlines(now)
                    if due is not None:
                        wake.append(due)
                if state == "sending" and nxt is None:
                    state = "draining"
                    drain_deadline = now + int(cfg.drain_timeout_s * 1e9)
                    self._start_drain()
                link.run_timer()
                link.events()
                link.flush()
                if link.terminated:
                    result.status = "connection-lost"
                    result.error = link.terminated
                    break
                if state == "draining":
                    if self._drained():
                        break
                    if now >= drain_deadline:
                        result.status = "drain-timeout"
                        break
                    wake.append(min(drain_deadline, now + _DRAIN_POLL_NS))
                t = link.timer_ns()
                if t is not None:
                    wake.append(t)
                if on_progress is not None and now >= next_progress:
                    on_progress({"elapsed_s": (now - t0) / 1e9, "duration_s": rp.duration_s,
                                 "packets": result.packets, "queued_bytes": self._queued_bytes()})
                    next_progress = now + int(_PROGRESS_EVERY_S * 1e9)
                    wake.append(next_progress)
                if self.qsampler is not None:
                    self.qsampler.sample(now)
                    wake.append(self.qsampler.due_ns())
                if stop is not None:
                    wake.append(now + 100_000_000)
                timeout = max(0.0, (min(wake) - clock.now_ns()) / 1e9) if wake else 1.0
                for key, _ in sel.select(timeout):
                    if key.data is None:
                        if not self._read_ctl():
                            return
                    else:
                        link.read()
        finally:
            result.elapsed_s = (clock.now_ns() - t0) / 1e9
            result.queued_bytes_at_end = self._queued_bytes()
            result.send_lateness_us = late.summary()
            result.wire_bytes = link.wire_bytes
            sel.close()
        if result.status not in ("completed", "drain-timeout"):
            return
        self._end()
        link.flush()

"""The media sender: a source's packets over TCP (RFC 4571) or UDP (RTP), as they are due.

:func:`run_sender` is one single-threaded event loop (``selectors``) over non-blocking sockets:

1. Control: connect to the receiver (retrying while it is not yet listening), send the hello
   with the run's parameters, read the accept (:mod:`tcpdelay.transport.control`).
2. Media connections: N TCP connections (each opening with the run's token) or one connected
   UDP socket, with the knobs of :class:`~tcpdelay.transport.sockopts.TcpOptions`.
3. Every source packet, at its time: it enters the application queue *now* (this instant is its
   send time, carried in its header and in the "sent" record); the scheduler picks its
   connection; with proactive drop it may be skipped; it is split into N pieces with split-N;
   the pieces are appended to that connection's application queue, which is written to the
   socket as far as the socket takes it without blocking. The rest waits for the socket to
   become writable, so the application never stalls on a full socket (Brosh et al., "The
   Delay-Friendliness of TCP for Real-Time Traffic", §8.1).
4. Keep-alive (Brosh et al., §8.2, "Idle periods"): while the source is silent (no packet for more
   than 1.5 packet intervals), every connection whose queue is empty gets a 12-byte keep-alive
   RTP packet every RTT/3 (RTT: TCP's smoothed estimate, ``keepalive_rtt_s`` until there is
   one and always for UDP), but never more often than one per media packet interval (on a
   sub-millisecond path RTT/3 would otherwise mean thousands of packets a second).
5. After the last packet: wait (``drain_timeout_s``) for the application queues to empty and the
   kernel to have sent what it took, close the media connections for writing (TCP delivers what
   is in flight, then FIN), send "end" and read the receiver's summary. If they do not drain in
   time ("drain-timeout"), "end" says so and the connections are reset: what is left is not
   delivered after the run (an overloaded flow ends with its run, as in a simulation).

Anything that goes wrong on the way (the receiver disconnects, a connection resets, a timeout,
SIGINT via ``stop``) ends the run with a ``status`` other than "completed"; the "sent" records
written so far are kept (:class:`~tcpdelay.records.RecordWriter` flushes as it goes).
"""

from __future__ import annotations

import secrets
import selectors
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from tcpdelay import timing
from tcpdelay.start_gate import Instant, StartAt, start_instant
from tcpdelay.errors import ParameterError, TcpdelayError
from tcpdelay.records import RecordWriter
from tcpdelay.transport import clock, control, framing
from tcpdelay.transport.config import RunParams, SenderConfig
from tcpdelay.transport.lateness import LatenessHistogram
from tcpdelay.transport.runmeta import update_run_metadata
from tcpdelay.transport.scheduler import CA_OPEN, ConnectionView, make_scheduler
from tcpdelay.transport.sockopts import apply_buffers, apply_congestion, apply_tcp, read_back
from tcpdelay.transport.cc_state import CcStateMap
from tcpdelay.transport import netstat
from tcpdelay.transport.tcp_state import tcp_info_raw, unsent_bytes
from tcpdelay.transport.tcp_state_sampler import TcpStateSampler

_BLOCKED = (BlockingIOError, InterruptedError)
_SILENCE_FACTOR = 1.5
_PROGRESS_EVERY_S = 0.5
#: While draining, how often the kernel's unsent bytes are looked at (ns).
_DRAIN_POLL_NS = 20_000_000


class SenderError(TcpdelayError):
    """The run could not start (receiver unreachable, refused the run, bad token)."""


@dataclass
class SenderResult:
    """What :func:`run_sender` returns (picklable; ``to_dict`` for JSON)."""
    run_id: str
    run_dir: str | None
    status: str                 # completed | interrupted | receiver-failed | receiver-disconnected | connection-lost | drain-timeout
    clock: str
    transport: str
    connections: int
    scheduler: str
    split: int
    source: str
    duration_s: float
    elapsed_s: float = 0.0
    packets: int = 0            # produced by the source
    dropped_packets: int = 0    # proactive drop
    queue_full_packets: int = 0  # dropped because the application queue was at max_queue_bytes
    queued_bytes_at_end: int = 0  # left in the application queues when the run ended
    keepalive_packets: int = 0
    rtp_packets: int = 0        # media RTP packets written (pieces count one each)
    wire_bytes: int = 0         # bytes handed to the sockets (RFC 4571 prefixes included)
    per_connection_packets: list[int] = field(default_factory=list)
    socket_options: list[dict] = field(default_factory=list)
    tcp_info_end: list[dict] = field(default_factory=list)
    tcp_counters: dict = field(default_factory=dict)
    """The sender namespace's loss-recovery counters over the run (TLPs, fast recoveries, RTOs;
    :mod:`tcpdelay.transport.netstat`): the connection's own where it has the namespace alone."""
    receiver: dict | None = None
    error: str | None = None
    quic: dict | None = None
    """QUIC transports: the options, the pinned certificate's SHA-256, streams opened and reset,
    packets skipped past a stream's deadline, DATAGRAM frames, lost packets and PTOs."""
    send_lateness_us: dict | None = None
    """How late the media packets went against the source's schedule: each packet's send
    instant (its record's ``send_time_s``) minus its scheduled one, ``{"p99", "max", "count"}``
    in µs (:class:`tcpdelay.transport.lateness.LatenessHistogram`); the testbed's own error."""

    def to_dict(self) -> dict:
        return asdict(self)


class _Conn:
    """One media connection: its socket and its application queue."""

    __slots__ = ("index", "sock", "tcp", "out", "dgrams", "dgram_bytes", "last_tx", "packets")

    def __init__(self, index: int, sock: socket.socket, tcp: bool):
        self.index = index
        self.sock = sock
        self.tcp = tcp
        self.out = bytearray()          # TCP: framed bytes not yet taken by the socket
        self.dgrams: deque = deque()    # UDP: datagrams not yet taken by the socket
        self.dgram_bytes = 0
        self.last_tx = 0                # ns of the last write (media or keep-alive)
        self.packets = 0

    def queued_bytes(self) -> int:
        return len(self.out) if self.tcp else self.dgram_bytes

    def idle(self) -> bool:
        return not self.out and not self.dgrams

    def drained(self) -> bool:
        """Nothing left to put on the wire: the application queue is empty and (TCP) the kernel
        has sent everything it took (``SIOCOUTQNSD`` = 0; what is in flight is the path's)."""
        if not self.idle():
            return False
        if not self.tcp:
            return True
        try:
            return unsent_bytes(self.sock) == 0
        except OSError:
            return True

    def enqueue(self, rtp: bytes) -> None:
        """Append one RTP packet to the application queue (TCP: framed per RFC 4571)."""
        if self.tcp:
            self.out += framing.frame(rtp)
        else:
            self.dgrams.append(rtp)
            self.dgram_bytes += len(rtp)


def _connect_control(cfg: SenderConfig, deadline: float) -> socket.socket:
    """Connect, retrying while the receiver is not yet listening (ECONNREFUSED)."""
    last = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SenderError(f"cannot reach the receiver at {cfg.to_host}:{cfg.to_port} within "
                              f"{cfg.connect_timeout_s:g} s ({last or 'timed out'})")
        try:
            return socket.create_connection((cfg.to_host, cfg.to_port), timeout=left)
        except (ConnectionRefusedError, socket.timeout, OSError) as err:
            last = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            if isinstance(err, socket.gaierror):
                raise ParameterError(f"to: cannot resolve {cfg.to_host!r}: {last}") from None
            time.sleep(min(0.05, max(0.0, left)))


def _open_tcp(cfg: SenderConfig, address, index: int, token: str, deadline: float) -> socket.socket:
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        apply_tcp(sock, cfg.tcp)
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        sock.connect(address)
        apply_congestion(sock, cfg.tcp)
        sock.sendall(control.encode({"type": "data", "token": token, "connection": index}))
        sock.setblocking(False)
        return sock
    except (OSError, socket.timeout) as err:
        sock.close()
        raise SenderError(f"media connection {index} to {address[0]}:{address[1]} failed: "
                          f"{getattr(err, 'strerror', None) or err}") from None
    except BaseException:
        sock.close()
        raise


def _check_out_dir(run_dir: Path) -> None:
    if (run_dir / "sent").exists() and any((run_dir / "sent").glob("part-*.parquet")):
        raise ParameterError(f"out: {run_dir} already holds 'sent' records of another run; "
                             "choose a new directory")


def _prepare_run(cfg: SenderConfig, source) -> tuple[RunParams, str, Path | None]:
    """The run's parameters as the hello sends them (the source's name; a constant-size source's
    packet size as the receiver's bound), its id and its checked output directory."""
    rp = cfg.run
    if not rp.source:
        rp = type(rp)(**{**rp.to_dict(), "source": str(getattr(source, "name", ""))[:64]})
    size = getattr(source, "packet_bytes", None)     # a constant-size source: the receiver's bound
    if isinstance(size, int) and framing.MIN_MEDIA_RTP_BYTES <= size < rp.max_packet_bytes:
        rp = type(rp)(**{**rp.to_dict(), "max_packet_bytes": size})
    run_id = cfg.run_id or f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"
    run_dir = Path(cfg.out_dir) if cfg.out_dir else None
    if run_dir is not None:
        _check_out_dir(run_dir)
    return rp, run_id, run_dir


def _offer_run(ctl: socket.socket, cfg: SenderConfig, rp: RunParams, run_id: str, deadline: float) -> dict:
    """Send the run's hello on the control connection and return the receiver's accept; a
    refusal or no answer is a :class:`SenderError`."""
    hello = {"type": "hello", "protocol": control.PROTOCOL, "version": control.VERSION,
             "run_id": run_id, "boot_id": clock.boot_id(), "params": rp.to_dict()}
    control.send(ctl, hello, pad_to=control.REQUEST_PAD_BYTES)
    try:
        reply, _ = control.recv(ctl, max(0.1, deadline - time.monotonic()) + 5.0)
    except control.ControlError as err:
        raise SenderError(f"the receiver at {cfg.to_host}:{cfg.to_port} did not accept the run: "
                          f"{err}") from None
    if reply.get("type") != "accept":
        raise SenderError(f"receiver refused the run: {reply.get('reason', 'no reason given')}")
    return reply


def wait_until(start_at: Instant, stop: threading.Event | None = None) -> None:
    """Sleep until the ``time.monotonic()`` instant ``start_at`` (None: return at once), or until
    ``stop`` is set. A :class:`tcpdelay.start_gate.StartAt` is resolved first: this program
    reports ready and waits for its run's start to be fixed."""
    if isinstance(start_at, StartAt):
        start_at = start_instant(start_at, stop)
    while start_at is not None and (left := start_at - time.monotonic()) > 0 \
            and not (stop is not None and stop.is_set()):
        time.sleep(min(left, 0.5))


def run_socket_sender(config: SenderConfig, source, *, stop: threading.Event | None = None,
                      on_progress: Callable[[dict], None] | None = None,
                      start_at: Instant = None) -> SenderResult:
    """:func:`tcpdelay.transport.run_sender` for TCP and UDP: send ``source`` (a
    :class:`tcpdelay.traffic.Source`) for ``config.run.duration_s``.

    Raises :class:`SenderError` (or ParameterError) if the run cannot start; once it has
    started, every ending is reported in the result's ``status`` and the records are kept.
    ``stop`` (a threading.Event) ends the run early, as does KeyboardInterrupt. With
    ``start_at`` (a ``time.monotonic()`` instant) the run is offered, accepted and its media
    connections opened first, and the first packet leaves at ``start_at``: eighty UDP flows
    into a 10-Mb/s bottleneck (papers/004 §4.2 on the testbed) lost the later flows' control
    exchange to the earlier flows' load, and the receiver closed the control connection after
    its 10-s handshake limit.
    """
    timing.drop_timer_slack()  # pacing: sleeps end on time (tcpdelay.timing)
    cfg = config
    rp, run_id, run_dir = _prepare_run(cfg, source)
    interval_s = float(getattr(source, "nominal_interval_s", 0.02))
    deadline = time.monotonic() + cfg.connect_timeout_s

    counters_start = netstat.tcp_counters()   # before the control connection's handshake
    # 1. control
    ctl = _connect_control(cfg, deadline)
    conns: list[_Conn] = []
    writer: RecordWriter | None = None
    state_writer: RecordWriter | None = None
    cc_map: CcStateMap | None = None
    sampler: TcpStateSampler | None = None
    result = SenderResult(run_id=run_id, run_dir=str(run_dir) if run_dir else None,
                          status="completed", clock=clock.UNSYNCHRONIZED, transport=rp.transport,
                          connections=rp.connections, scheduler=cfg.scheduler, split=rp.split,
                          source=rp.source, duration_s=rp.duration_s)
    try:
        reply = _offer_run(ctl, cfg, rp, run_id, deadline)
        token = reply.get("token")
        if not isinstance(token, str) or len(token) != 2 * control.TOKEN_BYTES:
            raise SenderError("receiver's accept carries no valid token")
        result.clock = reply.get("clock") if reply.get("clock") in (clock.SHARED, clock.UNSYNCHRONIZED) \
            else clock.UNSYNCHRONIZED
        peer = ctl.getpeername()[:2]

        # 2. media connections
        if rp.transport == "tcp":
            for i in range(rp.connections):
                conns.append(_Conn(i, _open_tcp(cfg, peer, i, token, deadline + 5.0), True))
        else:
            family = socket.AF_INET6 if ":" in peer[0] else socket.AF_INET
            us = socket.socket(family, socket.SOCK_DGRAM)
            conns.append(_Conn(0, us, False))
            apply_buffers(us, cfg.tcp)
            us.connect(peer)
            us.setblocking(False)
        result.socket_options = [read_back(c.sock) for c in conns]
        result.per_connection_packets = [0] * len(conns)

        common = {"clock": result.clock, "clock_source": clock.CLOCK_NAME, "run_id": run_id}
        meta = {"params": rp.to_dict(), "scheduler": cfg.scheduler, "tcp": cfg.tcp.to_dict(),
                "proactive_drop_delay_s": cfg.proactive_drop_delay_s, "keepalive": cfg.keepalive,
                "seed": cfg.seed, "receiver": f"{cfg.to_host}:{cfg.to_port}",
                "socket_options": result.socket_options, "status": "running"}
        if run_dir is not None:
            update_run_metadata(run_dir, common, "sender", meta)
            writer = RecordWriter(run_dir, "sent", writer_id=f"sender-{run_id}")
            if rp.transport == "tcp" and cfg.tcp_state_period_s > 0:
                if cfg.cc_state_map_id is not None:
                    cc_map = CcStateMap(cfg.cc_state_map_id)
                state_writer = RecordWriter(run_dir, "tcp_state", writer_id=f"sender-{run_id}")
                sampler = TcpStateSampler(state_writer, cfg.tcp_state_period_s, cc_map)
        wait_until(start_at, stop)
        _SendRun(_LoopSettings(cfg, rp, interval_s, stop, on_progress), source, conns, ctl, writer,
                 result, sampler).run()
    except KeyboardInterrupt:
        result.status = "interrupted"
    finally:
        if writer is not None:
            writer.close()
        if state_writer is not None:
            state_writer.close()
        if cc_map is not None:
            cc_map.close()
        for c in conns:
            try:
                if c.tcp and c.sock.fileno() >= 0:      # (a reset connection was read before)
                    result.tcp_info_end.append(_info_summary(c.sock))
            except OSError:
                pass
            c.sock.close()
        ctl.close()
        result.tcp_counters = netstat.counter_delta(counters_start, netstat.tcp_counters())
        if run_dir is not None and writer is not None:
            meta.update(status=result.status, result=result.to_dict())
            update_run_metadata(run_dir, common, "sender", meta)
    return result


def _info_summary(sock: socket.socket) -> dict:
    r = tcp_info_raw(sock)
    keep = ("ca_state", "snd_cwnd", "snd_ssthresh", "rtt_us", "rttvar_us", "min_rtt_us", "rto_us",
            "total_retrans", "lost", "bytes_acked", "bytes_retrans", "total_rto",
            "total_rto_recoveries", "total_rto_time_ms", "reord_seen", "dsack_dups")
    return {k: r[k] for k in keep if k in r}


def _receiver_failed(result: SenderResult, msg: dict) -> None:
    """The receiver's abort: it failed the run (e.g. a corrupted media stream) and says why."""
    result.status = "receiver-failed"
    result.error = (f"the receiver failed the run ({msg.get('status') or 'no status'}): "
                    f"{msg.get('reason') or 'no reason given'}")


def _late_abort(ctl: socket.socket, reader: control.ControlReader, timeout_s: float) -> dict | None:
    """After a media connection broke: the receiver's abort, if it sent one (it closes the
    media connections right after it, so the abort may still be on its way)."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            ctl.settimeout(left)
            data = ctl.recv(4096)
            msgs = reader.feed(data) if data else []
        except (OSError, control.ControlError):
            return None
        for msg, _ in msgs:
            if msg.get("type") == "abort":
                return msg
        if not data:
            return None
    return None


@dataclass(frozen=True)
class _LoopSettings:
    """What a sending loop is told and never changes: the sender's configuration, the run's
    parameters (as sent in the hello), the source's nominal packet interval (s; the keep-alive
    silence threshold and its lower bound on the keep-alive gap, Brosh et al. §8.2) and the
    caller's hooks."""
    cfg: SenderConfig
    params: RunParams
    interval_s: float
    stop: threading.Event | None = None
    on_progress: Callable[[dict], None] | None = None


class _SendRun:
    """The sending side of one run once it is connected: steps 3-5 of the module docstring.

    The settings (:class:`_LoopSettings`) are fixed; the rest is the loop's state: the source's
    next packet, the sequence numbers, the selector and which connections wait to be writable.
    Counters go into ``result`` (:class:`SenderResult`), records into ``writer``.
    """

    def __init__(self, settings: _LoopSettings, source, conns: list[_Conn], ctl: socket.socket,
                 writer: RecordWriter | None, result: SenderResult,
                 sampler: TcpStateSampler | None = None):
        self.settings = settings
        self.sampler = sampler      # TCP state over time (tcp_state records), None = off
        self.sampled = [(settings.params.flow_id, c.index, c.sock) for c in conns if c.tcp]
        self.source, self.conns, self.ctl, self.writer, self.result = source, conns, ctl, writer, result
        self.reader = control.ControlReader()
        cfg, rp = settings.cfg, settings.params
        tcp = rp.transport == "tcp"
        self.scheduler = make_scheduler(cfg.scheduler if tcp and len(conns) > 1 else "blind", len(conns))
        self.need_state = tcp and (self.scheduler.needs_state or cfg.proactive_drop_delay_s is not None)
        self.ka_rtt_ns = int(cfg.keepalive_rtt_s * 1e9)
        self.min_ka_ns = int(settings.interval_s * 1e9)
        self.sel: selectors.BaseSelector | None = None
        self.writing: set[int] = set()      # indices of the connections registered for EVENT_WRITE
        self.rtp_seq = 0
        self.seq = 0
        self.t0 = 0
        self.last_media_ns = 0

    def run(self) -> None:
        """Send, then (if the run got that far) end it; a broken run still looks for the
        receiver's abort, which says why."""
        result = self.result
        try:
            self._send()
        finally:
            if result.status in ("connection-lost", "receiver-disconnected"):
                msg = _late_abort(self.ctl, self.reader, 2.0)
                if msg is not None:
                    _receiver_failed(result, msg)

    # -- sockets ------------------------------------------------------------------------------

    def _want_write(self, c: _Conn, on: bool) -> None:
        if on and c.index not in self.writing:
            self.sel.register(c.sock, selectors.EVENT_WRITE, c)
            self.writing.add(c.index)
        elif not on and c.index in self.writing:
            self.sel.unregister(c.sock)
            self.writing.discard(c.index)

    def _flush(self, c: _Conn) -> None:
        """Hand the connection's application queue to its socket as far as it takes it."""
        result = self.result
        try:
            if c.tcp:
                while c.out:
                    n = c.sock.send(c.out)
                    result.wire_bytes += n
                    del c.out[:n]
            else:
                while c.dgrams:
                    n = c.sock.send(c.dgrams[0])
                    result.wire_bytes += n
                    c.dgram_bytes -= len(c.dgrams.popleft())
        except _BLOCKED:
            pass
        except ConnectionRefusedError:
            if not c.tcp:        # ICMP port unreachable from an earlier datagram: keep going
                c.dgram_bytes -= len(c.dgrams.popleft())
            else:
                raise
        self._want_write(c, not c.idle())

    def _ka_gap_ns(self, c: _Conn) -> int:
        """RTT/3, but never more often than the media packets themselves."""
        rtt = self.ka_rtt_ns
        if c.tcp:
            try:
                rtt = tcp_info_raw(c.sock)["rtt_us"] * 1000 or self.ka_rtt_ns
            except OSError:
                pass
        return max(rtt // 3, self.min_ka_ns)

    def _views(self) -> list[ConnectionView]:
        out = []
        for c in self.conns:
            try:
                ca = tcp_info_raw(c.sock)["ca_state"]
                unsent = unsent_bytes(c.sock)
            except OSError:
                ca, unsent = CA_OPEN, 0
            out.append(ConnectionView(c.index, unsent + c.queued_bytes(), ca))
        return out

    @staticmethod
    def _implied_delay_s(c: _Conn, unsent: int) -> float:
        """Seconds the connection's unsent bytes take to drain at cwnd*MSS per RTT."""
        r = tcp_info_raw(c.sock)
        if not r["rtt_us"] or not r["snd_cwnd"]:
            return 0.0
        rate = r["snd_cwnd"] * r["snd_mss"] / (r["rtt_us"] / 1e6)   # bytes/s the window drains
        return unsent / rate

    # -- packets ------------------------------------------------------------------------------

    def _emit(self, p, now: int) -> None:
        """One source packet, now: pick its connection, drop it or queue its pieces, record it."""
        cfg, rp, result, writer = self.settings.cfg, self.settings.params, self.result, self.writer
        bound_s = cfg.proactive_drop_delay_s
        v = self._views() if self.need_state else None
        ci = self.scheduler.pick(v)
        c = self.conns[ci]
        dropped = False
        size = int(p.size_bytes)
        if bound_s is not None:
            unsent = v[ci].unsent_bytes
            dropped = unsent > 0 and self._implied_delay_s(c, unsent) > bound_s
            if dropped:
                result.dropped_packets += 1
        if not dropped and c.queued_bytes() + size > cfg.max_queue_bytes:
            dropped = True
            result.queue_full_packets += 1
        row = dict(flow_id=rp.flow_id, connection=-1 if dropped else ci, seq=self.seq, size_bytes=size,
                   send_time_s=now / 1e9, frame_id=int(p.frame_id), frame_type=str(p.frame_type),
                   frame_last=bool(p.frame_last), dropped=dropped)
        result.packets += 1
        self.seq += 1
        if dropped:
            if writer is not None:
                writer.append(**row)
            return
        try:
            n = max(1, min(rp.split, size // framing.MIN_MEDIA_RTP_BYTES))
            sizes = framing.split_sizes(size, n) if n > 1 else [size]
            ts = int(p.at_s * framing.RTP_CLOCK_HZ)
            for k, s in enumerate(sizes):
                pkt = framing.encode_media(flow_id=rp.flow_id, rtp_seq=self.rtp_seq, rtp_timestamp=ts,
                                           marker=bool(p.frame_last) and k == n - 1, seq=row["seq"],
                                           send_time_ns=now, piece=k, pieces=n, size_bytes=s)
                self.rtp_seq += 1
                c.enqueue(pkt)
                # each piece its own write: with TCP_NODELAY the kernel sends a write that finds
                # the window open as its own segment, so split-N puts N packets on the wire, as
                # Brosh et al. §7.1's application does (one write of all N pieces is one segment
                # when they fit in an MSS: split-N would be plain TCP). Pieces the socket cannot
                # take now wait in the queue and leave together, as a window-limited TCP's do.
                self._flush(c)
            result.rtp_packets += n
            c.packets += 1
            result.per_connection_packets[ci] += 1
            c.last_tx = now
            self.last_media_ns = now
        finally:     # the record is written after the packet is handed to the socket
            if writer is not None:
                writer.append(**row)

    def _keepalives(self, now: int, wake: list[int]) -> None:
        """The source is silent: a keep-alive on every idle connection whose gap is due
        (Brosh et al. §8.2); each connection's next due time goes into ``wake``."""
        for c in self.conns:
            if not c.idle():
                continue
            due = c.last_tx + self._ka_gap_ns(c)
            if due <= now:
                ka = framing.encode_keepalive(flow_id=self.settings.params.flow_id, rtp_seq=self.rtp_seq,
                                              rtp_timestamp=int((now - self.t0) * 9e-5))
                self.rtp_seq += 1
                c.enqueue(ka)
                c.last_tx = now
                self.result.keepalive_packets += 1
                self._flush(c)
                due = now + self._ka_gap_ns(c)
            wake.append(due)

    def _read_ctl(self) -> bool:
        """The control connection is readable (the receiver only speaks when asked, or to
        abort). False: the run is over (the receiver left or aborted)."""
        result = self.result
        data = control.read_ready(self.ctl)
        if data is None:
            return True
        if not data:
            result.status = "receiver-disconnected"
            return False
        try:
            msgs = self.reader.feed(data)
        except control.ControlError as err:
            result.error = f"control: {err}"
            msgs = []
        for msg, _ in msgs:
            if msg.get("type") == "abort":
                _receiver_failed(result, msg)
                return False
            result.error = f"unexpected control message {msg.get('type')!r} from the receiver"
        return True

    # -- the loop -----------------------------------------------------------------------------

    def _send(self) -> None:
        cfg, rp, result, conns = self.settings.cfg, self.settings.params, self.result, self.conns
        stop, on_progress, interval_s = self.settings.stop, self.settings.on_progress, self.settings.interval_s
        sel = self.sel = selectors.DefaultSelector()
        self.ctl.setblocking(False)
        sel.register(self.ctl, selectors.EVENT_READ, None)
        packets = iter(self.source.packets(rp.duration_s, cfg.seed))
        nxt = next(packets, None)
        t0 = self.t0 = clock.now_ns()
        self.last_media_ns = t0
        late = LatenessHistogram()
        next_progress = t0
        state = "sending"            # sending -> draining -> done
        drain_deadline = None
        try:
            while True:
                now = clock.now_ns()
                if stop is not None and stop.is_set():
                    result.status = "interrupted"
                    break
                while nxt is not None and (due := t0 + int(nxt.at_s * 1e9)) <= now:
                    late.add_ns(now - due)
                    self._emit(nxt, now)
                    nxt = next(packets, None)
                if state == "sending" and nxt is None:
                    state = "draining"
                    drain_deadline = now + int(cfg.drain_timeout_s * 1e9)
                if state == "draining":
                    if all(c.drained() for c in conns):
                        break
                    if now >= drain_deadline:
                        result.status = "drain-timeout"
                        break
                wake = [] if nxt is None else [t0 + int(nxt.at_s * 1e9)]
                if state == "draining":
                    # the kernel's queue empties without an event here: look again soon
                    wake.append(min(drain_deadline, now + _DRAIN_POLL_NS))
                if cfg.keepalive and state == "sending" \
                        and now - self.last_media_ns > _SILENCE_FACTOR * interval_s * 1e9:
                    self._keepalives(now, wake)
                elif cfg.keepalive and state == "sending":
                    wake.append(self.last_media_ns + int(_SILENCE_FACTOR * interval_s * 1e9) + 1)
                if on_progress is not None and now >= next_progress:
                    on_progress({"elapsed_s": (now - t0) / 1e9, "duration_s": rp.duration_s,
                                 "packets": result.packets, "dropped_packets": result.dropped_packets,
                                 "queued_bytes": sum(c.queued_bytes() for c in conns)})
                    next_progress = now + int(_PROGRESS_EVERY_S * 1e9)
                    wake.append(next_progress)
                if self.sampler is not None:
                    self.sampler.sample(self.sampled, now)
                    wake.append(self.sampler.due_ns())
                if stop is not None:
                    wake.append(now + 100_000_000)
                timeout = max(0.0, (min(wake) - clock.now_ns()) / 1e9) if wake else 1.0
                for key, _ in sel.select(timeout):
                    if key.data is None:
                        if not self._read_ctl():
                            return
                    else:
                        self._flush(key.data)
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as err:
            result.status = "connection-lost"
            result.error = str(err)
            return
        finally:
            result.elapsed_s = (clock.now_ns() - t0) / 1e9
            result.queued_bytes_at_end = sum(c.queued_bytes() for c in conns)
            result.send_lateness_us = late.summary()
            sel.close()
        if result.status != "completed" and result.status != "drain-timeout":
            return
        self._end()

    def _close_media_for_writing(self) -> None:
        """FIN after what the kernel holds: the receiver reads every byte sent."""
        for c in self.conns:
            if c.tcp:
                try:
                    c.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    def _reset_media(self) -> None:
        """RST (SO_LINGER 0, then close): the kernel's unsent data is dropped. TCP_INFO is
        read first: it is the connection's state at the end."""
        for c in self.conns:
            if c.tcp:
                try:
                    self.result.tcp_info_end.append(_info_summary(c.sock))
                    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    c.sock.close()
                except OSError:
                    pass

    def _end(self) -> None:
        """Step 5: close the media connections for writing, tell the receiver, read its summary.

        After a drain timeout the run's time is over with data still queued (a flow offered
        more than its share of the path, e.g. papers/004's TCP flows at 20 flows and more):
        the receiver is told so in "end" first, then the media connections are reset, so what
        the kernel still holds is discarded rather than delivered for minutes after the run
        (it counts as not delivered, as in a simulation that stops at its end time)."""
        cfg, result, ctl = self.settings.cfg, self.result, self.ctl
        timed_out = result.status == "drain-timeout"
        if not timed_out:
            self._close_media_for_writing()
        ctl.setblocking(True)
        try:
            control.send(ctl, {"type": "end", "packets": result.packets,
                               "dropped_packets": result.dropped_packets,
                               "rtp_packets": result.rtp_packets,
                               "keepalive_packets": result.keepalive_packets,
                               "drain_timeout": timed_out},
                         pad_to=control.REQUEST_PAD_BYTES)
            if timed_out:
                self._reset_media()
            # the receiver answers once it has read everything; after a drain timeout it may never
            summary, _ = control.recv(ctl, 2.0 if result.status == "drain-timeout"
                                      else cfg.drain_timeout_s + 5.0)
            if summary.get("type") == "summary":
                result.receiver = {k: v for k, v in summary.items() if k != "type"}
            elif summary.get("type") == "abort":
                _receiver_failed(result, summary)
            else:
                result.error = f"receiver answered 'end' with {summary.get('type')!r}"
        except (control.ControlError, OSError) as err:
            result.error = f"no summary from the receiver: {err}"
            if isinstance(err, OSError):        # the receiver may have aborted and closed
                msg = _late_abort(ctl, self.reader, 2.0)
                if msg is not None:
                    _receiver_failed(result, msg)

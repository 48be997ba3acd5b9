"""The media receiver: accepts runs, reads media, records every packet as the application gets it.

:func:`run_receiver` listens on one address: TCP for the control exchange and the media
connections (told apart by their first message, :mod:`tcpdelay.transport.control`) and UDP on
the same port number for UDP media. It serves ``runs`` runs one after another.

One single-threaded event loop (``selectors``) reads every socket as soon as it is readable:
the listening socket, the connections that have not yet sent their first control message
(:mod:`.pending`: read concurrently, bounded in count and time, so idle or slow connections
cannot keep a sender out), and, during a run, its control connection and media. A run gets
its directory when its first media arrives; a sender that leaves before that leaves nothing
and is not counted. A media stream that is not the flow's packets (:class:`FramingError`)
fails the run: status "corrupted" (or "truncated"), the reason in ``failure``, an "abort" to
the sender. The receive time of a packet is the CLOCK_MONOTONIC reading (:mod:`.clock`) taken
right after the ``recv`` call that returned its last byte: the moment the application has it.
What is recorded ("received", :mod:`tcpdelay.records`), per media packet:

- split-N: the pieces are reassembled by (flow, media seq); the packet is recorded when its
  last piece is read, with the size of the whole packet. Pieces of a packet whose other pieces
  never come (UDP loss) are dropped when the run ends or when more than
  :data:`MAX_PARTIAL_PACKETS` packets are incomplete (counted as ``incomplete_packets``).
- parallel connections, ``delivery="read"`` (default): each packet is recorded when it is read
  from its connection, whichever connection it came on. This is what an application with a
  playout buffer gets: the buffer orders packets by sequence number and plays each at its
  deadline, so a packet that is in time is in time even if an earlier one is still missing.
- ``delivery="in-order"`` (TCP only): the receiver reorders across connections by sequence
  number and records a packet when every earlier one has been delivered (its time is then the
  read time of the packet that filled the gap): the delay of a strictly in-order application.
  When more than :data:`MAX_HELD_PACKETS` packets wait behind gaps, gaps are skipped, oldest
  first, until half of them are delivered (one sort and one line in ``errors`` per skip, not a
  scan per packet), so a sender that never fills them can exhaust neither memory nor a core; a
  packet that arrives after its gap was skipped is counted in ``late_packets``.
- keep-alives are counted, not recorded. A duplicate (UDP) is counted, not recorded twice.

Exposed to a network (docs/transport.md "Security"): no input ends the receiver (an exception
in a handshake is a notice, in a run it ends that run "failed" with the reason); a run writes
only in OUT/RUN_ID (or OUT), never in another run's or a sweep's folder; what one peer may make
it hold or write is bounded by ReceiverConfig's ``max_*`` fields (a run past one ends
"over-limit"); only the flow's own packets keep a run from its idle timeout; UDP records only
the port of the flow's first datagram. There is no authentication yet.

The receiver writes only the control answers, each no longer than the request it answers;
it never sends on a media connection or over UDP (no amplification).
"""

from __future__ import annotations

import errno
import json
import secrets
import selectors
import shutil
import socket
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from tcpdelay.errors import EnvironmentNotSupported, ParameterError
from tcpdelay.records import RecordWriter
from tcpdelay.transport import clock, control
from tcpdelay.transport.config import ReceiverConfig, RunParams, run_id_problem
from tcpdelay.transport.framing import FrameParser, FramingError, KeepAlive, decode
from tcpdelay.transport.pending import Pending
from tcpdelay.transport.quic_config import is_quic
from tcpdelay.transport.runmeta import mark_interrupted_runs, this_process, update_run_metadata
from tcpdelay.transport.sockopts import apply_buffers

MAX_PARTIAL_PACKETS = 4096
MAX_HELD_PACKETS = 65536
RECV_BUFFER_BYTES = 256 * 1024
_UDP_BATCH = 256
_POLL_S = 0.2
_BACKLOG = 1024      # the kernel caps it at net.core.somaxconn
_BLOCKED = (BlockingIOError, InterruptedError)


@dataclass
class ReceiverResult:
    """One served run (picklable; ``to_dict`` for JSON)."""
    run_id: str
    run_dir: str | None
    status: str            # completed | corrupted | truncated | sender-disconnected | idle-timeout | interrupted | over-limit | failed
    clock: str
    peer: str
    params: dict
    elapsed_s: float = 0.0
    received_packets: int = 0
    received_bytes: int = 0        # RTP bytes of the recorded media packets
    rtp_packets: int = 0           # media RTP packets read (pieces count one each)
    keepalive_packets: int = 0
    duplicate_packets: int = 0
    incomplete_packets: int = 0    # packets with pieces missing (split-N) or cut by a reset after a drain timeout
    held_at_end: int = 0           # in-order delivery: packets behind a gap when the run ended
    foreign_datagrams: int = 0     # UDP from another address, or not tcpdelay RTP of this flow
    other_port_datagrams: int = 0  # UDP from the sender's address but another port than its media's: dropped
    late_packets: int = 0          # in-order delivery: arrived after their gap had been skipped
    control_messages: int = 0      # control messages after the hello
    media_connections: int = 0
    bytes_in: int = 0              # everything read from the sender (control + media)
    bytes_out: int = 0             # everything written to it (control answers only)
    errors: list[str] = field(default_factory=list)
    errors_dropped: int = 0        # errors beyond ReceiverConfig.max_errors_kept (counted, not kept)
    failure: str | None = None     # why a run that did not complete failed (corrupted, truncated)
    sender_end: dict | None = None
    first_recv_time_s: float | None = None
    last_recv_time_s: float | None = None
    quic: dict | None = None       # QUIC transports: the run's certificate and the connection's counts

    def to_dict(self) -> dict:
        return asdict(self)


def _bind(cfg: ReceiverConfig) -> tuple[socket.socket, socket.socket, tuple[str, int]]:
    try:
        infos = socket.getaddrinfo(cfg.listen_host, cfg.listen_port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise ParameterError(f"listen: cannot resolve {cfg.listen_host!r} ({err.strerror})") from None
    family, _, _, _, addr = infos[0]
    lst = socket.socket(family, socket.SOCK_STREAM)
    try:
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        apply_buffers(lst, cfg.tcp)     # inherited by accepted sockets; set before listen()
        lst.bind(addr)
        lst.listen(_BACKLOG)
        port = lst.getsockname()[1]
        udp = socket.socket(family, socket.SOCK_DGRAM)
        try:
            udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, cfg.tcp.rcvbuf_bytes or 4 * 1024 * 1024)
            udp.bind((addr[0], port) + tuple(addr[2:]))
        except OSError as err:
            udp.close()
            raise EnvironmentNotSupported(f"listen: UDP port {port} on {addr[0]} is not free "
                                          f"({err.strerror})") from None
    except OSError as err:
        lst.close()
        raise EnvironmentNotSupported(f"listen: cannot listen on {cfg.listen_host}:{cfg.listen_port} "
                                      f"({err.strerror})") from None
    except BaseException:
        lst.close()
        raise
    lst.setblocking(False)
    udp.setblocking(False)
    return lst, udp, (addr[0], port)


def run_receiver(config: ReceiverConfig, *, stop: threading.Event | None = None,
                 on_ready: Callable[[tuple[str, int]], None] | None = None,
                 on_progress: Callable[[dict], None] | None = None,
                 on_notice: Callable[[str], None] | None = None) -> list[ReceiverResult]:
    """Listen and serve ``config.runs`` runs (0: until ``stop`` is set or KeyboardInterrupt).

    ``on_ready((host, port))`` is called once listening (useful with port 0). Returns the
    results of the runs served. Handshakes are read concurrently (:mod:`.pending`): a
    connection that does not complete a valid hello in time is closed, or answered with a
    reject, and does not count as a run; nor does a run its sender abandons before any media
    arrived (``on_notice`` is told why, and nothing is written for it).
    """
    per_run = config.per_run_dirs if config.per_run_dirs is not None else config.runs != 1
    if config.out_dir is not None and not per_run:
        received = Path(config.out_dir) / "received"
        if received.exists() and any(received.glob("part-*.parquet")):
            raise ParameterError(f"out: {config.out_dir} already holds 'received' records of "
                                 "another run; choose a new directory")
    lst, udp, addr = _bind(config)
    sel = selectors.DefaultSelector()
    pending = Pending(sel, config.max_pending, config.handshake_timeout_s)
    sel.register(lst, selectors.EVENT_READ, ("listen", None))
    results: list[ReceiverResult] = []
    recent: dict[str, deque] = {}      # peer address -> times of its accepted hellos (last minute)

    def notice(text: str) -> None:
        if on_notice is not None:
            on_notice(text)

    try:
        _tidy_after_a_kill(config, per_run, notice)
        if on_ready is not None:
            on_ready(addr)
        while config.runs == 0 or len(results) < config.runs:
            if stop is not None and stop.is_set():
                break
            wait = pending.next_deadline_s()
            for key, _ in sel.select(_POLL_S if wait is None else min(_POLL_S, wait)):
                kind, _ = key.data
                if kind == "listen":
                    pending.accept_all(lst)
                    continue
                got = pending.read(key.fileobj)
                if got is None:
                    continue
                try:
                    run = _handshake(config, lst, udp, got, stop, on_progress, single=not per_run,
                                     recent=recent, notice=notice)
                except Exception as err:  # noqa: BLE001 - no input may end the receiver
                    notice(f"hello from {got[3][0]}:{got[3][1]} failed ({_what(err)}); refused")
                    continue
                if run is None:
                    continue
                res = run.loop(sel, pending)
                if res.failure is not None and res.status in ("failed", "over-limit"):
                    notice(f"run {res.run_id} from {res.peer} ended {res.status}: {res.failure}")
                if run.abandoned():
                    notice(f"run {res.run_id} from {res.peer} ended ({res.status}) before any "
                           f"media arrived; not counted, nothing written"
                           + (f": {res.errors[0]}" if res.errors else ""))
                else:
                    results.append(res)
                if res.status == "interrupted":
                    return results
                break           # the keys selected before the run are stale
            pending.expire()
    except KeyboardInterrupt:
        pass
    finally:
        pending.close_all()
        sel.close()
        lst.close()
        udp.close()
    return results


def _tidy_after_a_kill(cfg: ReceiverConfig, per_run: bool, notice) -> None:
    """What a receiver killed mid-run left (runmeta, quic_tls): its runs still "running" are
    marked interrupted, the QUIC key folders of dead receivers removed; each said once."""
    from tcpdelay.transport.quic_tls import remove_stale_key_dirs

    try:
        if cfg.out_dir is not None:
            for d in mark_interrupted_runs(cfg.out_dir, per_run):
                notice(f"run in {d} was left running by a receiver that is gone (killed); marked interrupted")
        removed = remove_stale_key_dirs()
        if removed:
            notice(f"removed {len(removed)} QUIC key folder(s) of receivers that are gone: {', '.join(removed[:3])}")
    except OSError as err:
        notice(f"could not tidy what a killed receiver left ({_what(err)})")


def _what(err: BaseException) -> str:
    """One line for an unexpected exception (its type, its message, its errno's name)."""
    if isinstance(err, OSError) and err.errno is not None:
        name = errno.errorcode.get(err.errno, str(err.errno))
        return f"{name}: {err.strerror or err}" + (f" ({err.filename})" if err.filename else "")
    return f"{type(err).__name__}: {str(err)[:200]}"


def _free_disk_bytes(path: Path) -> int:
    """Free bytes (for an unprivileged writer) on the file system of ``path`` or its nearest
    existing parent."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


#: What a run directory may already hold when the receiver enters it: the records and run.json
#: of the sender of the same run (both ends on one machine, sharing the directory).
_SENDER_ENTRIES = {"sent", "tcp_state", "quic_state", "run.json", ".run.json.lock"}


def _run_dir_problem(out: Path, run_id: str, single: bool) -> str | None:
    """Why the receiver may not write run ``run_id``'s records (None: it may). A run writes
    only in its own directory: OUT itself (one run) or OUT/RUN_ID, a real directory (not a
    symbolic link) right inside OUT, that is new or holds nothing but the same run's sender
    records; never a directory of another run, nor a sweep's. OUT itself (one run: the folder
    the operator named) only needs to hold no "received" records yet."""
    run_dir = out if single else out / run_id
    if not single:
        if run_dir.is_symlink() or run_dir.resolve().parent != out.resolve():
            return f"run {run_id}: its directory would not be a folder of its own in the output folder"
    if run_dir.exists() and not run_dir.is_dir():
        return f"run {run_id}: the receiver's output path for it exists and is not a directory"
    if not run_dir.exists():
        return None
    received = run_dir / "received"
    if received.exists() and (not received.is_dir() or any(received.glob("part-*.parquet"))):
        return f"the receiver's directory for run {run_id} already holds records"
    if single:
        return None         # the folder the operator named for this one run
    try:
        meta = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    except (OSError, ValueError):
        return f"run {run_id}: its directory holds a run.json that is not a run's"
    if not isinstance(meta, dict) or "receiver" in meta or meta.get("run_id", run_id) != run_id:
        return f"run {run_id}: its directory holds another run's run.json"
    others = sorted(e.name for e in run_dir.iterdir() if e.name not in _SENDER_ENTRIES)
    if others:
        return (f"run {run_id}: its directory exists and holds what is not this run's sender's "
                f"({', '.join(others[:3])}); choose another run id")
    return None


def _reject(ctl: socket.socket, reason: str, request_bytes: int) -> None:
    try:
        ctl.send(control.answer({"type": "reject", "reason": reason}, request_bytes))
    except OSError:
        pass


def _handshake(cfg: ReceiverConfig, lst, udp, got, stop, on_progress, single: bool,
               recent: dict | None = None, notice=None) -> "_Run | None":
    """A pending connection's first message is complete: if it is a valid hello, accept the
    run and return it (ready for :meth:`_Run.loop`); otherwise reject or close, and None."""
    hello, hello_bytes, rest, peer, ctl = got
    run = cert = None
    recent = {} if recent is None else recent
    try:
        if hello.get("type") != "hello" or hello.get("protocol") != control.PROTOCOL:
            if hello.get("type") == "hello":
                _reject(ctl, "expected a tcpdelay-media hello", hello_bytes)
            return None            # a stray data connection (of a run that is over) or junk
        if hello.get("version") != control.VERSION:
            _reject(ctl, f"protocol version {hello.get('version')!r} is not supported; this "
                         f"receiver speaks version {control.VERSION}", hello_bytes)
            return None
        run_id = hello.get("run_id")
        problem = run_id_problem(run_id)
        if problem is not None:
            _reject(ctl, problem, hello_bytes)
            return None
        try:
            params = RunParams.from_dict(hello.get("params"))
        except (ParameterError, TypeError) as err:
            _reject(ctl, f"bad params: {err}", hello_bytes)
            return None
        if params.duration_s > cfg.max_run_duration_s:
            _reject(ctl, f"duration_s {params.duration_s:g} exceeds this receiver's "
                         f"max_run_duration_s {cfg.max_run_duration_s:g}", hello_bytes)
            return None
        now = time.monotonic()
        for ip in list(recent):         # forget hellos older than a minute, and silent addresses
            q = recent[ip]
            while q and now - q[0] > 60.0:
                q.popleft()
            if not q:
                del recent[ip]
        times = recent.get(peer[0], deque())
        if len(times) >= cfg.max_runs_per_peer_per_minute:
            _reject(ctl, f"too many runs from {peer[0]}: at most "
                         f"{cfg.max_runs_per_peer_per_minute} a minute", hello_bytes)
            return None
        run_dir = None
        if cfg.out_dir is not None:
            out = Path(cfg.out_dir)
            run_dir = out if single else out / run_id
            problem = _run_dir_problem(out, run_id, single)
            if problem is None and _free_disk_bytes(out) < cfg.min_free_disk_bytes:
                problem = (f"the receiver's disk has {_free_disk_bytes(out) / 2**20:.0f} MiB free, "
                           f"below its floor of {cfg.min_free_disk_bytes / 2**20:.0f} MiB")
            if problem is not None:
                _reject(ctl, problem, hello_bytes)
                if notice is not None:
                    notice(f"hello from {peer[0]}:{peer[1]} refused: {problem}")
                return None
        recent.setdefault(peer[0], times).append(now)      # an accepted hello
        token = secrets.token_hex(control.TOKEN_BYTES)
        run_clock = clock.clock_for_peer(str(hello.get("boot_id", "")))
        cert = None
        if is_quic(params.transport):       # a new certificate per run (transport/quic_tls.py)
            from tcpdelay.transport.quic_tls import make_certificate
            cert = make_certificate()
        accept = control.answer({"type": "accept", "version": control.VERSION, "token": token,
                                 "clock": run_clock,
                                 **({"cert_sha256": cert.sha256} if cert is not None else {})},
                                hello_bytes)
        res = ReceiverResult(run_id=run_id, run_dir=str(run_dir) if run_dir else None,
                             status="completed", clock=run_clock, peer=f"{peer[0]}:{peer[1]}",
                             params=params.to_dict(), bytes_in=hello_bytes,
                             bytes_out=len(accept))
        run = _Run(cfg, params, res, lst, udp, ctl, peer, token, run_dir, stop, on_progress,
                   budget=hello_bytes - len(accept), ctl_rest=rest, cert=cert)
        cert = None                 # the run's now: QuicMedia.close removes it
        run.prepare()      # stale UDP drained: before media can come
        try:
            ctl.setblocking(True)
            ctl.settimeout(2.0)
            ctl.sendall(accept)
        except OSError as err:
            res.status = "sender-disconnected"
            res.errors.append(f"control: accept not delivered ({err.strerror or err})")
        return run
    finally:
        if run is None:
            ctl.close()
            if cert is not None:
                cert.remove()       # no key folder left behind by a run that did not start


class _Run:
    """The receiving side of one run (see the module docstring)."""

    def __init__(self, cfg, params: RunParams, res: ReceiverResult, lst, udp, ctl, peer, token,
                 run_dir, stop, on_progress, *, budget: int, ctl_rest: bytes = b"", cert=None):
        self.cfg, self.p, self.res = cfg, params, res
        self.budget = budget            # bytes the receiver may still answer (no amplification)
        self.ctl_rest = ctl_rest        # control bytes that came right behind the hello
        self.lst, self.udp, self.ctl, self.peer_ip, self.token = lst, udp, ctl, peer[0], token
        self.run_dir, self.stop, self.on_progress = run_dir, stop, on_progress
        self.flow = params.flow_id
        self.in_order = params.delivery == "in-order"
        self.partial: dict[int, list] = {}     # seq -> [mask, bytes, send_ns]
        self.done: set[int] = set()
        self.max_done = -1
        self.next_seq = 0
        self.held: dict[int, tuple] = {}
        self.writer: RecordWriter | None = None
        self.buf = bytearray(RECV_BUFFER_BYTES)
        self.view = memoryview(self.buf)
        self.udp_src = None             # UDP: the (address, port) the flow's datagrams come from
        self._handshake_seen = False
        self.quic = None
        if cert is not None:        # the run's QUIC server (transport/quic_receiver.py)
            from tcpdelay.transport.quic_receiver import QuicMedia
            self.quic = QuicMedia(params.transport, cert, udp,
                                  min(cfg.max_message_bytes, params.max_packet_bytes), params.flow_id,
                                  window_bytes=cfg.quic_window_bytes)

    def note(self, text: str) -> None:
        """An error line of the run, kept up to ``max_errors_kept`` (then only counted)."""
        if len(self.res.errors) < self.cfg.max_errors_kept:
            self.res.errors.append(text)
        else:
            self.res.errors_dropped += 1

    # -- packets ------------------------------------------------------------------------------

    def _record(self, conn: int, seq: int, size: int, send_ns: int, t_ns: int) -> None:
        res = self.res
        res.received_packets += 1
        res.received_bytes += size
        t = t_ns / 1e9
        if res.first_recv_time_s is None:
            res.first_recv_time_s = t
        res.last_recv_time_s = t
        if self.writer is not None:
            self.writer.append(flow_id=self.flow, connection=conn, seq=seq, size_bytes=size,
                               send_time_s=send_ns / 1e9, recv_time_s=t)

    def _complete(self, conn: int, seq: int, size: int, send_ns: int, t_ns: int) -> None:
        done = self.done
        if seq in done or seq < self.max_done - 65536:
            self.res.duplicate_packets += 1
            return
        done.add(seq)
        if seq > self.max_done:
            self.max_done = seq
        if len(done) > 4 * 65536:
            floor = self.max_done - 65536
            self.done = {s for s in done if s >= floor}
        if not self.in_order:
            self._record(conn, seq, size, send_ns, t_ns)
            return
        if seq < self.next_seq:         # its gap was skipped: an in-order application drops it
            self.res.late_packets += 1
            return
        held = self.held
        held[seq] = (conn, size, send_ns)
        if seq != self.next_seq:
            if len(held) <= MAX_HELD_PACKETS:
                return
            self._skip_gaps(t_ns)
            return
        nxt = self.next_seq
        while nxt in held:
            c, s, ns = held.pop(nxt)
            self._record(c, nxt, s, ns, t_ns)
            nxt += 1
        self.next_seq = nxt

    def _skip_gaps(self, t_ns: int) -> None:
        """More than MAX_HELD_PACKETS wait behind a gap that never fills: skip gaps, oldest
        first, and deliver what follows each, until at most half that many wait. One sort per
        MAX_HELD_PACKETS / 2 packets (not a scan per packet) and one error line per skip."""
        held = self.held
        first_gap = (self.next_seq, None)
        gaps = 0
        for seq in sorted(held):
            if len(held) <= MAX_HELD_PACKETS // 2 and seq != self.next_seq:
                break
            if seq != self.next_seq:
                if first_gap[1] is None:
                    first_gap = (self.next_seq, seq - 1)
                gaps += 1
            c, s, ns = held.pop(seq)
            self._record(c, seq, s, ns, t_ns)
            self.next_seq = seq + 1
        self.note(f"in-order: sequence numbers {first_gap[0]}..{first_gap[1]} never came"
                  + (f" (and {gaps - 1} later gaps)" if gaps > 1 else "")
                  + f"; skipped, {len(held)} packets still waiting")

    def _piece(self, piece, conn: int, t_ns: int) -> None:
        res = self.res
        if piece.flow_id != self.flow:
            res.foreign_datagrams += 1
            return
        self.last_rx = t_ns             # only the flow's own packets keep a run alive
        if type(piece) is KeepAlive:
            res.keepalive_packets += 1
            return
        res.rtp_packets += 1
        if piece.pieces == 1:
            self._complete(conn, piece.seq, piece.size_bytes, piece.send_time_ns, t_ns)
            return
        st = self.partial.get(piece.seq)
        if st is None:
            if piece.seq in self.done:
                res.duplicate_packets += 1
                return
            if len(self.partial) >= MAX_PARTIAL_PACKETS:
                del self.partial[min(self.partial)]
                res.incomplete_packets += 1
            st = self.partial[piece.seq] = [0, 0, piece.send_time_ns]
        bit = 1 << piece.piece
        if st[0] & bit:
            res.duplicate_packets += 1
            return
        st[0] |= bit
        st[1] += piece.size_bytes
        if st[0] == (1 << piece.pieces) - 1:
            del self.partial[piece.seq]
            self._complete(conn, piece.seq, st[1], st[2], t_ns)

    # -- the loop -----------------------------------------------------------------------------

    def prepare(self) -> None:
        cfg, res, p = self.cfg, self.res, self.p
        self.common = {"clock": res.clock, "clock_source": clock.CLOCK_NAME, "run_id": res.run_id}
        self.meta = {"params": p.to_dict(), "listen": f"{cfg.listen_host}:{cfg.listen_port}",
                     "peer": res.peer, "status": "running", "process": this_process()}
        self.got_media = False
        if p.transport != "tcp":
            self._drain_stale_udp()

    def _media_arrived(self) -> None:
        """The first media connection or datagram: only now does the run get a directory, so a
        sender that says hello and goes away leaves nothing behind."""
        if self.got_media:
            return
        self.got_media = True
        if self.run_dir is not None:
            update_run_metadata(self.run_dir, self.common, "receiver", self.meta)
            self.writer = RecordWriter(self.run_dir, "received", writer_id=f"receiver-{self.res.run_id}")

    def abandoned(self) -> bool:
        """Ended before any media arrived (and not completed): not a run."""
        return not self.got_media and self.res.status != "completed"

    def loop(self, sel: selectors.BaseSelector, pending: Pending) -> ReceiverResult:
        cfg, res, p = self.cfg, self.res, self.p
        common, meta = self.common, self.meta
        self.sel, self.pending = sel, pending
        self.ctl.setblocking(False)
        reader = control.ControlReader()
        sel.register(self.ctl, selectors.EVENT_READ, ("ctl", reader))
        if p.transport == "udp":
            sel.register(self.udp, selectors.EVENT_READ, ("udp", None))
        elif self.quic is not None:
            sel.register(self.udp, selectors.EVENT_READ, ("quic", None))
        self.media: dict[int, socket.socket] = {}
        self.media_socks: set[socket.socket] = set()
        self.cut_streams: list[str] = []
        self.open_media = 0
        self.ending_since: int | None = None
        t_start = clock.now_ns()
        self.last_rx = t_start
        next_progress = next_disk_check = t_start
        idle_ns = int(cfg.idle_timeout_s * 1e9)
        hard_end = t_start + int((p.duration_s + 2 * cfg.idle_timeout_s + 60) * 1e9)
        try:
            if self.ctl_rest:
                self._read_ctl(reader, self.ctl_rest)
            while res.status == "completed":
                now = clock.now_ns()
                if self.stop is not None and self.stop.is_set():
                    res.status = "interrupted"
                    break
                self._check_bounds()
                if self.writer is not None and now >= next_disk_check:
                    next_disk_check = now + 1_000_000_000
                    free = _free_disk_bytes(self.run_dir)
                    if free < cfg.min_free_disk_bytes:
                        self._fail("over-limit", f"the receiver's disk has {free / 2**20:.0f} MiB "
                                   f"free, below its floor of {cfg.min_free_disk_bytes / 2**20:.0f} MiB")
                if res.status != "completed":
                    break
                if self._finished(now):
                    break
                if now - self.last_rx > idle_ns:
                    res.status = "idle-timeout"
                    self.note(f"nothing of the flow from the sender for {cfg.idle_timeout_s:g} s")
                    break
                if now > hard_end:
                    res.status = "idle-timeout"
                    self.note("the run outlasted its duration by far")
                    break
                if self.on_progress is not None and now >= next_progress:
                    self.on_progress({"elapsed_s": (now - t_start) / 1e9, "duration_s": p.duration_s,
                                      "received_packets": res.received_packets})
                    next_progress = now + 500_000_000
                for key, _ in sel.select(self._poll_s()):
                    kind, state = key.data
                    if kind == "media":
                        self._read_media(key.fileobj, state)
                    elif kind == "udp":
                        self._read_udp()
                    elif kind == "quic":
                        self._read_quic()
                    elif kind == "pending":
                        got = pending.read(key.fileobj)
                        if got is not None:
                            self._identified(*got)
                    elif kind == "listen":
                        pending.accept_all(self.lst)
                    elif kind == "ctl":
                        if not self._read_ctl(state):
                            break
                    if res.status != "completed":
                        break
                pending.expire()
                if self.quic is not None:
                    self._quic_call(self.quic.service)
                if res.status != "completed":
                    break
        except KeyboardInterrupt:      # the run ends, its result is returned (and no next run)
            res.status = "interrupted"
        except Exception as err:  # noqa: BLE001 - no input (nor a full disk) may end the receiver
            self._failed_by(err)
        finally:
            self._end(sel, t_start, common, meta)
        return res

    def _failed_by(self, err: BaseException) -> None:
        """An exception ended the run: status "failed", the reason in ``failure``."""
        what = _what(err)
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            what = f"the disk is full: {what}"
        self.res.status = "completed"       # _fail sets the status only on a run still going
        self._fail("failed", f"receiver error: {what}")

    def _end(self, sel, t_start: int, common: dict, meta: dict) -> None:
        """Close the run: every step on its own, so that one failing (a full disk) neither
        skips the others nor escapes: the receiver serves on."""
        res = self.res
        res.elapsed_s = (clock.now_ns() - t_start) / 1e9
        res.incomplete_packets += len(self.partial)
        res.held_at_end = len(self.held)

        def step(fn, *args):
            try:
                fn(*args)
            except Exception as err:  # noqa: BLE001
                if res.status in ("completed", "interrupted") or res.failure is None:
                    self._failed_by(err)
                else:
                    self.note(f"while ending the run: {_what(err)}")

        for sock in list(self.media_socks):
            step(self._close_media, sock)
        if self.quic is not None:
            step(self.quic.close)
            res.quic = dict(self.quic.stats)
            res.incomplete_packets += self.quic.stats["reset_partial_packets"]
        for sock in (self.ctl, self.udp):
            if sock.fileno() >= 0 and sock in sel.get_map():
                sel.unregister(sock)
        if self.writer is not None:
            step(self.writer.close)
        if res.status == "completed" and res.sender_end is not None:
            step(self._answer_end)
        elif res.failure is not None:
            step(self._abort)
        self.ctl.close()
        if self.run_dir is not None and self.got_media:
            meta.update(status=res.status, result=res.to_dict())
            try:
                update_run_metadata(self.run_dir, common, "receiver", meta)
            except Exception as err:  # noqa: BLE001 - run.json is written atomically or not at all
                self.note(f"run.json not updated: {_what(err)}")
                if res.status == "completed":
                    self._failed_by(err)

    def _check_bounds(self) -> None:
        """The run's bounds on what it reads (ReceiverConfig): past one, it ends "over-limit"."""
        cfg, res = self.cfg, self.res
        if res.bytes_in > cfg.max_run_bytes:
            self._fail("over-limit", f"the run read more than max_run_bytes ({cfg.max_run_bytes} B)")
        elif res.rtp_packets + res.keepalive_packets > cfg.max_run_packets:
            self._fail("over-limit", f"the run read more than max_run_packets ({cfg.max_run_packets})")

    def _quic_call(self, fn, *args):
        """A call into aioquic: an exception it raises on what a peer sent fails the run, with
        its reason, instead of the receiver (a forged packet once made aioquic raise)."""
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001
            self._fail("failed", f"QUIC: {_what(err)}")
            return None

    def _finished(self, now: int) -> bool:
        if self.ending_since is None:
            return False
        lingered = now - self.ending_since >= int(self.cfg.udp_linger_s * 1e9)
        if self.p.transport in ("quic-stream", "quic-frame-streams") \
                and not (self.res.sender_end or {}).get("drain_timeout"):
            return True     # the sender said "end" once all its stream data was acknowledged
        if self.p.transport == "tcp":
            if self.open_media == 0 and len(self.media) == self.p.connections:
                return True
            # After a drain timeout the sender resets its media connections; a reset is sent
            # once and is not repaired when lost (a full bottleneck queue, a lossy link), and
            # nothing else would come. What was in flight before it has had the linger to arrive.
            if lingered and (self.res.sender_end or {}).get("drain_timeout"):
                for sock in list(self.media_socks):
                    self.note(f"connection {self._index_of(sock)}: no reset arrived "
                                           f"{self.cfg.udp_linger_s:g} s after the sender's drain "
                                           "timeout (lost); closed")
                    self._close_media(sock)
                return True
            return False
        return lingered

    def _index_of(self, sock) -> int | str:
        return next((i for i, s in self.media.items() if s is sock), "?")

    def _abort(self) -> None:
        """Tell the sender that the run failed and why, within what the receiver may still
        answer (its hello's and end's bytes less the answers sent: no amplification)."""
        r = self.res
        budget = self.budget + (getattr(self, "_end_bytes", 0) or 0)
        data = control.answer({"type": "abort", "status": r.status, "reason": r.failure or ""}, budget)
        if not data or len(data) > budget:
            return
        self._send_ctl(data)

    def _answer_end(self) -> None:
        r = self.res
        summary = {"type": "summary", "received_packets": r.received_packets,
                   "received_bytes": r.received_bytes, "keepalive_packets": r.keepalive_packets,
                   "incomplete_packets": r.incomplete_packets, "duplicate_packets": r.duplicate_packets}
        self._send_ctl(control.answer(summary, self._end_bytes))

    def _send_ctl(self, data: bytes) -> None:
        """Send an answer on the control connection (blocking, 2 s at most); counted in bytes_out."""
        try:
            self.ctl.setblocking(True)
            self.ctl.settimeout(2.0)
            self.ctl.sendall(data)
            self.res.bytes_out += len(data)
        except OSError:
            pass

    def _read_ctl(self, reader: control.ControlReader, data: bytes | None = None) -> bool:
        res = self.res
        if data is None:
            data = control.read_ready(self.ctl)
            if data is None:
                return True
        if not data:
            if res.sender_end is None:
                res.status = "sender-disconnected"
                self.note("the sender closed the control connection before 'end'")
            if self.ctl in self.sel.get_map():
                self.sel.unregister(self.ctl)
            return False
        res.bytes_in += len(data)
        try:
            msgs = reader.feed(data)
        except control.ControlError as err:
            res.status = "sender-disconnected"
            self.note(f"control: {err}")
            return False
        for msg, n in msgs:
            res.control_messages += 1
            if res.control_messages > self.cfg.max_control_messages:
                self._fail("over-limit", f"control: more than max_control_messages "
                                         f"({self.cfg.max_control_messages}) messages")
                return False
            if msg.get("type") == "end" and res.sender_end is None:
                res.sender_end = {str(k)[:64]: v for k, v in msg.items() if k not in ("type", "pad")}
                self._end_bytes = n
                self.last_rx = self.ending_since = clock.now_ns()
                self._judge_cuts()
            else:
                self.note(f"control: unexpected {str(msg.get('type'))[:64]!r}")
        return True

    def _identified(self, msg: dict, n: int, rest: bytes, peer, sock: socket.socket) -> None:
        """A pending connection's first message: a media connection of this run, another
        sender's hello (told that the receiver is busy), or junk (closed)."""
        res = self.res
        index = msg.get("connection")
        if msg.get("type") == "hello":
            _reject(sock, f"busy with run {res.run_id}; try again when it has ended", n)
            sock.close()
            return
        if (msg.get("type") != "data" or msg.get("token") != self.token or peer[0] != self.peer_ip
                or not isinstance(index, int) or isinstance(index, bool)
                or not 0 <= index < self.p.connections or index in self.media):
            sock.close()
            return
        t_ns = clock.now_ns()
        self.last_rx = t_ns             # a media connection with the run's token
        res.bytes_in += n + len(rest)
        self._media_arrived()
        parser = FrameParser(min(self.cfg.max_message_bytes, self.p.max_packet_bytes), flow_id=self.flow)
        self.media[index] = sock
        self.media_socks.add(sock)
        self.open_media += 1
        res.media_connections += 1
        self.sel.register(sock, selectors.EVENT_READ, ("media", (index, parser)))
        if rest:
            self._feed(index, parser, sock, rest, t_ns)

    def _judge_cuts(self) -> None:
        """Streams cut mid-message are expected after the sender's drain timeout; once its
        "end" has come without one, they fail the run ("truncated")."""
        end = self.res.sender_end
        if not self.cut_streams or end is None:
            return
        if end.get("drain_timeout"):
            self.res.incomplete_packets += len(self.cut_streams)
            for c in self.cut_streams:
                self.note(f"{c} (reset after the sender's drain timeout)")
        else:
            for reason in self.cut_streams:
                self._fail("truncated", reason)
        self.cut_streams.clear()

    def _fail(self, status: str, reason: str) -> None:
        """The flow failed (its media stream is not what the sender sent): the run ends now,
        with this status and reason, and the sender is told (:meth:`_abort`)."""
        res = self.res
        if res.status == "completed":
            res.status = status
            res.failure = reason
        self.note(reason)

    def _feed(self, index: int, parser: FrameParser, sock, data, t_ns: int) -> None:
        try:
            pieces = parser.feed(data)
        except FramingError as err:
            for piece in err.before:       # what came before the bad bytes was the flow's
                self._piece(piece, index, t_ns)
            self._fail("corrupted", f"connection {index}: {err}")
            return
        for piece in pieces:
            self._piece(piece, index, t_ns)

    def _close_media(self, sock) -> None:
        if sock not in self.media_socks:
            return
        self.media_socks.discard(sock)
        self.sel.unregister(sock)
        sock.close()
        self.open_media -= 1

    def _read_media(self, sock: socket.socket, state) -> None:
        index, parser = state
        try:
            n = sock.recv_into(self.buf)
        except _BLOCKED:
            return
        except OSError as err:
            self.note(f"connection {index}: {err.strerror or err}")
            n = 0
        t_ns = clock.now_ns()
        if n == 0:
            try:
                parser.finish()
            except FramingError as err:
                # A stream cut mid-message is the sender's reset after a drain timeout (its
                # "end" says so, and may come after the reset): the cut message was not
                # delivered. Anything else fails the run.
                self.cut_streams.append(f"connection {index}: {err}")
                self._judge_cuts()
            self._close_media(sock)
            return
        self.res.bytes_in += n
        self._feed(index, parser, sock, self.view[:n], t_ns)

    def _read_udp(self) -> None:
        res = self.res
        udp = self.udp
        buf, view = self.buf, self.view
        for _ in range(_UDP_BATCH):
            try:
                n, addr = udp.recvfrom_into(buf)
            except _BLOCKED:
                return
            except OSError:
                return
            t_ns = clock.now_ns()
            if addr[0] != self.peer_ip:
                res.foreign_datagrams += 1
                continue
            if self.udp_src is not None and addr != self.udp_src:
                res.other_port_datagrams += 1     # not the flow's socket: never recorded
                continue
            res.bytes_in += n
            try:
                piece = decode(view[:n])
            except FramingError:
                res.foreign_datagrams += 1
                continue
            if piece.flow_id == self.flow:
                if self.udp_src is None:      # the flow's first datagram names its port
                    self.udp_src = addr
                if not self.got_media:
                    self._media_arrived()
            self._piece(piece, 0, t_ns)

    def _poll_s(self) -> float:
        """How long the loop may wait: its poll period, or less when QUIC's timer is due."""
        t = self.quic.timer_s() if self.quic is not None else None
        return _POLL_S if t is None else min(_POLL_S, t)

    def _read_quic(self) -> None:
        """QUIC datagrams from the sender (transport/quic_receiver.py), then the media they
        completed, each with the time it was read."""
        res, quic = self.res, self.quic
        for _ in range(_UDP_BATCH):
            try:
                n, addr = self.udp.recvfrom_into(self.buf)
            except (BlockingIOError, InterruptedError, OSError):
                break
            t_ns = clock.now_ns()
            if addr[0] != self.peer_ip or not self._quic_call(quic.receive, bytes(self.view[:n]), addr):
                res.foreign_datagrams += 1
                if res.status != "completed":
                    return
                continue
            res.bytes_in += n
            events = self._quic_call(quic.poll) or []
            if events or quic.stats["handshake_completed"] is not self._handshake_seen:
                self._handshake_seen = quic.stats["handshake_completed"]
                self.last_rx = t_ns             # the connection moved on (not a stray packet)
            for ev in events:
                if ev[0] == "piece":
                    if not self.got_media:
                        self._media_arrived()
                        res.media_connections = 1
                    self._piece(ev[1], 0, t_ns)
                else:
                    self._fail(ev[1], ev[2])
            if res.status != "completed":
                return
        self._quic_call(quic.flush)
        if quic.terminated and res.sender_end is None and res.status == "completed":
            res.status = "sender-disconnected"
            res.errors.append(quic.terminated)

    def _drain_stale_udp(self) -> None:
        for _ in range(100_000):
            try:
                self.udp.recvfrom_into(self.buf)
            except (BlockingIOError, InterruptedError, OSError):
                return

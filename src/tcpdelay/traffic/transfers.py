"""Timed transfers: connection and transfer latency as Cardwell, Savage and Anderson measure it
("Modeling TCP Latency", INFOCOM 2000, §II-C, §II-D, §III-IV).

A client on the receiving side opens ``transfers`` connections one after another (each
``gap_s`` after the previous one closed) to a server on the sending side, and asks each for
``size_bytes``. Data flows server -> client, as a download does, so the path's *forward*
direction is the paper's ``p_f`` (the SYN/ACK and data direction, passive -> active opener) and
its *reverse* direction the paper's ``p_r`` (the SYN direction).

Per transfer (one row, the same on the testbed and in ns-3):

* ``handshake_s`` — from the client's ``connect()`` to the connection being established at the
  client (the SYN/ACK's arrival), §II-C's ``L_h``;
* ``transfer_s`` — from the server application's first write of the response to the
  acknowledgement of its last byte (§II-D: "a data transfer begins when an application places
  data in its send buffer and ends when TCP receives an acknowledgment for the last byte");
  on Linux the server polls ``TCP_INFO`` (``tcpi_bytes_acked``) every ``poll_s`` (1 ms) while
  it writes, so the end is known to within a poll;
* ``retransmits`` (segments), ``rtos`` (timeouts) over the transfer: differences of
  ``tcpi_total_retrans`` and ``tcpi_total_rto`` between the first write and the end (ns-3: the
  socket's ``Tx`` trace and entries into ``CA_LOSS``); ``recoveries``: entries into fast
  recovery (Linux: the ``tcpi_ca_state`` polls, so an episode shorter than a poll would be
  missed; ns-3: the ``CongState`` trace, exact);
* ``class`` — papers/001's classes (§IV-B, Figs 11-13): :func:`classify`.

The timers and classes are pure functions of the samples (:func:`transfer_done_s`,
:func:`recovery_episodes`, :func:`classify`), tested against hand-built timelines.
"""

from __future__ import annotations

import errno
import socket
import time

from tcpdelay.errors import ParameterError
from tcpdelay.start_gate import Deadline, Instant, start_instant
from tcpdelay.traffic.response_server import (
    REQUEST,
    TIMESTAMP_OPTION_BYTES,
    _recv_exact,
    connect,
    decode_request,
    encode_request,
)
from tcpdelay.transport import tcp_state

#: papers/001's transfer classes: no retransmission; fast retransmit / recovery only; >= 1 RTO.
CLASSES = ("no_loss", "fast_retransmit", "rto")
#: How often the server reads TCP_INFO while a transfer is under way (s).
POLL_S = 0.001
#: ``tcpi_ca_state`` of fast recovery (include/uapi/linux/tcp.h: TCP_CA_Recovery).
CA_RECOVERY = 3
WRITE_BYTES = 65_535
#: How long the server waits for a request on a connection it accepted (s). A request lost on a
#: lossy path comes again after the client's RTO, which after a retransmitted SYN starts at 3 s
#: (RFC 6298 §5.7; Linux's TCP_TIMEOUT_FALLBACK) and doubles: 3 + 6 + 12 + 24 s covers four
#: losses in a row. (At 5 s, Fig 3's Linux run lost 19 of 1000 transfers after their handshake:
#: a SYN retransmitted and the request lost twice.)
REQUEST_WAIT_S = 60.0
#: With a window clamp the client locks its receive buffer (SO_RCVBUF) at this many times the
#: clamp. Linux's receive-buffer autotuning otherwise overrides a TCP_WINDOW_CLAMP both ways:
#: at connect the clamp is cut to what the initial buffer holds (65 000 bytes for any larger
#: clamp), and as the buffer grows the clamp follows it (tcp_rcv_space_adjust: "make the window
#: clamp follow along") — 128 segments of 536 bytes advertised 244. A locked buffer turns
#: autotuning off; twice the clamp (which the kernel doubles again) holds the clamped window.
CLAMP_RCVBUF_FACTOR = 2


def classify(retransmits: int | None, rtos: int | None) -> str | None:
    """papers/001's class of a transfer from its counters: ``rto`` with at least one
    retransmission timeout, ``fast_retransmit`` with retransmissions but no timeout (losses
    repaired by triple-duplicate-ACK recovery), ``no_loss`` with none; ``None`` when a counter
    is unknown. A retransmission the receiver did not need (a spurious one) still counts: the
    sender's view is the paper's."""
    if retransmits is None or rtos is None:
        return None
    if retransmits < 0 or rtos < 0:
        raise ParameterError(f"counters must be >= 0 (retransmits {retransmits}, rtos {rtos})")
    if rtos > 0:
        return "rto"
    return "fast_retransmit" if retransmits > 0 else "no_loss"


def transfer_done_s(times_s, acked_bytes, size_bytes: int) -> float | None:
    """The first sample time at which ``acked_bytes`` reached ``size_bytes`` (the last byte's
    ACK, as seen at the sampling resolution); ``None`` if it never did. Samples in time order."""
    if size_bytes < 1:
        raise ParameterError(f"size_bytes: {size_bytes} must be >= 1")
    last = float("-inf")
    for t, acked in zip(times_s, acked_bytes):
        if t < last:
            raise ParameterError("samples must be in time order")
        last = t
        if acked >= size_bytes:
            return float(t)
    return None


def recovery_episodes(ca_states) -> int:
    """Entries into fast recovery (``CA_RECOVERY``) in a sequence of ``ca_state`` samples."""
    n, before = 0, None
    for s in ca_states:
        if s == CA_RECOVERY and before != CA_RECOVERY:
            n += 1
        before = s
    return n


def _delta(after: dict, before: dict, key: str) -> int | None:
    if after.get(key) is None or before.get(key) is None:
        return None
    return int(after[key]) - int(before[key])


def serve(port: int, *, duration_s: float, host: str = "0.0.0.0", poll_s: float = POLL_S,
          mss_bytes: int | None = None, expect: int | None = None, tcp_state_dir: str | None = None,
          tcp_state_period_s: float = 0.0, flow_id: int = -1, start_at: Instant = None) -> dict:
    """Answer transfer requests (:mod:`.response_server`'s request format, sized responses
    only) one connection at a time for ``duration_s`` seconds from ``start_at`` (now; or a run's
    start, fixed later: :class:`tcpdelay.start_gate.Deadline`), timing each (module doc).
    ``mss_bytes`` caps the payload per segment both ways (``TCP_MAXSEG`` of ``mss_bytes`` plus
    the 12-byte timestamp option on the listener, so each SYN/ACK advertises it); a row's
    ``mss_bytes`` is the kernel's ``tcpi_snd_mss``, what it actually sent.

    With ``expect`` (the client's ``transfers``) the server also stops once it has accepted and
    answered that many connections: the client opens one connection per transfer and never two,
    so the count is reached only when its last transfer is done, and a run of transfers alone
    ends when they are (``duration_s`` stays the limit: a transfer whose handshake never
    completed is never accepted, and then the server listens to the end).

    With ``tcp_state_dir`` and ``tcp_state_period_s`` > 0 the server also samples each
    transfer's ``TCP_INFO`` at that period into ``tcp_state`` records there
    (:mod:`tcpdelay.transport.tcp_state_sampler`; the sender's window over time, as ns-3's probe
    records it): a record's ``flow_id`` is ``flow_id``, its ``connection`` the transfer's count
    (0, 1, ...) among the connections the server accepted.

    Returns ``{"transfers": [{"peer_port", "size_bytes", "bytes", "transfer_s", "retransmits",
    "rtos", "recoveries", "synack_retransmits", "mss_bytes", "peer_window_max_bytes" (the largest
    window the client advertised, ``tcpi_snd_wnd`` at the polls), "peer_window_last_bytes" (the
    window it advertised last, when the transfer was done: the one in force), "rwnd_limited_s",
    "sndbuf_limited_s", "complete"}...], "rejected",
    "errors"}``.
    """
    if not duration_s > 0:
        raise ParameterError(f"duration_s: {duration_s} must be > 0")
    if not 0 < poll_s <= 0.1:
        raise ParameterError(f"poll_s: {poll_s} must be in (0, 0.1]")
    if expect is not None and expect < 1:
        raise ParameterError(f"expect: {expect} must be >= 1 (the client's transfers)")
    end = Deadline(start_at, duration_s)
    accepted = 0
    sampler = state_writer = None
    if tcp_state_dir is not None and tcp_state_period_s > 0:
        from tcpdelay.records import RecordWriter
        from tcpdelay.transport.tcp_state_sampler import TcpStateSampler

        state_writer = RecordWriter(tcp_state_dir, "tcp_state", writer_id=f"transfers-{flow_id}-{port}")
        sampler = TcpStateSampler(state_writer, tcp_state_period_s)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if mss_bytes:
        if mss_bytes < 1:
            raise ParameterError(f"mss_bytes: {mss_bytes} must be >= 1")
        srv.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss_bytes + TIMESTAMP_OPTION_BYTES)
    srv.bind((host, port))
    srv.listen(16)
    srv.settimeout(0.1)
    out: dict = {"transfers": [], "rejected": 0, "errors": []}
    try:
        while time.monotonic() < end.value() and (expect is None or accepted < expect):
            try:
                conn, peer = srv.accept()
            except socket.timeout:
                continue
            accepted += 1
            try:
                row = _one_transfer(conn, peer[1], end.value(), poll_s,
                                    None if sampler is None else (sampler, flow_id, accepted - 1))
                if row is None:
                    out["rejected"] += 1
                else:
                    out["transfers"].append(row)
            except OSError as err:
                if err.errno not in (errno.EPIPE, errno.ECONNRESET) and len(out["errors"]) < 20:
                    out["errors"].append(f"{type(err).__name__}: {err}")
            finally:
                conn.close()
    finally:
        srv.close()
        if state_writer is not None:
            state_writer.close()
    return out


def _one_transfer(conn: socket.socket, peer_port: int, deadline: float, poll_s: float,
                  state: tuple | None = None) -> dict | None:
    """Answer one connection's request and time it; ``state`` = (sampler, flow_id, connection)
    samples its TCP_INFO while the transfer is under way."""
    conn.settimeout(max(0.01, min(REQUEST_WAIT_S, deadline - time.monotonic())))
    try:
        size, dur, _, cc, gap, _ = decode_request(_recv_exact(conn, REQUEST.size))
    except ValueError:
        return None
    if size is None or dur or gap:
        return None
    if cc:
        tcp_state.set_congestion_control(conn, cc)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.setblocking(False)
    before = tcp_state.tcp_info_raw(conn)
    payload = memoryview(b"\x5a" * WRITE_BYTES)
    times, acked, ca = [], [], []
    sent, t_write, done = 0, time.monotonic(), None
    info = before
    window = int(before.get("snd_wnd") or 0)   # the largest window the client advertised
    while time.monotonic() < deadline:
        wrote = 0
        if sent < size:
            try:
                wrote = conn.send(payload[: min(WRITE_BYTES, size - sent)])
                sent += wrote
            except (BlockingIOError, InterruptedError):
                pass
        now = time.monotonic()
        if state is not None and (now_ns := time.monotonic_ns()) >= state[0].due_ns():
            state[0].sample([(state[1], state[2], conn)], now_ns)
        info = tcp_state.tcp_info_raw(conn)
        times.append(now - t_write)
        acked.append(int(info.get("bytes_acked") or 0))
        ca.append(int(info["ca_state"]))
        window = max(window, int(info.get("snd_wnd") or 0))
        done = transfer_done_s(times[-1:], acked[-1:], size)
        if done is not None:
            break
        if not wrote:
            time.sleep(poll_s)
    retx, rtos = _delta(info, before, "total_retrans"), _delta(info, before, "total_rto")
    row = {"peer_port": peer_port, "size_bytes": size, "bytes": sent, "transfer_s": done,
           "retransmits": retx, "rtos": rtos, "recoveries": recovery_episodes(ca),
           "synack_retransmits": int(before["total_retrans"]), "mss_bytes": int(info["snd_mss"]),
           "peer_window_max_bytes": window or None,
           "peer_window_last_bytes": int(info.get("snd_wnd") or 0) or None, "complete": done is not None}
    # time the sender could not send for the receiver's window or its own send buffer (s)
    for key in ("rwnd_limited", "sndbuf_limited"):
        us = _delta(info, before, f"{key}_us")
        row[f"{key}_s"] = None if us is None else us / 1e6
    conn.setblocking(True)
    conn.settimeout(max(0.01, min(2.0, deadline - time.monotonic())))
    try:    # the client closes once it read everything: it may be gone already (ENOTCONN)
        conn.shutdown(socket.SHUT_WR)
        while conn.recv(4096):
            pass
    except (socket.timeout, OSError):
        pass
    return row


def client(server_address: str, port: int, *, size_bytes: int, transfers: int, gap_s: float,
           duration_s: float, timeout_s: float = 120.0, start_at: Instant = None,
           congestion_control: str | None = None, mss_bytes: int | None = None,
           window_clamp_bytes: int | None = None) -> dict:
    """``transfers`` transfers of ``size_bytes``, each on a fresh connection opened ``gap_s``
    after the previous one closed, from ``start_at`` (``time.monotonic()`` instant, default
    now) until all are done or ``start_at + duration_s``; a transfer not done ``timeout_s``
    after its ``connect()`` is given up (incomplete) and the next one starts. ``mss_bytes``
    (payload per segment: ``TCP_MAXSEG`` plus the timestamp option) and ``window_clamp_bytes``
    (``TCP_WINDOW_CLAMP``: the most this receiver advertises) are set before each connect.

    Returns ``{"start_s", "transfers": [{"index", "local_port", "open_s" (from start_s),
    "handshake_s", "done_s" (the client read the last byte, from start_s), "bytes",
    "syn_retransmits", "window_clamp_bytes" (read back from the kernel at the transfer's end),
    "complete"}...],
    "bytes", "complete"}``.
    """
    if size_bytes < 1 or transfers < 1 or gap_s < 0 or not duration_s > 0 or not timeout_s > 0:
        raise ParameterError(f"size_bytes {size_bytes}, transfers {transfers}, gap_s {gap_s}, duration_s "
                             f"{duration_s}: need size_bytes >= 1, transfers >= 1, gap_s >= 0, duration_s > 0")
    start = start_instant(start_at)   # a run's gate: ready, then its start (tcpdelay.start_gate)
    while (left := start - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
    deadline = start + duration_s
    request = encode_request(size_bytes, None, WRITE_BYTES, congestion_control)
    rows: list[dict] = []
    buf = bytearray(256 * 1024)
    for k in range(transfers):
        if time.monotonic() >= deadline:
            break
        t_open = time.monotonic()
        row = {"index": k, "local_port": None, "open_s": t_open - start, "handshake_s": None, "done_s": None,
               "bytes": 0, "syn_retransmits": None, "complete": False}
        rows.append(row)
        until = min(deadline, t_open + timeout_s)
        try:
            # the first connection may find the server not listening yet: retried (refused
            # connections are fast and not handshakes; their time is not counted)
            s = connect(server_address, port, deadline=until, segment_bytes=mss_bytes,
                        window_clamp_bytes=window_clamp_bytes,
                        rcvbuf_bytes=CLAMP_RCVBUF_FACTOR * window_clamp_bytes if window_clamp_bytes else None)
        except OSError as err:
            row["error"] = f"connect: {err}"
            continue
        t_up = time.monotonic()
        row["handshake_s"] = t_up - t_open
        try:
            row["local_port"] = s.getsockname()[1]
            row["syn_retransmits"] = int(tcp_state.tcp_info_raw(s)["total_retrans"])
            s.sendall(request)
            while (left := until - time.monotonic()) > 0:
                s.settimeout(left)
                n = s.recv_into(buf)
                if window_clamp_bytes and n and not row["bytes"]:
                    # Set the clamp again after the first read. Linux (6.x, tcp_measure_rcv_mss)
                    # replaces it with what the receive buffer holds (tcp_win_from_space of
                    # sk_rcvbuf) when the first data segment longer than its initial receive-MSS
                    # estimate (536 bytes) changes its payload-to-memory ratio, locked buffer or
                    # not: with an MSS above 536 the clamp set before connect is lost at the first
                    # segment (MSS 4312, 8 segments: 15 advertised). Set again, it holds to the
                    # end; the ACKs of segments that came before this read may have advertised
                    # more already (a window's right edge never retreats), for about one round.
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, window_clamp_bytes)
                row["bytes"] += n
                if n == 0 or row["bytes"] >= size_bytes:   # all read: no need to wait for the FIN
                    row["complete"] = row["bytes"] >= size_bytes
                    break
        except (OSError, socket.timeout) as err:
            row["error"] = str(err)
        finally:
            if window_clamp_bytes:
                try:   # the clamp in force at the end of the transfer
                    row["window_clamp_bytes"] = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP)
                except OSError:
                    pass
            s.close()
        row["done_s"] = time.monotonic() - start
        if gap_s:
            time.sleep(min(gap_s, max(0.0, deadline - time.monotonic())))
    return {"start_s": start, "transfers": rows, "bytes": sum(r["bytes"] for r in rows),
            "complete": len(rows) == transfers and all(r["complete"] for r in rows)}


def merge(client_rows: list[dict], server_rows: list[dict]) -> list[dict]:
    """One row per transfer: the client's (handshake) joined with the server's (transfer timer
    and counters) by the client's port, and its :func:`classify` class. A transfer the server
    never timed keeps ``None`` in the server's columns."""
    by_port = {r["peer_port"]: r for r in server_rows}
    out = []
    for c in client_rows:
        s = by_port.get(c.get("local_port"), {})
        row = {k: c.get(k) for k in ("index", "open_s", "handshake_s", "done_s", "bytes", "syn_retransmits")}
        if "window_clamp_bytes" in c:
            row["window_clamp_bytes"] = c["window_clamp_bytes"]
        for k in ("transfer_s", "retransmits", "rtos", "recoveries", "synack_retransmits", "mss_bytes",
                  "peer_window_max_bytes", "peer_window_last_bytes", "rwnd_limited_s", "sndbuf_limited_s"):
            row[k] = s.get(k)
        row["complete"] = bool(c.get("complete")) and bool(s.get("complete"))
        row["class"] = classify(row["retransmits"], row["rtos"])
        out.append(row)
    return out

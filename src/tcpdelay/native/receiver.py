"""A media receiver whose per-packet loop runs in the native endpoint (:mod:`tcpdelay.native`).

:func:`run_native_receiver` is :func:`tcpdelay.transport.run_receiver` for TCP and UDP with the
media reading handed to ``tcpdelay-endpoint``: listening, the pending connections, the hello and
accept, the media connections' first message (token, index), "end", the summary, the abort and
run.json stay here, in the same code (:mod:`tcpdelay.transport.receiver`'s ``_handshake`` and
``_Run``); once a run is accepted its UDP socket, and each media connection once identified
(with any bytes that followed its first message), go to the endpoint, which reads, checks and
records every packet ("read" delivery) and reports the first media, each connection's end, a
corrupted stream, and on "finish" the counts. Its ``received`` records come back as a raw file
converted to the same Parquet part.

Which instant a packet's ``recv_time_s`` is: UDP, the kernel's software receive stamp of the
datagram (SO_TIMESTAMPING, moved onto CLOCK_MONOTONIC); TCP, the CLOCK_MONOTONIC reading right
after the read that made the packet's last byte available to the application in order (as
receiver.py's), docs/native-endpoint.md.
"""

from __future__ import annotations

import selectors
import threading

from tcpdelay.errors import ParameterError
from tcpdelay.native.engine import NativeEndpointError, NativeEngine
from tcpdelay.native.rawrecords import convert_received, raw_path
from tcpdelay.transport import clock, control
from tcpdelay.transport.config import ReceiverConfig
from tcpdelay.transport.pending import Pending
from tcpdelay.transport.receiver import ReceiverResult, _bind, _handshake, _Run
from tcpdelay.transport.runmeta import update_run_metadata

from pathlib import Path

#: How long a run's control loop sleeps at most (s) when no deadline is nearer (control
#: messages, connections, the endpoint's events and the group's interrupt wake it at once).
_POLL_S = 2.0
#: The same while waiting for a run's hello (no events yet: ``stop`` is looked at this often).
_ACCEPT_POLL_S = 0.5


def run_native_receiver(config: ReceiverConfig, engine: NativeEngine, *,
                        stop: threading.Event | None = None) -> list[dict]:
    """Serve ``config.runs`` runs (0: until ``stop``) with the media read by ``engine``; each
    run's result as a dict (:class:`ReceiverResult`'s keys, ``endpoint`` "native",
    ``recv_lag_us`` {p99, max, count}: user-space read − kernel receive stamp, µs, and
    ``recv_time`` naming the instant recorded)."""
    per_run = config.per_run_dirs if config.per_run_dirs is not None else config.runs != 1
    if config.out_dir is None:
        raise ParameterError("the native endpoint needs an output directory (its records go there)")
    if not per_run:
        received = Path(config.out_dir) / "received"
        if received.exists() and any(received.glob("part-*.parquet")):
            raise ParameterError(f"out: {config.out_dir} already holds 'received' records of "
                                 "another run; choose a new directory")
    lst, udp, addr = _bind(config)
    sel = selectors.DefaultSelector()
    pending = Pending(sel, config.max_pending, config.handshake_timeout_s)
    sel.register(lst, selectors.EVENT_READ, ("listen", None))
    results: list[dict] = []
    try:
        while config.runs == 0 or len(results) < config.runs:
            if stop is not None and stop.is_set():
                break
            wait = pending.next_deadline_s()
            served = None
            for key, _ in sel.select(_ACCEPT_POLL_S if wait is None else min(_ACCEPT_POLL_S, wait)):
                kind, _ = key.data
                if kind == "listen":
                    pending.accept_all(lst)
                    continue
                got = pending.read(key.fileobj)
                if got is None:
                    continue
                run = _handshake(config, lst, udp, got, stop, None, single=not per_run)
                if run is None:
                    continue
                if run.p.transport not in ("tcp", "udp") or run.p.delivery != "read":
                    run.res.status = "sender-disconnected"
                    run.res.errors.append(f"the native endpoint does not receive {run.p.transport} "
                                          f"with delivery {run.p.delivery!r}")
                    run.ctl.close()
                    served = run
                    break
                served = _NativeRun(run, engine, sel, pending).loop()
                break
            if served is not None:
                res = served if isinstance(served, dict) else served.res.to_dict()
                if res.get("_abandoned"):
                    res.pop("_abandoned")
                else:
                    results.append(res)
                if res["status"] == "interrupted":
                    return results
            pending.expire()
    except KeyboardInterrupt:
        pass
    finally:
        pending.close_all()
        sel.close()
        lst.close()
        udp.close()
    return results


class _NativeRun:
    """One accepted run (:class:`~tcpdelay.transport.receiver._Run`, set up by ``_handshake``)
    whose media the endpoint reads; this loop reads the control connection, identifies media
    connections and waits for the endpoint's events."""

    def __init__(self, run: _Run, engine: NativeEngine, sel, pending: Pending):
        self.run, self.engine, self.sel, self.pending = run, engine, sel, pending
        res = run.res
        self.key = f"rx:{run.flow}:{res.run_id}"
        self.writer_id = f"receiver-{res.run_id}"
        self.raw = raw_path(run.run_dir, "received", self.writer_id) if run.run_dir is not None else None

    def _media_arrived(self) -> None:
        run = self.run
        if run.got_media:
            return
        run.got_media = True
        if run.run_dir is not None:
            update_run_metadata(run.run_dir, run.common, "receiver", {**run.meta, "endpoint": "native"})

    def loop(self) -> dict:
        run, res, p, engine = self.run, self.run.res, self.run.p, self.engine
        cfg, sel, pending = run.cfg, self.sel, self.pending
        run.sel, run.pending = sel, pending
        run.ctl.setblocking(False)
        reader = control.ControlReader()
        sel.register(run.ctl, selectors.EVENT_READ, ("ctl", reader))
        run.media, run.media_socks, run.cut_streams = {}, set(), []
        run.open_media, run.ending_since = 0, None
        events = engine.events(self.key)
        sel.register(events, selectors.EVENT_READ, ("events", None))
        tcp = p.transport == "tcp"
        max_msg = min(cfg.max_message_bytes, p.max_packet_bytes)
        self.raw.parent.mkdir(parents=True, exist_ok=True)
        engine.command({"cmd": "recv", "key": self.key, "flow_id": p.flow_id, "transport": p.transport,
                        "records": str(self.raw), "peer": run.peer_ip, "max_message_bytes": max_msg,
                        "idle_timeout_ns": int(cfg.idle_timeout_s * 1e9)},
                       [] if tcp else [run.udp.fileno()])
        t_start = clock.now_ns()
        run.last_rx = t_start           # the control connection's last message (run._read_ctl)
        hard_end = t_start + int((p.duration_s + 2 * cfg.idle_timeout_s + 60) * 1e9)
        native: dict | None = None
        try:
            if run.ctl_rest:
                run._read_ctl(reader, run.ctl_rest)
            while res.status == "completed":
                now = clock.now_ns()
                if run.stop is not None and run.stop.is_set():
                    res.status = "interrupted"
                    break
                self._events(events, block=False)
                if res.status != "completed" or self._finished(now):
                    break
                if now > hard_end:
                    res.status = "idle-timeout"
                    res.errors.append("the run outlasted its duration by far")
                    break
                wait = min(_POLL_S, (hard_end - now) / 1e9)
                if (due := pending.next_deadline_s()) is not None:
                    wait = min(wait, due)
                if run.ending_since is not None:     # the linger after "end" runs out
                    wait = min(wait, (run.ending_since + int(cfg.udp_linger_s * 1e9) - now) / 1e9)
                for key, _ in sel.select(max(0.0, wait) + 0.001):
                    kind, state = key.data
                    if kind == "events":
                        self._events(events, block=False)
                    elif kind == "pending":
                        got = pending.read(key.fileobj)
                        if got is not None:
                            self._identified(*got)
                    elif kind == "listen":
                        pending.accept_all(run.lst)
                    elif kind == "ctl":
                        if not run._read_ctl(state):
                            break
                    if res.status != "completed":
                        break
                pending.expire()
        except KeyboardInterrupt:
            res.status = "interrupted"
        finally:
            res.elapsed_s = (clock.now_ns() - t_start) / 1e9
            try:
                engine.command({"cmd": "finish", "key": self.key})
                native = self._until_result(events)
            except NativeEndpointError as err:
                native_err = err
            else:
                native_err = None
            if self.raw is not None:
                convert_received(self.raw, run.run_dir, self.writer_id)
            if native is not None:
                self._apply(native)
            for sock in list(run.media_socks):
                sock.close()
            if run.ctl in sel.get_map():
                sel.unregister(run.ctl)
            sel.unregister(events)
            engine.forget(self.key)
            if native_err is not None:          # the endpoint died: the run failed, named
                res.status = "sender-disconnected" if res.status == "completed" else res.status
                res.failure = str(native_err)
                res.errors.append(str(native_err))
            if res.status == "completed" and res.sender_end is not None:
                run._answer_end()
            elif res.failure is not None:
                run._abort()
            run.ctl.close()
            if run.run_dir is not None and run.got_media:
                run.meta.update(status=res.status, result=res.to_dict(), endpoint="native")
                update_run_metadata(run.run_dir, run.common, "receiver", run.meta)
        if native_err is not None:
            raise native_err
        out = res.to_dict()
        out["endpoint"] = "native"
        out["recv_lag_us"] = (native or {}).get("recv_lag_us", {"p99": None, "max": None, "count": 0})
        out["recv_time"] = "kernel-rx-stamp" if p.transport == "udp" else "read"
        if not run.got_media and res.status != "completed":
            out["_abandoned"] = True
        return out

    def _apply(self, native: dict) -> None:
        res = self.run.res
        for k in ("received_packets", "received_bytes", "rtp_packets", "keepalive_packets", "duplicate_packets",
                  "foreign_datagrams", "first_recv_time_s", "last_recv_time_s"):
            setattr(res, k, native.get(k))
        res.incomplete_packets += int(native.get("incomplete_packets", 0))
        res.bytes_in += int(native.get("bytes_in", 0))

    def _until_result(self, events) -> dict:
        while True:
            ev = events.get(timeout=30.0)
            if ev.get("event") == "died":
                raise NativeEndpointError(ev["error"])
            if ev.get("event") == "result":
                return ev
            if ev.get("event") != "idle":       # (the run has ended: idleness no longer matters)
                self._event(ev)

    def _events(self, events, block: bool) -> None:
        while True:
            try:
                ev = events.get_nowait()
            except Exception:  # noqa: BLE001 - queue.Empty
                return
            if ev.get("event") == "died":
                raise NativeEndpointError(ev["error"])
            self._event(ev)

    def _event(self, ev: dict) -> None:
        run = self.run
        kind = ev.get("event")
        if kind == "media":
            self._media_arrived()
        elif kind == "eof":
            run.open_media -= 1
            sock = run.media.get(ev.get("index"))
            if sock is not None and sock in run.media_socks:
                run.media_socks.discard(sock)
                sock.close()
            if ev.get("cut"):
                run.cut_streams.append(ev["cut"])
                run._judge_cuts()
        elif kind == "error":
            run.res.errors.append(ev.get("error", ""))
        elif kind == "idle":            # no media for idle_timeout_s: no control either?
            if clock.now_ns() - run.last_rx > int(run.cfg.idle_timeout_s * 1e9) and run.res.status == "completed":
                run.res.status = "idle-timeout"
                run.res.errors.append(f"nothing from the sender for {run.cfg.idle_timeout_s:g} s")
        elif kind == "corrupted":
            run._fail("corrupted", ev.get("reason", ""))

    def _finished(self, now: int) -> bool:
        run = self.run
        if run.ending_since is None:
            return False
        lingered = now - run.ending_since >= int(run.cfg.udp_linger_s * 1e9)
        if run.p.transport == "tcp":
            if run.open_media == 0 and len(run.media) == run.p.connections:
                return True
            if lingered and (run.res.sender_end or {}).get("drain_timeout"):
                for i, sock in run.media.items():
                    if sock in run.media_socks:
                        run.res.errors.append(f"connection {i}: no reset arrived {run.cfg.udp_linger_s:g} s "
                                              "after the sender's drain timeout (lost); closed")
                return True
            return False
        return lingered

    def _identified(self, msg: dict, n: int, rest: bytes, peer, sock) -> None:
        """A pending connection's first message: a media connection of this run goes to the
        endpoint (with what followed its first message); another hello is told the receiver is
        busy; anything else is closed (receiver.py's ``_identified``)."""
        run, res = self.run, self.run.res
        index = msg.get("connection")
        if msg.get("type") == "hello":
            from tcpdelay.transport.receiver import _reject
            _reject(sock, f"busy with run {res.run_id}; try again when it has ended", n)
            sock.close()
            return
        if (msg.get("type") != "data" or msg.get("token") != run.token or peer[0] != run.peer_ip
                or not isinstance(index, int) or isinstance(index, bool)
                or not 0 <= index < run.p.connections or index in run.media):
            sock.close()
            return
        res.bytes_in += n
        self._media_arrived()
        run.media[index] = sock
        run.media_socks.add(sock)
        run.open_media += 1
        res.media_connections += 1
        self.engine.command({"cmd": "conn", "key": self.key, "index": index, "rest_hex": bytes(rest).hex()},
                            [sock.fileno()])

"""A media sender whose per-packet loop runs in the native endpoint (:mod:`tcpdelay.native`).

:func:`run_native_sender` is :func:`tcpdelay.transport.sender.run_socket_sender` with its step 3
(every packet, at its time) and the drain handed to ``tcpdelay-endpoint``: the control exchange,
the media connections (their socket options), run.json, the TCP state sampling (in this thread,
on the same sockets) and the end of the run (FIN or reset, "end", the summary) stay here, in the
same code. The flow's schedule is computed here first (a source is a pure schedule) and written
to a file the endpoint reads; its ``sent`` records come back as a raw file converted to the same
Parquet part on the way out, whatever ended the run.
"""

from __future__ import annotations

import select
import socket
import threading
import time

from tcpdelay.native.engine import NativeEndpointError, NativeEngine
from tcpdelay.native.rawrecords import convert_sent, raw_path, write_schedule
from tcpdelay.records import RecordWriter
from tcpdelay.start_gate import Instant, StartAt, start_instant
from tcpdelay.transport import clock, control, netstat
from tcpdelay.transport.cc_state import CcStateMap
from tcpdelay.transport.config import SenderConfig
from tcpdelay.transport.runmeta import update_run_metadata
from tcpdelay.transport.sender import (SenderError, SenderResult, _Conn, _connect_control, _info_summary,
                                       _late_abort, _LoopSettings, _offer_run, _open_tcp, _prepare_run,
                                       _receiver_failed, _SendRun)
from tcpdelay.transport.sockopts import apply_buffers, read_back
from tcpdelay.transport.tcp_state_sampler import TcpStateSampler

#: How long the waiting thread sleeps at most (s) before it looks at ``stop`` (the endpoint's
#: events, the control connection and the group's interrupt, an event too, wake it at once).
_POLL_S = 2.0


def run_native_sender(config: SenderConfig, source, engine: NativeEngine, *,
                      stop: threading.Event | None = None, start_at: Instant = None) -> dict:
    """Send ``source`` as :func:`~tcpdelay.transport.run_sender` does, its packets sent by
    ``engine``; returns the result as a dict (:class:`SenderResult`'s keys, ``endpoint``
    "native" and ``send_lateness_us`` {p99, max, count}: actual send − scheduled, µs)."""
    cfg = config
    rp, run_id, run_dir = _prepare_run(cfg, source)
    if rp.transport not in ("tcp", "udp"):
        raise SenderError(f"the native endpoint does not send {rp.transport}")
    interval_s = float(getattr(source, "nominal_interval_s", 0.02))
    deadline = time.monotonic() + cfg.connect_timeout_s
    key = f"tx:{rp.flow_id}:{run_id}"
    counters_start = netstat.tcp_counters()
    ctl = _connect_control(cfg, deadline)
    conns: list[_Conn] = []
    state_writer = cc_map = sampler = None
    native: dict = {}
    raw = schedule = None
    writer_id = f"sender-{run_id}"
    result = SenderResult(run_id=run_id, run_dir=str(run_dir) if run_dir else None,
                          status="completed", clock=clock.UNSYNCHRONIZED, transport=rp.transport,
                          connections=rp.connections, scheduler=cfg.scheduler, split=rp.split,
                          source=rp.source, duration_s=rp.duration_s)
    meta: dict = {}
    common: dict = {}
    try:
        reply = _offer_run(ctl, cfg, rp, run_id, deadline)
        token = reply.get("token")
        if not isinstance(token, str) or len(token) != 2 * control.TOKEN_BYTES:
            raise SenderError("receiver's accept carries no valid token")
        result.clock = reply.get("clock") if reply.get("clock") in (clock.SHARED, clock.UNSYNCHRONIZED) \
            else clock.UNSYNCHRONIZED
        peer = ctl.getpeername()[:2]
        if rp.transport == "tcp":
            for i in range(rp.connections):
                conns.append(_Conn(i, _open_tcp(cfg, peer, i, token, deadline + 5.0), True))
        else:
            us = socket.socket(socket.AF_INET6 if ":" in peer[0] else socket.AF_INET, socket.SOCK_DGRAM)
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
                "socket_options": result.socket_options, "status": "running", "endpoint": "native"}
        if run_dir is None:
            raise SenderError("the native endpoint needs an output directory (its records go there)")
        update_run_metadata(run_dir, common, "sender", meta)
        if rp.transport == "tcp" and cfg.tcp_state_period_s > 0:
            if cfg.cc_state_map_id is not None:
                cc_map = CcStateMap(cfg.cc_state_map_id)
            state_writer = RecordWriter(run_dir, "tcp_state", writer_id=writer_id)
            sampler = TcpStateSampler(state_writer, cfg.tcp_state_period_s, cc_map)
        schedule = raw_path(run_dir, "schedule", writer_id)
        write_schedule(schedule, source, rp.duration_s, cfg.seed)
        raw = raw_path(run_dir, "sent", writer_id)
        if isinstance(start_at, StartAt):
            start_at = start_instant(start_at, stop)
        start_ns = int(start_at * 1e9) if start_at is not None else clock.now_ns()
        events = engine.events(key)
        engine.command({"cmd": "send", "key": key, "flow_id": rp.flow_id, "transport": rp.transport,
                        "schedule": str(schedule), "records": str(raw), "start_ns": start_ns, "split": rp.split,
                        "keepalive": bool(cfg.keepalive), "interval_ns": int(interval_s * 1e9),
                        "keepalive_rtt_ns": int(cfg.keepalive_rtt_s * 1e9),
                        "max_queue_bytes": int(cfg.max_queue_bytes),
                        "drain_timeout_ns": int(cfg.drain_timeout_s * 1e9)},
                       [c.sock.fileno() for c in conns])
        try:
            native = _wait(engine, key, events, ctl, result, stop, sampler, conns, rp.flow_id)
        except BaseException:
            # the endpoint may not have read the schedule yet: end the flow there first
            _abandon(engine, key, events)
            raise
        finally:
            engine.forget(key)
        _apply(result, native)
        if result.status in ("completed", "drain-timeout"):
            run = _SendRun(_LoopSettings(cfg, rp, interval_s, stop), source, conns, ctl, None, result, None)
            run._end()
        elif result.status in ("connection-lost", "receiver-disconnected"):
            msg = _late_abort(ctl, control.ControlReader(), 2.0)
            if msg is not None:
                _receiver_failed(result, msg)
    except KeyboardInterrupt:
        result.status = "interrupted"
    finally:
        if raw is not None:
            convert_sent(raw, run_dir, writer_id)
        if schedule is not None:
            schedule.unlink(missing_ok=True)
        if state_writer is not None:
            state_writer.close()
        if cc_map is not None:
            cc_map.close()
        for c in conns:
            try:
                if c.tcp and c.sock.fileno() >= 0:
                    result.tcp_info_end.append(_info_summary(c.sock))
            except OSError:
                pass
            c.sock.close()
        ctl.close()
        result.tcp_counters = netstat.counter_delta(counters_start, netstat.tcp_counters())
        if run_dir is not None and meta:
            meta.update(status=result.status, result=result.to_dict())
            update_run_metadata(run_dir, common, "sender", meta)
    out = result.to_dict()
    out["endpoint"] = "native"
    out["send_lateness_us"] = native.get("send_lateness_us", {"p99": None, "max": None, "count": 0})
    return out


def _apply(result: SenderResult, native: dict) -> None:
    for k in ("status", "packets", "queue_full_packets", "queued_bytes_at_end", "keepalive_packets",
              "rtp_packets", "wire_bytes", "per_connection_packets", "elapsed_s"):
        if k in native:
            setattr(result, k, native[k])
    if native.get("error"):
        result.error = native["error"]


def _wait(engine: NativeEngine, key: str, events, ctl, result: SenderResult, stop, sampler, conns,
          flow_id: int) -> dict:
    """Until the endpoint's result for ``key``: watch the control connection (the receiver's
    abort), ``stop``, and sample the TCP state when due."""
    sampled = [(flow_id, c.index, c.sock) for c in conns if c.tcp]
    reader = control.ControlReader()
    asked_finish = False
    ctl.setblocking(False)
    while True:
        now = clock.now_ns()
        wait_s = _POLL_S
        if sampler is not None:
            sampler.sample(sampled, now)
            wait_s = min(wait_s, max(0.0, (sampler.due_ns() - clock.now_ns()) / 1e9))
        # poll, not select: a group's descriptors may be numbered past select's 1024
        poller = select.poll()
        poller.register(events, select.POLLIN)
        if not asked_finish:
            poller.register(ctl, select.POLLIN)
        ready = [fd for fd, _ in poller.poll(wait_s * 1000)]
        while True:
            try:
                ev = events.get_nowait()
            except Exception:  # noqa: BLE001 - queue.Empty
                break
            if ev.get("event") == "died":
                raise NativeEndpointError(ev["error"])
            if ev.get("event") == "result":
                return ev
        if not asked_finish and stop is not None and stop.is_set():
            engine.command({"cmd": "finish", "key": key})
            asked_finish = True
        if not asked_finish and ctl.fileno() in ready:
            data = control.read_ready(ctl)
            msgs = []
            if data:
                try:
                    msgs = reader.feed(data)
                except control.ControlError as err:
                    result.error = f"control: {err}"
            aborted = next((m for m, _ in msgs if m.get("type") == "abort"), None)
            if data == b"" or aborted is not None:
                engine.command({"cmd": "finish", "key": key})
                asked_finish = True
                res = _drain_result(events)
                if aborted is not None:
                    _receiver_failed(result, aborted)
                    res["status"] = result.status
                    res["error"] = result.error
                else:
                    res["status"] = "receiver-disconnected"
                return res


def _abandon(engine: NativeEngine, key: str, events) -> None:
    """This thread failed while the endpoint serves its flow: finish it there and wait (5 s at
    most) for its result, so its schedule and records are not removed under it."""
    try:
        engine.command({"cmd": "finish", "key": key})
        deadline = time.monotonic() + 5.0
        while (left := deadline - time.monotonic()) > 0:
            ev = events.get(timeout=left)
            if ev.get("event") in ("result", "died"):
                return
    except Exception:  # noqa: BLE001 - the endpoint is gone or slow: nothing more to do
        return


def _drain_result(events) -> dict:
    while True:
        ev = events.get(timeout=30.0)
        if ev.get("event") == "died":
            raise NativeEndpointError(ev["error"])
        if ev.get("event") == "result":
            return ev

"""Pulled streams on the testbed (papers/003's video over HTTP): the file, the server, the
player and the server's TCP state over time.

Before the testbed comes up, :func:`prepare` makes (or finds in the cache) each stream's video
file (:func:`tcpdelay.traffic.video_file.cached_video`) and its frame index, and puts the files
in a directory of the run's own for the server. Once the receivers are up, :func:`start_servers` starts nginx and, each waiting for its start instant,
:func:`start_clients` the rest, per stream:

- nginx in the server's host (:class:`tcpdelay.testbed.http_server.NginxServer`) on the stream's
  port, its TCP variant the host's;
- the TCP state sampler in the server's host: every ``tcp_state_period_s`` it borrows nginx's
  established connections on that port (``pidfd_getfd``) and samples them as any sender's (same
  ``tcp_state`` records, with the BPF variant's own values when it has them), into
  ``flows/<flow_id>/``;
- the player in the client's host, at its start instant: the model player
  (:func:`tcpdelay.traffic.http_player.pull`, its log into ``flows/<flow_id>/playout``) or VLC.

Part keys: ``play:<flow_id>`` (the player; its answer is the stream's result) and
``state:<flow_id>`` (the sampler). :func:`stop` stops the servers and says what each served.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tcpdelay.experiments.plan import RunPlan, StreamPlan


@dataclass
class PreparedStreams:
    """The served directory and, per stream (by flow id), its file's name and frame index."""
    www: Path | None = None
    files: dict[int, str] = field(default_factory=dict)
    indexes: dict[int, object] = field(default_factory=dict)

    def cleanup(self) -> None:
        if self.www is not None:
            shutil.rmtree(self.www, ignore_errors=True)
            self.www = None


def rebuffer_bytes(s: StreamPlan) -> int:
    """The refill a frozen player waits for (default: half its playout buffer)."""
    st = s.stream
    return st.rebuffer_bytes if st.rebuffer_bytes is not None else st.playout_buffer_bytes // 2


def video_spec(s: StreamPlan):
    from tcpdelay.traffic.video_file import VideoFileSpec

    v = s.stream.video
    return VideoFileSpec(duration_s=v.duration_s, rate_bps=v.rate_bps, fps=v.fps)


def cached_index(path: Path):
    """The frame index of a cached video, probed once and kept beside it."""
    from tcpdelay.traffic import video_file

    idx_path = path.with_suffix(".frames.csv.gz")
    if idx_path.is_file():
        return video_file.load_trace(idx_path)
    index = video_file.frame_index(path)
    tmp = idx_path.with_name(f".{idx_path.name}.{os.getpid()}")
    video_file.write_trace(index, tmp, f"frame index of {path.name}")
    os.replace(tmp, idx_path)
    return index


def prepare(plan: RunPlan) -> PreparedStreams:
    """Make the videos (cached), their indexes, and the served directory."""
    from tcpdelay.traffic.video_file import cached_video

    out = PreparedStreams()
    if not plan.streams:
        return out
    out.www = Path(tempfile.mkdtemp(prefix="tcpdelay-www-"))
    for s in plan.streams:
        path = cached_video(video_spec(s))
        out.indexes[s.flow_id] = cached_index(path)
        name = path.name
        target = out.www / name
        if not target.exists():
            try:
                os.link(path, target)
            except OSError:
                shutil.copyfile(path, target)
        out.files[s.flow_id] = name
    return out


def _player(address: str, port: int, path: str, pts_s, size_bytes, end_bytes, out_dir: str, flow_id: int,
            playout_buffer_bytes: int, start_at: float, stop_at: float, catch_up: str = "rebuffer",
            rebuffer_bytes: int | None = None) -> dict:
    """In the client's host: wait for the start instant, pull the stream, log it."""
    from tcpdelay.records import RecordWriter
    from tcpdelay.traffic.http_player import PlayerFrames, pull

    frames = PlayerFrames(pts_s=pts_s, size_bytes=size_bytes, end_bytes=end_bytes)
    while (left := start_at - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
    writer = RecordWriter(out_dir, "playout", writer_id=f"player{flow_id}")
    try:
        got = pull(address, port, path, frames, writer, flow_id=flow_id,
                   playout_buffer_bytes=playout_buffer_bytes, stop_at_s=stop_at, catch_up=catch_up,
                   rebuffer_bytes=rebuffer_bytes)
    finally:
        writer.close()
    return {"player": "model", **got.to_dict()}


def _vlc(url: str, duration_s: float, start_at: float, network_caching_ms: int, buffer_bytes: int) -> dict:
    """In the client's host: wait for the start instant, play the stream with VLC."""
    from tcpdelay.testbed.vlc_player import play

    while (left := start_at - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
    return {"player": "vlc", **play(url, timeout_s=duration_s, network_caching_ms=network_caching_ms,
                                    prefetch_buffer_bytes=buffer_bytes)}


def _server_state(master_pid: int, port: int, flow_id: int, out_dir: str, period_s: float, stop_at: float,
                  cc_state_map_id: int | None) -> dict:
    """In the server's host: sample the connections on ``port`` of nginx (``master_pid`` and its
    workers) every ``period_s`` until ``stop_at`` (new connections are picked up as they come).
    It runs real time once set up, as the media programs' samplers do.

    A CI run once saw no connection in a 40 Mb/s stream whose connection lives the whole run; not
    reproduced here. Both ways it could miss are closed: the workers are looked up again every
    second (not once, from a list that could predate the worker's fork; not at every look, since
    a scan of /proc takes milliseconds of a real-time thread), and a normal-class sampler beside
    real-time emulators is no longer starved."""
    from tcpdelay.records import RecordWriter
    from tcpdelay.testbed.http_server import nginx_pids
    from tcpdelay.testbed.testbed import become_realtime
    from tcpdelay.transport import borrowed_socket
    from tcpdelay.transport.cc_state import CcStateMap
    from tcpdelay.transport.tcp_state_sampler import TcpStateSampler

    writer = RecordWriter(out_dir, "tcp_state", writer_id=f"server{flow_id}")
    cc_map = CcStateMap(cc_state_map_id) if cc_state_map_id else None
    sampler = TcpStateSampler(writer, period_s, cc_map)
    socks: list[tuple[int, int, object]] = []
    seen: set[int] = set()
    variants: set[str] = set()
    last_look = 0.0
    pids, pids_at = [], -1.0
    become_realtime()
    try:
        while (now := time.monotonic()) < stop_at:
            if now - last_look >= max(period_s, 0.05):
                last_look = now
                if now - pids_at >= 1.0:
                    pids, pids_at = nginx_pids(master_pid), now
                for inode, _, s in borrowed_socket.borrow_connections(pids, port, skip=seen):
                    seen.add(inode)
                    socks.append((flow_id, len(socks), s))
                    try:
                        variants.add(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode())
                    except OSError:
                        pass
            sampler.sample(socks, time.monotonic_ns())
            time.sleep(max(0.0, min(sampler.due_ns() / 1e9 - time.monotonic(), stop_at - time.monotonic())))
    finally:
        writer.close()
        if cc_map is not None:
            cc_map.close()
        for _, _, s in socks:
            s.close()
    return {"connections": len(seen), "rows": sampler.rows, "congestion_control": sorted(variants)}


def start_servers(tb, plan: RunPlan, rd: Path, prepared: PreparedStreams) -> list:
    """Start every stream's nginx (with the receivers: before t0); returns (stream, server) pairs."""
    from tcpdelay.testbed.http_server import NginxServer

    servers = []
    for s in plan.streams:
        fd = rd / "flows" / str(s.flow_id)
        fd.mkdir(parents=True, exist_ok=True)
        servers.append((s, NginxServer(tb.hosts[s.server], prepared.www, s.port, fd / "nginx").start()))
    return servers


def start_clients(tb, plan: RunPlan, rd: Path, t0: float, handles: dict, prepared: PreparedStreams,
                  servers: list) -> None:
    """Start every stream's sampler and player, each player waiting for its start instant."""
    from tcpdelay.experiments.scenario import congestion_choice

    end = t0 + plan.duration_s
    for s, srv in servers:
        fd = rd / "flows" / str(s.flow_id)
        map_id = None
        if s.stream.tcp.congestion_control is not None:
            name, params = congestion_choice(s.stream.tcp.congestion_control)
            map_id = tb.state_map_id(name, params or None)
        if plan.tcp_state_period_s > 0:
            handles[f"state:{s.flow_id}"] = tb.hosts[s.server].spawn(
                _server_state, srv.proc.pid, s.port, s.flow_id, str(fd), plan.tcp_state_period_s, end, map_id)
        index = prepared.indexes[s.flow_id]
        path = "/" + prepared.files[s.flow_id]
        address = tb.hosts[s.server].address
        if s.stream.player == "vlc":
            caching_ms = int(round(s.stream.playout_buffer_bytes * 8 / s.stream.video.rate_bps * 1000))
            handles[f"play:{s.flow_id}"] = tb.hosts[s.client].spawn(
                _vlc, f"http://{address}:{s.port}{path}", end - (t0 + s.start_s), t0 + s.start_s, caching_ms,
                s.stream.playout_buffer_bytes)
        else:
            handles[f"play:{s.flow_id}"] = tb.hosts[s.client].spawn(
                _player, address, s.port, path, index.pts_s, index.size_bytes, index.end_bytes, str(fd), s.flow_id,
                s.stream.playout_buffer_bytes, t0 + s.start_s, end, s.stream.catch_up, rebuffer_bytes(s))


def stop(servers: list) -> dict:
    """Stop the servers; what each served, by flow id."""
    out = {}
    for s, srv in servers:
        try:
            out[s.flow_id] = srv.stop()
        except Exception as err:  # noqa: BLE001 - the run's record says so
            out[s.flow_id] = {"error": f"{type(err).__name__}: {err}"}
    return out

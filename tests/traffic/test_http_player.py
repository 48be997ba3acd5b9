"""The pull player (traffic/http_player.py) against a real HTTP server on loopback (Python's
http.server in a thread): it reads the whole file, logs every frame's arrival in file order,
starts playback when its playout buffer is first full, and reads no further ahead than the
buffer allows while playing."""

import functools
import http.server
import threading

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.records import RecordWriter, read_records
from tcpdelay.traffic.http_player import PlayerFrames, pull

FPS = 30


@pytest.fixture
def served(tmp_path):
    """A 2-s 'video' file: a 1000-byte header and 60 frames of 5000 bytes (1.2 Mb/s), served over
    loopback; (port, frames)."""
    n, header, size = 60, 1000, 5000
    (tmp_path / "v.mp4").write_bytes(b"h" * header + b"f" * (n * size))
    frames = PlayerFrames(pts_s=np.arange(n) / FPS, size_bytes=np.full(n, size),
                          end_bytes=header + size * (np.arange(n) + 1))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.log_message = lambda *a, **k: None
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1], frames
    srv.shutdown()
    srv.server_close()


def test_pulls_the_whole_file_and_logs_each_frame(served, tmp_path):
    port, frames = served
    w = RecordWriter(tmp_path / "run", "playout", writer_id="p")
    got = pull("127.0.0.1", port, "/v.mp4", frames, w, flow_id=3, playout_buffer_bytes=50_000)
    w.close()
    assert got.status == 200 and got.complete and got.body_bytes == 1000 + 60 * 5000
    rows = read_records(tmp_path / "run", "playout").to_pylist()
    arrivals = [r for r in rows if r["event"] == "arrival"]
    assert [r["frame"] for r in arrivals] == list(range(60))
    assert all(r["flow_id"] == 3 for r in rows)
    (start,) = [r for r in rows if r["event"] == "start"]
    assert start["time_s"] == pytest.approx(got.start_s)
    # playback started once 50 kB were in: after frame 8 (1000 + 9*5000 = 46 kB) was whole
    assert start["time_s"] >= arrivals[8]["time_s"]
    # the playout buffer is 50 kB: while playing, frame k arrives no earlier than frame k-10 is due
    for r in arrivals:
        k = r["frame"]
        if r["time_s"] > got.start_s and k >= 10:
            assert r["time_s"] >= got.start_s + (k - 10) / FPS - 0.005
    # every frame was due before it returned: it ran for the 2 s of playout
    assert got.end_s - got.start_s >= 59 / FPS


def test_a_missing_file_and_bad_frames_are_errors(served):
    port, frames = served
    with pytest.raises(ConnectionError, match="HTTP 404"):
        pull("127.0.0.1", port, "/nothing.mp4", frames)
    with pytest.raises(ParameterError, match="end_bytes must increase"):
        PlayerFrames(pts_s=np.zeros(2), size_bytes=np.ones(2), end_bytes=np.array([5, 5]))

"""The video of the HTTP experiment (traffic/video_file.py): made reproducibly by ffmpeg/x264 at
the requested rate, indexed by ffprobe, and the committed trace of papers/003's full-size file
has the paper's shape (30 fps, 5.24 Mb/s on average, 10 min 24 s)."""

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.traffic import video_file as vf


def test_the_same_spec_makes_the_same_file_at_the_rate_asked(tmp_path):
    spec = vf.VideoFileSpec(duration_s=4.0, rate_bps=3e6)
    a = vf.frame_index(vf.make_video(spec, tmp_path / "a.mp4"))
    b = vf.frame_index(vf.make_video(spec, tmp_path / "b.mp4"))
    assert (tmp_path / "a.mp4").read_bytes() == (tmp_path / "b.mp4").read_bytes()
    assert len(a) == 120 and a.fps == 30
    assert np.array_equal(a.size_bytes, b.size_bytes) and np.array_equal(a.pos_bytes, b.pos_bytes)
    assert abs(a.mean_rate_bps - 3e6) <= 0.15 * 3e6
    # file order: offsets increase, frames tile the media data after the header
    assert np.all(np.diff(a.pos_bytes) > 0) and a.header_bytes > 0 and a.end_bytes[-1] <= a.file_size_bytes
    assert set(a.frame_type) == {"I", "P", "B"} and a.frame_type[0] == "I"
    assert sorted(np.rint(a.pts_s * 30).astype(int).tolist()) == list(range(120))


def test_the_cache_makes_once(tmp_path):
    spec = vf.VideoFileSpec(duration_s=1.0)
    p = vf.cached_video(spec, tmp_path)
    mtime = p.stat().st_mtime_ns
    assert vf.cached_video(spec, tmp_path) == p and p.stat().st_mtime_ns == mtime
    assert p.stat().st_mode & 0o044 == 0o044        # readable by a server's workers


def test_the_committed_trace_is_the_papers_file():
    t = vf.load_trace(vf.PAPER_TRACE)
    assert len(t) == 624 * 30 and t.fps == 30
    assert abs(t.mean_rate_bps - 5.24e6) <= 0.05 * 5.24e6
    assert abs(t.file_size_bytes - 409e6) <= 0.02 * 409e6          # the paper: 409 MB
    keys = np.sort(np.rint(t.pts_s[t.frame_type == "I"] * 30).astype(int))
    assert np.all(np.diff(keys) == 60)                               # a key frame every 2 s
    assert t.size_bytes[t.frame_type == "I"].mean() > 3 * t.size_bytes[t.frame_type == "P"].mean()


def test_bad_specs_are_one_line():
    with pytest.raises(ParameterError, match="duration_s"):
        vf.VideoFileSpec(duration_s=0)
    with pytest.raises(ParameterError, match="rate_bps"):
        vf.VideoFileSpec(rate_bps=10)
    with pytest.raises(ParameterError, match="is not a file"):
        vf.frame_index("/nonexistent.mp4")

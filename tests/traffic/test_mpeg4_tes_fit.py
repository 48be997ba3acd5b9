"""The MPEG-4 TES source fitted to a real MPEG-4 trace (papers/004 §3.1): the committed trace is
what ffmpeg's mpeg4 encoder makes from the documented source, the source's default models are
the fit of that trace, and the frames the source generates have the trace's statistics."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tcpdelay.traffic.mpeg4_tes import DEFAULT_MODELS, Mpeg4TesSource
from tcpdelay.traffic.mpeg4_tes_fit import (
    encode_command, fit_models, frame_statistics, load_trace, probe_frames, source_statistics,
)


def test_the_committed_trace_is_what_the_documented_encode_makes(tmp_path):
    assert shutil.which("ffmpeg"), "make test installs ffmpeg (make media-tools)"
    out = tmp_path / "first.m4v"
    subprocess.run(encode_command(str(out), 8), check=True)
    types, sizes = probe_frames(out)
    trace_types, trace_sizes = load_trace()
    assert len(trace_types) == 600 * 25 and "".join(trace_types[:12]) == "IBBPBBPBBPBB"
    n = len(types) - 3                       # the cut closes the last GOP early: its last frames differ
    assert n > 190
    assert (types[:n] == trace_types[:n]).all() and (sizes[:n] == trace_sizes[:n]).all()


def test_the_default_models_are_the_fit_of_the_committed_trace():
    assert fit_models(*load_trace()) == dict(DEFAULT_MODELS)


def test_the_source_reproduces_the_trace_statistics():
    """Successive frames of a type are strongly correlated (the trace's I frames: 0.97 at lag 1),
    so one long run estimates its own mean slowly; the marginal is checked on the first frames
    of many independent runs (each TES sequence starts from a uniform draw, so they are exactly
    the stationary law), the correlation pooled over many runs about the known mean."""
    types, sizes = load_trace()
    want = frame_statistics(types, sizes)
    rate_bps = sizes.sum() * 8 / (len(sizes) / 25)
    src = Mpeg4TesSource(mean_rate_bps=rate_bps, fps=25, gop="IBBPBBPBBPBB")
    got = source_statistics(src)
    for t in "IPB":
        assert src.mean_frame_bytes()[t] == pytest.approx(want[t].mean_bytes, rel=1e-3), t   # scaled to the rate
        assert got[t].mean_bytes == pytest.approx(want[t].mean_bytes, rel=0.03), t
        assert got[t].cv == pytest.approx(want[t].cv, rel=0.1), t
        assert got[t].lag1 == pytest.approx(want[t].lag1, abs=0.05), t
    assert "".join(src.frames(12, seed=1)[0]) == "IBBPBBPBBPBB"

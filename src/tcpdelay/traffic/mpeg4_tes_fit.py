"""Fitting the MPEG-4 TES source (:mod:`tcpdelay.traffic.mpeg4_tes`) to a real MPEG-4 trace.

Papadimitriou and Tsaoussidis (papers/004, §3.1) drive their MPEG flows with Matrawy, Lambadaris
and Huang's generator, whose three TES models were fitted to one real trace's I, P and B frames.
Neither paper gives the fitted parameters, so tcpdelay fits its own three models to a trace it
makes itself with Debian's ffmpeg and its MPEG-4 Part 2 encoder (``mpeg4``, the codec of the
papers' era), committed as ``data/video/`` :data:`TRACE` (frame types and sizes only):

- the source: three scenes of 200 s each from ffmpeg's own synthetic sources — a Mandelbrot
  zoom, a moving test pattern with light temporal noise, and a game of life — at CIF
  (352x288), 25 fps; scene changes and the scenes' different textures give the frame sizes the
  spread of a real film that one synthetic scene lacks (a single ``testsrc2`` scene has a
  coefficient of variation of 0.06 for I frames);
- the encode (:data:`ENCODER_ARGS`): one-pass rate control at 1 Mb/s, a fixed GOP of 12 with 2
  B frames (``IBBPBBPBBPBB``, the papers' pattern), one thread, bit-exact flags.

The fit, per frame type (:func:`fit_models`): the mean size relative to B frames, the
coefficient of variation of the lognormal marginal, and the TES innovation half-width ``h``
chosen so that the model's lag-1 autocorrelation of successive frames of that type matches the
trace's (the TES autocorrelation has no closed form after stitching and distortion: it is
estimated by simulation on a grid of ``h`` and interpolated). :data:`FITTED` holds the result,
the source's defaults; ``benchmarks/mpeg4_tes_fit.py`` fits again and prints trace against model.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tcpdelay.errors import ParameterError

#: The committed trace (frame type and size in bytes, decode order = display order for this
#: stream's first frame of each GOP; sizes are of the coded frames).
TRACE = Path(__file__).resolve().parents[3] / "data" / "video" / "mpeg4-1000k-25fps-600s.frames.csv.gz"

#: The three scenes (an ffmpeg ``-filter_complex`` graph) and the encode of :data:`TRACE`.
SCENES = (
    "mandelbrot=size=352x288:rate=25,trim=duration=200,setpts=PTS-STARTPTS[a];"
    "testsrc2=size=352x288:rate=25,noise=alls=3:allf=t+u:all_seed=20050601,trim=duration=200,setpts=PTS-STARTPTS[b];"
    "life=size=352x288:rate=25:mold=10:ratio=0.1:seed=2005:life_color=#00ff00:death_color=#C83232,"
    "trim=duration=200,setpts=PTS-STARTPTS[c];[a][b][c]concat=n=3:v=1:a=0,format=yuv420p[v]"
)
ENCODER_ARGS = ("-an", "-c:v", "mpeg4", "-threads", "1", "-b:v", "1000k", "-g", "12", "-bf", "2",
                "-sc_threshold", "1000000000", "-fflags", "+bitexact", "-flags:v", "+bitexact",
                "-map_metadata", "-1")


def encode_command(out: str, seconds: float | None = None) -> list[str]:
    """The ffmpeg command that makes the trace's video (its first ``seconds`` only, if given)."""
    cut = ["-t", f"{seconds:g}"] if seconds is not None else []
    return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-filter_complex", SCENES,
            "-map", "[v]", *cut, *ENCODER_ARGS, out]


def probe_frames(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Frame types and coded sizes of a video file, in display order (ffprobe)."""
    import subprocess

    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "frame=pict_type,pkt_size", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, check=True).stdout
    rows = [line.split(",") for line in out.split()]
    return np.array([r[1] for r in rows]), np.array([int(r[0]) for r in rows], dtype=np.int64)


def write_trace(path: str | os.PathLike, types, sizes) -> None:
    with gzip.open(path, "wt") as f:
        f.write("# MPEG-4 Part 2 frame trace made by tcpdelay (src/tcpdelay/traffic/mpeg4_tes_fit.py)\n")
        f.write("# " + " ".join(encode_command("OUT.m4v")).replace(SCENES, f"'{SCENES}'") + "\n")
        f.write("frame_type,size_bytes\n")
        for t, s in zip(types, sizes):
            f.write(f"{t},{int(s)}\n")


def load_trace(path: str | os.PathLike = TRACE) -> tuple[np.ndarray, np.ndarray]:
    """Frame types and sizes of a trace written by :func:`write_trace`."""
    types, sizes = [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.startswith("#") or line.startswith("frame_type"):
                continue
            t, s = line.strip().split(",")
            types.append(t)
            sizes.append(int(s))
    return np.array(types), np.array(sizes, dtype=np.int64)


@dataclass(frozen=True)
class FrameStats:
    """One frame type's statistics: count, mean size (bytes), coefficient of variation, and the
    lag-1 autocorrelation of successive frames of that type."""

    count: int
    mean_bytes: float
    cv: float
    lag1: float


def frame_statistics(types, sizes) -> dict[str, FrameStats]:
    types, sizes = np.asarray(types), np.asarray(sizes, dtype=float)
    if types.shape != sizes.shape or sizes.size == 0:
        raise ParameterError("types and sizes must be non-empty and of the same length")
    out = {}
    for t in "IPB":
        x = sizes[types == t]
        if x.size < 3:
            continue
        out[t] = FrameStats(count=int(x.size), mean_bytes=float(x.mean()), cv=float(x.std() / x.mean()),
                            lag1=float(np.corrcoef(x[:-1], x[1:])[0, 1]))
    return out


def model_lag1(h: float, cv: float, n: int = 20000, seed: int = 1, stitching: float = 0.5) -> float:
    """The lag-1 autocorrelation of a TES+ sequence (innovation half-width ``h``, stitched,
    lognormal marginal of coefficient of variation ``cv``), estimated from ``n`` values."""
    from tcpdelay.traffic.mpeg4_tes import lognormal_ppf, stitch, tes_background

    u = tes_background(np.random.default_rng(seed), n, h)
    x = lognormal_ppf(stitch(u, stitching), 1.0, cv)
    return float(np.corrcoef(x[:-1], x[1:])[0, 1])


def fit_h(target_lag1: float, cv: float) -> float:
    """The innovation half-width whose model lag-1 autocorrelation is ``target_lag1`` (a grid
    from 0.005 to 0.5, interpolated; clipped to the grid's ends)."""
    grid = np.array([0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5])
    lag = np.array([model_lag1(h, cv) for h in grid])            # falls as h grows
    if target_lag1 >= lag[0]:
        return float(grid[0])
    if target_lag1 <= lag[-1]:
        return float(grid[-1])
    return float(np.interp(target_lag1, lag[::-1], grid[::-1]))


def fit_models(types, sizes) -> dict:
    """:class:`~tcpdelay.traffic.mpeg4_tes.TesFrameModel` per frame type fitted to a trace:
    relative means (B = 1), the lognormal's cv, and h from the lag-1 autocorrelation."""
    from tcpdelay.traffic.mpeg4_tes import TesFrameModel

    stats = frame_statistics(types, sizes)
    base = stats["B"].mean_bytes if "B" in stats else min(s.mean_bytes for s in stats.values())
    return {t: TesFrameModel(relative_mean=round(s.mean_bytes / base, 3), cv=round(s.cv, 3),
                             innovation_half_width=round(fit_h(s.lag1, s.cv), 4))
            for t, s in stats.items()}


def source_statistics(src, *, marginal_runs: int = 2000, corr_runs: int = 200, corr_frames: int = 1200,
                      seed: int = 0) -> dict[str, FrameStats]:
    """A source's frame statistics per type, estimated as a long correlated run cannot give them
    quickly (its mean converges slowly when successive frames are correlated): the mean and cv
    from the first frame of each type of ``marginal_runs`` independent runs (each TES sequence
    starts from a uniform draw: exactly the stationary law), the lag-1 autocorrelation pooled over
    ``corr_runs`` runs of ``corr_frames`` frames about the known mean."""
    means = src.mean_frame_bytes()
    first: dict[str, list[int]] = {t: [] for t in means}
    for k in range(marginal_runs):
        types, sizes = src.frames(len(src.pattern), seed=seed + k)
        for t in means:
            first[t].append(int(sizes[np.flatnonzero(types == t)[0]]))
    num = {t: 0.0 for t in means}
    den = {t: 0.0 for t in means}
    for k in range(corr_runs):
        types, sizes = src.frames(corr_frames, seed=seed + marginal_runs + k)
        for t in means:
            d = sizes[types == t] - means[t]
            num[t] += float(d[:-1] @ d[1:])
            den[t] += float(d @ d)
    out = {}
    for t in means:
        x = np.asarray(first[t], dtype=float)
        out[t] = FrameStats(count=marginal_runs, mean_bytes=float(x.mean()), cv=float(x.std() / x.mean()),
                            lag1=num[t] / den[t])
    return out

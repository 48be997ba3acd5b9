"""The video file of the HTTP streaming experiment (papers/003: Watanabe et al., *Performance
Characterization of Streaming Video over TCP Variants*, Sec. V: H.264/AVC, 30 fps, 5.24 Mb/s on average,
MPEG-4 container, 10 min 24 s), made reproducibly from ffmpeg's own synthetic source, and its
index of frames (what a player needs to know which bytes make which frame).

The encode (:data:`ENCODER_ARGS`): ``testsrc2`` at 1280x720 with temporal noise over it (so the
rate control has texture to spend bits on, and every frame differs), libx264 ``veryfast``, a
target of ``rate_bps`` with a VBV of 1.5x the rate and 2 s of buffer (a typical streaming
encode: the rate swings around its average, I frames are several times P frames), a key frame
every 2 s, 2 B frames, ``+faststart`` (the moov atom first, so a progressive HTTP player can
start), bit-exact flags, one encoder thread (x264's rate control under a VBV is not bit-exact from
run to run with frame threads: measured here, two encodes differed; with one thread they are
identical). Video only: the paper's file also had AAC audio; leaving it out makes
every byte of the media data belong to a video frame. 1280x720 keeps the single-threaded encode
near 2x real time here (the paper's file of 10 min 24 s: about 5 minutes, once; it is cached).

:func:`frame_index` reads a file with ffprobe: per video packet in file (decode) order its
presentation time, size, byte offset and picture type. ``data/video/`` holds that index of the
paper-size file as a small trace (:func:`load_trace`), so the frame sizes and types are in the
repository while the 409 MB video is made when needed (:func:`cached_video`).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tcpdelay.errors import ParameterError

#: The project's video files are made once and kept here (or in $TCPDELAY_CACHE_DIR/video).
def cache_dir() -> Path:
    base = os.environ.get("TCPDELAY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tcpdelay")
    return Path(base) / "video"


@dataclass(frozen=True)
class VideoFileSpec:
    """What to encode (defaults: papers/003's file)."""

    duration_s: float = 624.0
    rate_bps: float = 5.24e6
    fps: int = 30
    width: int = 1280
    height: int = 720
    keyint_frames: int = 60
    bframes: int = 2

    def __post_init__(self):
        if not 0 < self.duration_s <= 3600:
            raise ParameterError(f"video duration_s: {self.duration_s!r} must be in (0, 3600]")
        if not 100e3 <= self.rate_bps <= 100e6:
            raise ParameterError(f"video rate_bps: {self.rate_bps!r} must be in [1e5, 1e8]")
        if not 1 <= self.fps <= 120:
            raise ParameterError(f"video fps: {self.fps!r} must be in [1, 120]")

    def key(self) -> str:
        """A short hash of the spec and of the encoder settings: the cached file's name."""
        text = repr((asdict(self), ENCODER_VERSION))
        return hashlib.sha256(text.encode()).hexdigest()[:12]


#: Bumped whenever the encode changes (it is part of every cached file's key).
ENCODER_VERSION = 3


def encoder_args(spec: VideoFileSpec) -> list[str]:
    """ffmpeg's arguments after ``ffmpeg`` and before the output file."""
    kbps = int(round(spec.rate_bps / 1000))
    return ["-hide_banner", "-loglevel", "error", "-nostdin", "-y",
            "-f", "lavfi", "-i", f"testsrc2=size={spec.width}x{spec.height}:rate={spec.fps},noise=alls=10:allf=t+u:all_seed=20130721",
            "-t", f"{spec.duration_s:g}", "-an",
            "-c:v", "libx264", "-preset", "veryfast", "-threads", "1",
            "-b:v", f"{kbps}k", "-maxrate", f"{int(kbps * 1.5)}k", "-bufsize", f"{kbps * 2}k",
            "-g", str(spec.keyint_frames), "-keyint_min", str(spec.keyint_frames), "-sc_threshold", "0",
            "-bf", str(spec.bframes), "-pix_fmt", "yuv420p",
            "-movflags", "+faststart", "-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1"]


ENCODER_ARGS = encoder_args(VideoFileSpec())


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ParameterError(f"{name} is not installed (Debian/Ubuntu: apt-get install ffmpeg)")
    return path


def make_video(spec: VideoFileSpec, path: str | os.PathLike) -> Path:
    """Encode ``spec`` into ``path`` (written to a temporary file, then renamed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".video-", suffix=".mp4")
    os.close(fd)
    try:
        out = subprocess.run([_tool("ffmpeg"), *encoder_args(spec), tmp], capture_output=True, text=True)
        if out.returncode != 0:
            last = (out.stderr.strip().splitlines() or ["no message"])[-1]
            raise ParameterError(f"ffmpeg could not encode the video: {last}")
        os.chmod(tmp, 0o644)      # a web server's unprivileged workers read it
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def cached_video(spec: VideoFileSpec, directory: str | os.PathLike | None = None) -> Path:
    """The video of ``spec``, made once into ``directory`` (default :func:`cache_dir`) and reused."""
    d = Path(directory) if directory is not None else cache_dir()
    path = d / f"h264-{int(spec.rate_bps / 1000)}k-{spec.fps}fps-{spec.duration_s:g}s-{spec.key()}.mp4"
    if not path.is_file():
        make_video(spec, path)
    return path


@dataclass(frozen=True)
class VideoIndex:
    """The video frames of a file, in file (decode) order."""

    pts_s: np.ndarray
    """Presentation time from the first frame's (s)."""
    size_bytes: np.ndarray
    pos_bytes: np.ndarray
    """Offset of the frame's first byte in the file."""
    frame_type: np.ndarray
    """``I``, ``P`` or ``B`` (strings)."""
    file_size_bytes: int

    def __len__(self) -> int:
        return int(self.pts_s.size)

    @property
    def end_bytes(self) -> np.ndarray:
        """Offset just past each frame's last byte."""
        return self.pos_bytes + self.size_bytes

    @property
    def header_bytes(self) -> int:
        """Bytes before the first frame (ftyp and moov with ``+faststart``)."""
        return int(self.pos_bytes[0])

    @property
    def duration_s(self) -> float:
        fps = self.fps
        return float(self.pts_s.max() + 1.0 / fps) if len(self) else 0.0

    @property
    def fps(self) -> float:
        d = np.diff(np.sort(self.pts_s))
        return round(float(1.0 / np.median(d)), 3) if d.size else 0.0   # times are rounded to 1 us

    @property
    def mean_rate_bps(self) -> float:
        return float(self.size_bytes.sum() * 8 / self.duration_s) if len(self) else 0.0


def frame_index(path: str | os.PathLike) -> VideoIndex:
    """Index ``path``'s video frames with ffprobe (packets for times, sizes and offsets; frames for
    picture types, joined by offset)."""
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"video: {str(path)!r} is not a file")
    probe = _tool("ffprobe")
    pk = subprocess.run([probe, "-v", "error", "-select_streams", "v:0", "-show_entries",
                         "packet=pts_time,size,pos", "-of", "csv=p=0", str(path)],
                        capture_output=True, text=True, check=True).stdout.split()
    fr = subprocess.run([probe, "-v", "error", "-select_streams", "v:0", "-show_entries",
                         "frame=pkt_pos,pict_type", "-of", "csv=p=0", str(path)],
                        capture_output=True, text=True, check=True).stdout.split()
    types: dict[int, str] = {}
    for line in fr:
        cols = line.split(",")
        if len(cols) >= 2 and cols[0].isdigit():
            types[int(cols[0])] = cols[1][:1]
    rows = [line.split(",") for line in pk]
    rows = [(float(r[0]), int(r[1]), int(r[2])) for r in rows if len(r) >= 3 and r[2].isdigit()]
    rows.sort(key=lambda r: r[2])                 # file order
    pts = np.array([r[0] for r in rows])
    pts -= pts.min()
    return VideoIndex(pts_s=np.round(pts, 6), size_bytes=np.array([r[1] for r in rows], dtype=np.int64),
                      pos_bytes=np.array([r[2] for r in rows], dtype=np.int64),
                      frame_type=np.array([types.get(r[2], "?") for r in rows]),
                      file_size_bytes=path.stat().st_size)


TRACE_COLUMNS = ("pts_s", "size_bytes", "pos_bytes", "frame_type")


def write_trace(index: VideoIndex, path: str | os.PathLike, header: str = "") -> None:
    """Write ``index`` as a gzipped CSV (``#`` comment lines first, then one row per frame)."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines.append(f"# file_size_bytes={index.file_size_bytes}")
    lines.append(",".join(TRACE_COLUMNS))
    lines += [f"{p:.6f},{s},{o},{t}" for p, s, o, t in zip(index.pts_s, index.size_bytes, index.pos_bytes, index.frame_type)]
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def load_trace(path: str | os.PathLike) -> VideoIndex:
    """Read a trace written by :func:`write_trace`."""
    size = 0
    pts, sizes, pos, types = [], [], [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.startswith("# file_size_bytes="):
                size = int(line.split("=", 1)[1])
            if line.startswith("#") or line.startswith("pts_s"):
                continue
            p, s, o, t = line.strip().split(",")
            pts.append(float(p))
            sizes.append(int(s))
            pos.append(int(o))
            types.append(t)
    return VideoIndex(pts_s=np.array(pts), size_bytes=np.array(sizes, dtype=np.int64),
                      pos_bytes=np.array(pos, dtype=np.int64), frame_type=np.array(types), file_size_bytes=size)


#: The committed trace of papers/003's file as :class:`VideoFileSpec` () makes it.
PAPER_TRACE = Path(__file__).resolve().parents[3] / "data" / "video" / "h264-5240k-30fps-624s.frames.csv.gz"

"""A real player beside the model one: Debian's VLC (3.0), headless, on an HTTP stream, with its
own counters (papers/003 measured with a VLC client).

VLC refuses to run as root, so it runs as ``nobody`` (``runuser``) with a HOME of its own in a
temporary directory, the remote-control interface on its stdin/stdout (``-I rc --rc-fake-tty``),
dummy video and audio outputs (the video is still decoded and its pictures still go through the
video output's clock, so "frames displayed" and "frames lost" are counted), ``--stats``, and
``--play-and-exit``, and libavformat's demuxer (``--demux=avformat``): VLC's own MP4 demuxer
looks for boxes after ``mdat`` at open, seeking to the end of the file, and over HTTP it then
waited for the whole file before playing (measured: "Stream buffering done (250 ms in 13646 ms)"
for a 12-s file at 4.5 Mb/s), where libavformat's reads it progressively as papers/003's VLC did
(buffering done in 0.9 s, then one rebuffering, 10 late pictures dropped). Its playout buffer is
two settings: the prefetch filter's buffer
(``--prefetch-buffer-size``, KiB; VLC 3 reads up to 16 MiB ahead of the demuxer by default, so
on a slow link it fetched a whole 13 MB test file before showing a picture — measured), set to the
playout buffer's bytes, and the network caching (``--network-caching``, ms) before playback
starts: at 5.24 Mb/s papers/003's 656 kB is 1.0 s.

Every ``stats_period_s`` the ``stats`` command prints VLC's counters
(``modules/lua/intf/modules/...`` → ``input_item_t`` statistics, ``src/input/stats.c``); we keep
each block and return the last: ``input_bytes``, ``demux_bytes``, ``demux_corrupted``,
``discontinuities``, ``video_decoded``, ``frames_displayed``, ``frames_lost`` (pictures the video
output dropped because they were late: ``src/video_output/video_output.c``), ``audio_decoded``,
``buffers_played``, ``buffers_lost``. With ``-vv`` the log also says when a picture is late
("picture is too late to be displayed") and when the input's clock is reset after a stall
("ES_OUT_SET_(GROUP_)PCR is called too late" / "buffer deadlock prevented") and each time it
has buffered enough to play ("Stream buffering done": at the start and after every stall); we
count those lines as ``late_picture_messages``, ``rebuffer_messages`` and
``buffering_episodes`` (its underflows are the episodes after the first).

Call :func:`play` inside the client's network namespace (``host.spawn``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

from tcpdelay.errors import ParameterError
from tcpdelay.errors import TestbedError

_COUNTERS = {
    "input bytes read": "input_bytes", "demux bytes read": "demux_bytes", "demux corrupted": "demux_corrupted",
    "discontinuities": "discontinuities", "video decoded": "video_decoded", "frames displayed": "frames_displayed",
    "frames lost": "frames_lost", "audio decoded": "audio_decoded", "buffers played": "buffers_played",
    "buffers lost": "buffers_lost",
}
_LINE = re.compile(r"^\|\s*([a-z ]+?)\s*:\s*([0-9.]+)\s*(KiB|MiB|kb/s)?\s*$")
_LATE = ("picture is too late to be displayed", "picture might be displayed late")
_BUFFERED = "Stream buffering done"
#: Bytes the prefetch filter reads at a time (its default, 16 MiB, is larger than the buffer,
#: which it then grows to).
PREFETCH_READ_BYTES = 65536
_REBUFFER = ("is called too late", "buffer deadlock prevented")


def _binaries() -> tuple[str, str]:
    cvlc, runuser = shutil.which("cvlc"), shutil.which("runuser")
    if cvlc is None:
        raise TestbedError("VLC is not installed (Debian/Ubuntu: apt-get install vlc-bin vlc-plugin-base)")
    if runuser is None:
        raise TestbedError("runuser is not installed (util-linux): VLC refuses to run as root")
    return cvlc, runuser


def parse_stats(lines: list[str]) -> dict:
    """The counters of one ``stats`` block (sizes in bytes)."""
    out = {}
    for line in lines:
        m = _LINE.match(line.strip())
        if not m or m.group(1) not in _COUNTERS:
            continue
        value = float(m.group(2))
        unit = m.group(3)
        if unit == "KiB":
            value *= 1024
        elif unit == "MiB":
            value *= 1024 * 1024
        out[_COUNTERS[m.group(1)]] = int(value)
    return out


#: The player's niceness (below 0: a larger share of the CPU than ordinary processes; see :func:`play`).
PLAYER_NICE = -10


def play(url: str, *, timeout_s: float, network_caching_ms: int = 1000, stats_period_s: float = 1.0,
         verbose: bool = True, prefetch_buffer_bytes: int | None = None) -> dict:
    """Play ``url`` until VLC ends it (end of stream) or ``timeout_s``; its counters (see the
    module doc), their series, whether the stream ended, and the exit status."""
    if not url.startswith("http://"):
        raise ParameterError(f"url: {url!r} must be http://")
    if not timeout_s > 0 or not stats_period_s > 0 or network_caching_ms < 0:
        raise ParameterError("timeout_s and stats_period_s must be > 0, network_caching_ms >= 0")
    cvlc, runuser = _binaries()
    home = tempfile.mkdtemp(prefix="tcpdelay-vlc-")
    os.chmod(home, 0o777)
    # At a higher CPU share than ordinary work (nice -10, set by root before runuser drops to
    # nobody; niceness is inherited): a late picture is dropped by VLC's video output and counted
    # as lost, so a player starved by other processes would lose pictures the network delivered
    # in time (measured: 4 at 40 Mb/s beside four test workers on two cores, none alone).
    argv = [shutil.which("nice") or "nice", "-n", str(PLAYER_NICE), runuser, "-u", "nobody", "--", "env", f"HOME={home}", cvlc, "-I", "rc", "--rc-fake-tty",
            "--vout", "dummy", "--aout", "dummy", "--no-audio", "--stats", "--play-and-exit",
            f"--network-caching={int(network_caching_ms)}", "--no-video-title-show", "--demux=avformat"]
    if prefetch_buffer_bytes is not None:
        argv += [f"--prefetch-buffer-size={max(4, int(prefetch_buffer_bytes) // 1024)}",
                 f"--prefetch-read-size={PREFETCH_READ_BYTES}"]
    if verbose:
        argv.append("-vv")
    argv.append(url)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1, start_new_session=True)
    lines: list[str] = []
    lock = threading.Lock()

    def reader() -> None:
        for line in proc.stdout:
            with lock:
                lines.append(line.rstrip("\n"))

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    series, started = [], time.monotonic()
    ended = False
    try:
        while proc.poll() is None:
            if time.monotonic() - started >= timeout_s:
                break
            time.sleep(stats_period_s)
            try:
                proc.stdin.write("stats\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                break
        ended = proc.poll() is not None
        if not ended:
            try:
                proc.stdin.write("stats\nquit\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        t.join(timeout=2)
        shutil.rmtree(home, ignore_errors=True)
    with lock:
        text = list(lines)
    blocks, cur = [], None
    for line in text:
        if "begin of statistical info" in line:
            cur = []
        elif "end of statistical info" in line and cur is not None:
            blocks.append(parse_stats(cur))
            cur = None
        elif cur is not None:
            cur.append(line)
    series = [b for b in blocks if b]
    return {"counters": series[-1] if series else {}, "series": series,
            "end_of_stream": ended and any("end of playlist" in line for line in text),
            "exit_status": proc.returncode,
            "late_picture_messages": sum(any(k in line for k in _LATE) for line in text),
            "rebuffer_messages": sum(any(k in line for k in _REBUFFER) for line in text),
            "buffering_episodes": sum(_BUFFERED in line for line in text),
            "played_s": time.monotonic() - started}

"""Video quality at the client: picture discards and playout-buffer underflow events (Watanabe
et al., *Performance Characterization of Streaming Video over TCP Variants*, INTERNET 2013,
§III-A and §V).

The paper measures, with a VLC client, *picture discards* (frames the decoder skips) and
*buffer underflow* events ("catch up" events where the video freezes and then resumes faster
until the late frames have been played out). We compute both from the per-packet records
against a fixed playout schedule:

- frame ``k`` (``k`` = frame id - first frame id) is due at
  ``D_k = start + startup_delay + k / fps``, where ``start`` is the arrival of the flow's first
  packet (the client starts its clock when data starts to arrive) and the schedule is not
  shifted by stalls (the client catches up, as in the paper);
- a frame is *complete* when all its packets have arrived; it is **played** when complete by
  ``D_k``, and otherwise **discarded**: *late* (complete after ``D_k``), *incomplete* (a packet
  never arrived, e.g. over UDP) or *overflow* (see below);
- the playout buffer is **empty** at ``D_k`` when no frame ``j >= k`` is complete (and admitted)
  by ``D_k``: nothing can be shown and the picture freezes. An **underflow event** is a maximal
  run of consecutive empty deadlines; its length / fps is the frozen time;
- with a finite ``buffer_bytes`` (the paper's client: 656 kB), a frame completing while the
  frames waiting in the buffer (complete, not yet due) already hold more than
  ``buffer_bytes - size`` is an **overflow** discard. The paper notes overflow does not happen
  when the client pulls from the socket only as space frees (§III-A, case λlow), so the default
  buffer is unlimited.

Frames whose last packet was never produced (a run cut mid-frame) are left out.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError

DEFAULT_STARTUP_DELAY_S = 1.0


@dataclass(frozen=True)
class Frames:
    """Frames of one flow, in frame-id order."""

    frame_id: np.ndarray
    frame_type: np.ndarray
    size_bytes: np.ndarray
    packets: np.ndarray
    send_time_s: np.ndarray
    """Send time of the frame's first packet."""
    complete_time_s: np.ndarray
    """Arrival of the frame's last-arriving packet; NaN if a packet never arrived."""

    def __len__(self) -> int:
        return int(self.frame_id.size)


def frames_from_packets(frame_id, frame_type, frame_last, size_bytes, send_time_s, recv_time_s
                        ) -> Frames:
    """Group packets (``frame_id >= 0``) into frames."""
    fid = np.asarray(frame_id, dtype=np.int64)
    keep = fid >= 0
    fid = fid[keep]
    ftype = np.asarray(frame_type)[keep]
    last = np.asarray(frame_last, bool)[keep]
    size = np.asarray(size_bytes, dtype=np.int64)[keep]
    send = np.asarray(send_time_s, dtype=float)[keep]
    recv = np.asarray(recv_time_s, dtype=float)[keep]
    ids, inv, count = np.unique(fid, return_inverse=True, return_counts=True)
    n = ids.size
    has_last = np.zeros(n, bool)
    np.logical_or.at(has_last, inv, last)
    tot = np.bincount(inv, weights=size, minlength=n).astype(np.int64)
    first_send = np.full(n, np.inf)
    np.minimum.at(first_send, inv, send)
    complete = np.full(n, -np.inf)
    np.maximum.at(complete, inv, np.where(np.isnan(recv), np.inf, recv))
    complete[np.isinf(complete)] = np.nan
    types = np.empty(n, dtype=ftype.dtype if ftype.size else "<U1")
    types[inv] = ftype
    k = has_last
    return Frames(ids[k], types[k], tot[k], count[k], first_send[k], complete[k])


def infer_fps(frames: Frames) -> float:
    """Frame rate from the frames' send times: the least-squares slope of send time against
    frame id (a sender's real send times jitter around the schedule; the slope over the whole run
    does not drift the way one median spacing would over thousands of frames)."""
    ok = np.isfinite(frames.send_time_s)
    if np.count_nonzero(ok) < 2 or np.ptp(frames.frame_id[ok]) == 0:
        raise ParameterError("fps: cannot infer the frame rate from fewer than 2 frames; give it")
    slope = np.polyfit(frames.frame_id[ok].astype(float), frames.send_time_s[ok], 1)[0]
    if not slope > 0:
        raise ParameterError("fps: frames are not spaced in time; give the frame rate")
    return float(1.0 / slope)


def playout(frames: Frames, fps: float, *, startup_delay_s: float = DEFAULT_STARTUP_DELAY_S,
            start_s: float | None = None, buffer_bytes: float = math.inf) -> dict:
    """Play ``frames`` against the fixed schedule; counts of played and discarded frames and of
    underflow events (see the module docstring). ``start_s`` defaults to the first arrival."""
    checks.positive("fps", fps)
    checks.non_negative("startup_delay_s", startup_delay_s)
    checks.positive("buffer_bytes", buffer_bytes, allow_inf=True)
    n = len(frames)
    empty = {"frames": n, "played": 0, "picture_discards": 0, "late_frames": 0,
             "incomplete_frames": 0, "overflow_discards": 0, "underflow_events": 0,
             "underflow_frames": 0, "underflow_s": 0.0, "discards_by_type": {}}
    if n == 0:
        return empty
    complete = np.where(np.isnan(frames.complete_time_s), np.inf, frames.complete_time_s)
    if start_s is None:
        finite = complete[np.isfinite(complete)]
        if finite.size == 0:
            return {**empty, "picture_discards": n, "incomplete_frames": n,
                    "discards_by_type": _by_type(frames.frame_type, np.ones(n, bool))}
        start_s = float(np.nanmin(frames.complete_time_s))
    k = (frames.frame_id - frames.frame_id[0]).astype(float)
    deadline = start_s + startup_delay_s + k / fps
    incomplete = ~np.isfinite(complete)
    late = ~incomplete & (complete > deadline)
    overflow = np.zeros(n, bool)
    if math.isfinite(buffer_bytes):
        waiting: list[tuple[float, int]] = []  # (deadline, size) of frames in the buffer
        held = 0
        for j in np.argsort(complete, kind="stable"):
            if incomplete[j] or late[j]:
                continue
            t = complete[j]
            while waiting and waiting[0][0] < t:
                held -= heapq.heappop(waiting)[1]
            size = int(frames.size_bytes[j])
            if held + size > buffer_bytes:
                overflow[j] = True
                continue
            heapq.heappush(waiting, (deadline[j], size))
            held += size
    admitted = np.where(incomplete | overflow, np.inf, complete)
    # earliest admitted completion among frames j >= k: the buffer is empty at D_k if it is later
    suffix_min = np.minimum.accumulate(admitted[::-1])[::-1]
    empty_at = suffix_min > deadline
    starts = np.flatnonzero(np.diff(np.concatenate([[0], empty_at.astype(np.int8)])) == 1)
    discarded = incomplete | late | overflow
    return {
        "frames": n,
        "played": int(n - np.count_nonzero(discarded)),
        "picture_discards": int(np.count_nonzero(discarded)),
        "late_frames": int(np.count_nonzero(late)),
        "incomplete_frames": int(np.count_nonzero(incomplete)),
        "overflow_discards": int(np.count_nonzero(overflow)),
        "underflow_events": int(starts.size),
        "underflow_frames": int(np.count_nonzero(empty_at)),
        "underflow_s": float(np.count_nonzero(empty_at) / fps),
        "discards_by_type": _by_type(frames.frame_type, discarded),
    }


def _by_type(types, mask) -> dict:
    return {str(t): int(np.count_nonzero(mask & (types == t))) for t in np.unique(types)}

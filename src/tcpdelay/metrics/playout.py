"""Picture discards and playout-buffer underflows of a video pulled over HTTP, from the player's
log of frame arrivals (records of kind ``playout``, :mod:`tcpdelay.traffic.http_player`).

Papers/003 (Watanabe et al., *Performance Characterization of Streaming Video over TCP Variants*,
INTERNET 2013, Sec. V) measures with VLC:

- "Picture discards: number of frames discarded by the video decoder. This measurer defines
  the number of frames skipped by the video rendered at the client side."
- "Buffer underflow: number of buffer underflow events at video client buffer. This measurer
  defines the number of 'catch up' events, where the video freezes and then resumes at a faster
  rate until all late frames have been played out."

Our reading, on the player's schedule: frame ``k`` in display order is due at
``D_k = start + shift + pts_k`` (``start`` the playback start the player logged);

- a frame is **played** when it arrived (all its bytes in the playout buffer) by ``D_k`` (+
  ``late_tolerance_s``: a decoder may still show a slightly late picture, VLC does), and is a
  **picture discard** otherwise;
- the buffer is **empty** at ``D_k`` when no frame due at or after ``D_k`` has arrived by then:
  nothing to show, the picture freezes — an **underflow event**. What follows is the
  ``catch_up`` choice:
  - ``rebuffer`` (default): the player waits until the frames arrived and not yet shown hold
    ``rebuffer_bytes`` (or every frame still to come has arrived), then resumes where it froze;
    later deadlines move by the frozen time (``shift``). This is what players do (VLC refills its
    network caching), and each freeze is one event;
  - ``skip``: the clock never moves (``shift`` = 0): the player catches up by skipping every
    frame that missed its deadline, and an event is a maximal run of empty deadlines (the
    :mod:`tcpdelay.metrics.video` reading for packet records). Under a sustained shortage the
    clock is never caught up again: one long event, every later frame a discard.

  The paper's "resumes at a faster rate until all late frames have been played out" lies between
  the two (no frame skipped, but the clock caught up by playing fast); both count a freeze as one
  event.

A late frame while later ones are already in the buffer (a B frame behind its reference, say) is a
discard without a freeze. The player never overflows its buffer (it pulls only what fits), so
there are no overflow discards. The live player (:func:`tcpdelay.traffic.http_player.pull`)
follows the same rules, so the buffer it frees is the one this accounting assumes.
"""

from __future__ import annotations

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError
from tcpdelay.metrics.video import Frames, playout


CATCH_UP = ("rebuffer", "skip")


def account(pts_s, size_bytes, arrival_s, start_s: float, fps: float, *, frame_type=None,
            late_tolerance_s: float = 0.0, catch_up: str = "rebuffer", rebuffer_bytes: float = 328_000) -> dict:
    """Discards and underflows of one stream (see the module doc). ``pts_s``, ``size_bytes`` and
    ``arrival_s`` (NaN: never arrived) per frame in any order; ``start_s`` the playback start
    (NaN or None: playback never started — every frame is a discard)."""
    checks.positive("fps", fps)
    checks.non_negative("late_tolerance_s", late_tolerance_s)
    if catch_up not in CATCH_UP:
        raise ParameterError(f"catch_up: {catch_up!r} is not one of {', '.join(CATCH_UP)}")
    pts = np.asarray(pts_s, dtype=float)
    size = np.asarray(size_bytes, dtype=np.int64)
    arrival = np.asarray(arrival_s, dtype=float)
    if not (pts.shape == size.shape == arrival.shape):
        raise ParameterError("playout: pts_s, size_bytes and arrival_s must have one length")
    types = np.asarray(frame_type) if frame_type is not None else np.full(pts.size, "")
    order = np.argsort(pts, kind="stable")
    k = np.rint((pts[order] - (pts.min() if pts.size else 0.0)) * fps).astype(np.int64)
    if k.size and np.any(np.diff(k) <= 0):
        raise ParameterError("playout: two frames share a display slot at this fps")
    if start_s is None or not np.isfinite(start_s):
        n = int(pts.size)
        return {"frames": n, "played": 0, "picture_discards": n, "late_frames": 0, "incomplete_frames": n,
                "underflow_events": 1 if n else 0, "underflow_frames": n, "underflow_s": n / fps, "started": False}
    if catch_up == "skip":
        frames = Frames(frame_id=k, frame_type=types[order], size_bytes=size[order], packets=np.ones(pts.size, np.int64),
                        send_time_s=np.full(pts.size, np.nan), complete_time_s=arrival[order])
        out = playout(frames, fps, startup_delay_s=0.0, start_s=float(start_s) + late_tolerance_s)
        out.pop("overflow_discards", None)
        if frame_type is None:
            out.pop("discards_by_type", None)
    else:
        out = _rebuffer(k / fps, size[order], arrival[order], float(start_s), fps, late_tolerance_s, rebuffer_bytes)
    out["started"] = True
    out["catch_up"] = catch_up
    return out


def _rebuffer(due_s, size, arrival, start: float, fps: float, tol: float, rebuffer_bytes: float) -> dict:
    """The ``rebuffer`` reading over frames in display order (``due_s`` from the first's)."""
    n = due_s.size
    a = np.where(np.isnan(arrival), np.inf, arrival)
    suffix_min = np.minimum.accumulate(a[::-1])[::-1] if n else a
    played = np.zeros(n, bool)
    shift = frozen_s = 0.0
    events = 0
    i = 0
    while i < n:
        d = start + shift + due_s[i]
        if a[i] <= d + tol:
            played[i] = True
            i += 1
            continue
        if suffix_min[i] <= d:          # later frames are in: this one is skipped, no freeze
            i += 1
            continue
        # the buffer is empty at d: a freeze until rebuffer_bytes of frames i.. have arrived
        events += 1
        rest = a[i:]
        ok = np.isfinite(rest)
        if not ok.any():                # nothing more ever arrives: frozen to the end
            frozen_s += (n - i) / fps
            break
        by_arrival = np.argsort(rest[ok], kind="stable")
        t_sorted = rest[ok][by_arrival]
        cum = np.cumsum(size[i:][ok][by_arrival])
        j = int(np.searchsorted(cum, rebuffer_bytes))
        resume = float(t_sorted[min(j, t_sorted.size - 1)])
        frozen_s += resume - d
        shift += resume - d
    late = (~played) & np.isfinite(a)
    return {"frames": int(n), "played": int(played.sum()), "picture_discards": int(n - played.sum()),
            "late_frames": int(late.sum()), "incomplete_frames": int((~np.isfinite(a)).sum()),
            "underflow_events": events, "underflow_frames": int(round(frozen_s * fps)), "underflow_s": float(frozen_s)}


def stream_playout(table, flow_id: int, fps: float | None = None, *, late_tolerance_s: float = 0.0,
                   catch_up: str = "rebuffer", rebuffer_bytes: float = 328_000) -> dict:
    """:func:`account` of one stream from a run's ``playout`` records (a pyarrow Table), with the
    playback start's delay after the first byte (``startup_s``) and the frames logged. ``fps``
    defaults to the frames' own (the median spacing of their presentation times)."""
    rows = table.filter(_eq(table, "flow_id", flow_id)).to_pydict()
    ev = np.asarray(rows["event"])
    frame = np.asarray(rows["frame"], dtype=np.int64)
    t = np.asarray(rows["time_s"], dtype=float)
    starts = t[ev == "start"]
    frames = ev != "start"
    if not np.any(frames):
        raise ParameterError(f"playout: stream {flow_id} logged no frame")
    ids, first = np.unique(frame[frames], return_index=True)
    pts = np.asarray(rows["pts_s"], dtype=float)[frames][first]
    size = np.asarray(rows["size_bytes"], dtype=np.int64)[frames][first]
    arrival = t[frames][first]
    start = float(starts.min()) if starts.size else float("nan")
    if fps is None:
        gaps = np.diff(np.sort(pts))
        gaps = gaps[gaps > 0]
        if gaps.size == 0:
            raise ParameterError(f"playout: stream {flow_id}: cannot tell the frame rate from one frame; give fps")
        fps = round(float(1.0 / np.median(gaps)), 3)    # presentation times are rounded to 1 us
    out = account(pts, size, arrival, start, fps, late_tolerance_s=late_tolerance_s, catch_up=catch_up,
                  rebuffer_bytes=rebuffer_bytes)
    first_arrival = np.nanmin(arrival) if np.any(np.isfinite(arrival)) else np.nan
    out["startup_s"] = float(start - first_arrival) if np.isfinite(start) and np.isfinite(first_arrival) else None
    out["frames_arrived"] = int(np.count_nonzero(np.isfinite(arrival)))
    out["fps"] = fps
    return out


def _eq(table, column: str, value):
    import pyarrow.compute as pc

    return pc.equal(table[column], value)

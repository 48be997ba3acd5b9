"""The HTTP player's accounting (metrics/playout.py) on hand-made arrival logs: every case of
the definitions of picture discards and underflow events (papers/003 Sec. V, as read in the
module's docstring), for both catch-up readings: ``skip`` (the clock never moves, late frames are
skipped) and ``rebuffer`` (a freeze lasts until the buffer refills, later deadlines move)."""

import math

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.metrics.playout import account, stream_playout
from tcpdelay.records import RecordWriter, read_records

FPS = 30
START = 100.0


def _on_time(n: int) -> np.ndarray:
    """Each frame arrives 50 ms before it is due."""
    return START + np.arange(n) / FPS - 0.05


def _acc(arrival, pts=None, **kw):
    """The ``skip`` reading unless told (sizes 1000 B: rebuffer_bytes 3000 is 3 frames)."""
    n = len(arrival)
    pts = np.arange(n) / FPS if pts is None else np.asarray(pts)
    kw.setdefault("catch_up", "skip")
    kw.setdefault("rebuffer_bytes", 3000)
    return account(pts, np.full(n, 1000), arrival, START, FPS, **kw)


def test_all_on_time_no_discard_no_underflow():
    got = _acc(_on_time(60))
    assert (got["played"], got["picture_discards"], got["underflow_events"], got["underflow_s"]) == (60, 0, 0, 0.0)


def test_a_late_frame_with_later_ones_already_in_is_a_discard_without_underflow():
    arr = _on_time(30)
    arr[5] = START + 5 / FPS + 0.01          # late, but frame 6 is already in the buffer
    got = _acc(arr)
    assert (got["picture_discards"], got["late_frames"], got["underflow_events"]) == (1, 1, 0)


def test_a_stall_over_several_deadlines_is_one_event_with_its_discards_and_frozen_time():
    arr = _on_time(30)
    arr[5:] = np.maximum(arr[5:], START + 0.31)   # frames 5..9 (due 0.167..0.300) late; 10 (0.333) on time
    got = _acc(arr)
    assert got["picture_discards"] == 5 and got["underflow_events"] == 1
    assert got["underflow_frames"] == 5 and got["underflow_s"] == pytest.approx(5 / FPS)


def test_two_stalls_are_two_events():
    arr = _on_time(60)
    arr[5:] = np.maximum(arr[5:], START + 0.31)    # 5 frames
    arr[30:] = np.maximum(arr[30:], START + 1.12)  # frames 30..33 (due 1.0..1.1) late
    got = _acc(arr)
    assert got["underflow_events"] == 2 and got["picture_discards"] == 5 + 4
    assert got["underflow_frames"] == 9


def test_frames_that_never_arrived_are_discards_and_an_underflow_at_the_end():
    arr = _on_time(30)
    arr[25:] = np.nan
    got = _acc(arr)
    assert (got["picture_discards"], got["incomplete_frames"], got["underflow_events"]) == (5, 5, 1)


def test_deadlines_go_by_presentation_time_not_file_order():
    """B frames: file (decode) order I0 P3 B1 B2 P6 B4 B5; P3 arrives in time for its slot but
    the B frames behind it come after their deadlines D1 = 33 ms, D2 = 67 ms: 2 discards, and one
    freeze at D1, D2 (nothing due then or later had arrived by D1; by D3 P3 had)."""
    pts = np.array([0, 3, 1, 2, 6, 4, 5]) / FPS
    arr = START + np.array([-0.05, 0.09, 0.095, 0.095, 0.1, 0.11, 0.12])
    got = _acc(arr, pts=pts)
    assert got["picture_discards"] == 2 and got["late_frames"] == 2
    assert got["underflow_events"] == 1 and got["underflow_frames"] == 2


def test_a_tolerance_lets_a_slightly_late_frame_play():
    arr = _on_time(10)
    arr[4] = START + 4 / FPS + 0.01
    arr[5:] = np.maximum(arr[5:], arr[4])
    assert _acc(arr)["picture_discards"] == 1
    assert _acc(arr, late_tolerance_s=0.02)["picture_discards"] == 0


def test_playback_that_never_started_discards_everything():
    got = account(np.arange(5) / FPS, np.ones(5), np.full(5, np.nan), float("nan"), FPS)
    assert (got["played"], got["picture_discards"], got["started"]) == (0, 5, False)


def test_bad_logs_are_errors():
    with pytest.raises(ParameterError, match="one length"):
        account(np.zeros(2), np.zeros(3), np.zeros(2), START, FPS)
    with pytest.raises(ParameterError, match="share a display slot"):
        account(np.zeros(2), np.ones(2), np.zeros(2), START, FPS)


def test_from_the_players_records(tmp_path):
    """The same accounting from a run's ``playout`` records: arrivals, the start, never-arrived."""
    w = RecordWriter(tmp_path, "playout", writer_id="t")
    arr = _on_time(20)
    arr[5:] = np.maximum(arr[5:], START + 0.31)
    rows = [(7, "arrival", k, k / FPS, 1000, 1000 * (k + 1), float(arr[k])) for k in range(18)]
    rows.insert(3, (7, "start", -1, math.nan, 0, 0, START))
    rows += [(7, "never", k, k / FPS, 1000, 1000 * (k + 1), math.nan) for k in (18, 19)]
    rows.append((8, "start", -1, math.nan, 0, 0, 0.0))    # another stream's
    w.extend(rows)
    w.close()
    got = stream_playout(read_records(tmp_path, "playout"), 7, FPS, catch_up="skip")
    assert got["picture_discards"] == 5 + 2 and got["underflow_events"] == 2
    assert got["frames_arrived"] == 18 and got["startup_s"] == pytest.approx(0.05)


# --------------------------------------------------------------------------- rebuffer


def test_rebuffer_a_stall_freezes_until_the_buffer_refills_then_plays_on():
    """Frames 5.. arrive at 0.31 s: the picture freezes at D5 = 0.167 s until 3 frames are in
    (0.31 s), then goes on 0.143 s late with nothing skipped."""
    arr = _on_time(30)
    arr[5:] = np.maximum(arr[5:], START + 0.31)
    got = _acc(arr, catch_up="rebuffer")
    assert (got["underflow_events"], got["picture_discards"], got["played"]) == (1, 0, 30)
    assert got["underflow_s"] == pytest.approx(0.31 - 5 / FPS)


def test_rebuffer_waits_for_rebuffer_bytes_not_for_the_first_frame():
    """Frame 5 at 0.31 s, 6 at 0.40 s, 7 at 0.50 s: with 3 frames to refill, playback resumes at
    0.50 s (the freeze lasts 0.333 s)."""
    arr = _on_time(30)
    arr[5], arr[6], arr[7:] = START + 0.31, START + 0.40, np.maximum(arr[7:], START + 0.50)
    got = _acc(arr, catch_up="rebuffer")
    assert got["underflow_events"] == 1 and got["underflow_s"] == pytest.approx(0.50 - 5 / FPS)
    assert got["picture_discards"] == 0


def test_rebuffer_a_sustained_shortage_is_many_freezes_where_skip_sees_one():
    """Frames arrive at 80 % of the frame rate: with a 10-frame refill the player freezes again
    and again (each a short wait); never moving the clock it is one long freeze."""
    n = 300
    arr = START - 0.2 + np.arange(n) / (0.8 * FPS)
    reb = _acc(arr, catch_up="rebuffer", rebuffer_bytes=10_000)
    skip = _acc(arr, catch_up="skip")
    assert reb["underflow_events"] >= 5 and reb["picture_discards"] == 0
    assert skip["underflow_events"] == 1 and skip["picture_discards"] > 200


def test_rebuffer_a_late_b_frame_is_still_a_discard_without_a_freeze():
    arr = _on_time(30)
    arr[5] = START + 5 / FPS + 0.01
    got = _acc(arr, catch_up="rebuffer")
    assert (got["picture_discards"], got["underflow_events"]) == (1, 0)


def test_rebuffer_frames_that_never_arrive_freeze_to_the_end():
    arr = _on_time(30)
    arr[25:] = np.nan
    got = _acc(arr, catch_up="rebuffer")
    assert (got["underflow_events"], got["picture_discards"], got["incomplete_frames"]) == (1, 5, 5)


def test_an_unknown_catch_up_is_an_error():
    with pytest.raises(ParameterError, match="catch_up"):
        _acc(_on_time(3), catch_up="pause")

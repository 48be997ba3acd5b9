"""Picture discards and playout-buffer underflow events (Watanabe et al.) from frame arrivals
against the playout schedule, and the TCP retransmission counts of run.json."""

import math

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.metrics import video
from tcpdelay.metrics.tcp_stats import retransmissions_by_flow, run_duration_s

NAN = float("nan")


def _frames(complete, sizes=None, types=None):
    n = len(complete)
    return video.Frames(np.arange(n), np.array(types or ["I"] * n),
                        np.array(sizes or [1000] * n), np.ones(n, int),
                        np.arange(n) * 0.1, np.array(complete, float))


def test_frames_from_packets_groups_and_drops_a_truncated_last_frame():
    fid = [0, 0, 1, 1, 2]
    ftype = ["I", "I", "P", "P", "B"]
    last = [False, True, False, True, False]  # frame 2 never got its last packet (run cut)
    size = [1446, 100, 500, 600, 50]
    send = [0.0, 0.0, 0.04, 0.04, 0.08]
    recv = [0.05, 0.06, 0.09, NAN, 0.13]
    fr = video.frames_from_packets(fid, ftype, last, size, send, recv)
    assert fr.frame_id.tolist() == [0, 1]
    assert fr.size_bytes.tolist() == [1546, 1100]
    assert fr.complete_time_s[0] == pytest.approx(0.06)
    assert math.isnan(fr.complete_time_s[1])  # a packet never arrived
    assert fr.frame_type.tolist() == ["I", "P"]


def test_playout_discards_and_underflows_by_hand():
    # fps 10, startup 0.5 s, the first frame arrives at 0.1 s:
    # deadlines D_k = 0.1 + 0.5 + 0.1 k = 0.6, 0.7, 0.8, 0.9, 1.0, 1.1
    complete = [0.10, 0.20, 0.95, 0.96, 0.97, NAN]
    r = video.playout(_frames(complete), 10.0, startup_delay_s=0.5)
    # frames 2, 3 complete after their deadlines (late), 5 never complete: 3 discards
    assert (r["played"], r["picture_discards"]) == (3, 3)
    assert (r["late_frames"], r["incomplete_frames"], r["overflow_discards"]) == (2, 1, 0)
    # earliest completion among frames >= k: .1 .2 .95 .96 .97 inf; the buffer is empty at D_k
    # when that is later than D_k: k = 2 (.95 > .8), 3 (.96 > .9), 5 (inf) -> runs {2,3}, {5}
    assert (r["underflow_events"], r["underflow_frames"]) == (2, 3)
    assert r["underflow_s"] == pytest.approx(0.3)


def test_a_late_frame_with_later_frames_buffered_is_a_discard_but_no_underflow():
    # deadlines 0.6, 0.7, 0.8: frame 1 is late (0.75) but frame 2 is already there (0.3)
    r = video.playout(_frames([0.1, 0.75, 0.3]), 10.0, startup_delay_s=0.5)
    assert r["late_frames"] == 1 and r["underflow_events"] == 0


def test_finite_playout_buffer_overflows():
    # 1000-byte frames, 1500-byte buffer. Frame 0 waits from 0.1 to 0.6; frame 1 completes at 0.2
    # when 1000 B are held: 1000 + 1000 > 1500 -> overflow. Frame 4 at 0.97: frames 0, 1 are
    # played by then, so it fits.
    complete = [0.10, 0.20, 0.95, 0.96, 0.97, NAN]
    r = video.playout(_frames(complete), 10.0, startup_delay_s=0.5, buffer_bytes=1500)
    assert r["overflow_discards"] == 1 and r["picture_discards"] == 4
    # with frame 1 gone the buffer is also empty at D_1 (next admitted completion .95 > .7):
    # empty at k = 1, 2, 3, 5 -> runs {1,2,3}, {5}
    assert (r["underflow_events"], r["underflow_frames"]) == (2, 4)
    assert r["discards_by_type"] == {"I": 4}


def test_infer_fps_and_its_errors():
    fr = video.Frames(np.array([0, 1, 3]), np.array(["I", "B", "B"]), np.ones(3, int),
                      np.ones(3, int), np.array([0.0, 0.04, 0.12]), np.zeros(3))
    assert video.infer_fps(fr) == pytest.approx(25.0)
    # send times jittered by up to +-5 ms around k/30 over 3000 frames: the slope stays at 30 fps
    k = np.arange(3000)
    jitter = np.random.default_rng(1).uniform(-0.005, 0.005, k.size)
    fr2 = video.Frames(k, np.array(["P"] * k.size), np.ones(k.size, int), np.ones(k.size, int),
                       k / 30 + jitter, np.zeros(k.size))
    assert video.infer_fps(fr2) == pytest.approx(30.0, rel=1e-4)
    with pytest.raises(ParameterError):
        video.infer_fps(_frames([0.1]))


def test_retransmissions_from_tcp_stats_or_the_sender_section():
    meta = {"tcp_stats": [{"flow_id": 0, "connection": 0, "total_retrans": 3},
                          {"flow_id": 0, "connection": 1, "total_retrans": 4},
                          {"flow_id": 2, "connection": 0, "total_retrans": 0}]}
    assert retransmissions_by_flow(meta) == {0: 7, 2: 0}
    sender = {"sender": {"params": {"flow_id": 5, "transport": "tcp", "duration_s": 30},
                         "result": {"tcp_info_end": [{"total_retrans": 2}, {"total_retrans": 9}]}}}
    assert retransmissions_by_flow(sender) == {5: 11}
    assert run_duration_s(sender) == 30.0
    assert retransmissions_by_flow({}) == {}
    with pytest.raises(ParameterError, match="tcp_stats"):
        retransmissions_by_flow({"tcp_stats": [{"flow_id": 0}]})

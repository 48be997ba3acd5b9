"""Joining sent and received records: loss, sender drops, duplicates, inference from sequence
numbers, unsynchronized clocks, and the errors of a bad results directory."""

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.results.packets import load_flows
from tcpdelay.records import RecordWriter, write_run_metadata


def _write(run, sent_rows, recv_rows, meta=None):
    if sent_rows:
        with RecordWriter(run, "sent", writer_id="s") as w:
            for fid, seq, t, dropped in sent_rows:
                w.append(flow_id=fid, connection=0, seq=seq, size_bytes=172, send_time_s=t,
                         frame_id=-1, frame_type="", frame_last=True, dropped=dropped)
    if recv_rows:
        with RecordWriter(run, "received", writer_id="r") as w:
            for fid, seq, t, r in recv_rows:
                w.append(flow_id=fid, connection=0, seq=seq, size_bytes=172, send_time_s=t,
                         recv_time_s=r)
    if meta is not None:
        write_run_metadata(run, meta)


def test_join_marks_lost_dropped_and_duplicates(tmp_path):
    sent = [(0, s, s * 0.02, s == 3) for s in range(6)]
    # seq 1 lost, 3 dropped by the sender, 4 read twice (first at 0.13)
    recv = [(0, 0, 0.00, 0.05), (0, 2, 0.04, 0.09), (0, 4, 0.08, 0.14), (0, 4, 0.08, 0.13),
            (0, 5, 0.10, 0.15), (0, 6, 0.12, 0.17)]  # seq 6 has no sent record
    _write(tmp_path, sent, recv)
    (f,), meta = load_flows(tmp_path)
    assert f.seq.tolist() == [0, 1, 2, 3, 4, 5]
    assert f.lost.tolist() == [False, True, False, False, False, False]
    assert f.dropped.tolist() == [False, False, False, True, False, False]
    assert f.missing.tolist() == [False, True, False, True, False, False]
    assert f.duplicates == 1 and f.unmatched_received == 1
    assert f.recv_time_s[4] == pytest.approx(0.13)  # first arrival kept
    assert np.allclose(f.delay_s[[0, 2, 4, 5]], [0.05, 0.05, 0.05, 0.05])
    assert meta == {}


def test_without_sent_records_packets_are_inferred_from_sequence_numbers(tmp_path):
    _write(tmp_path, [], [(7, 10, 0.2, 0.25), (7, 13, 0.26, 0.31)])
    (f,), _ = load_flows(tmp_path)
    # expected = 13 - 10 + 1 = 4 packets (RFC 3550 A.3); 11 and 12 lost
    assert f.inferred and f.flow_id == 7
    assert f.seq.tolist() == [10, 11, 12, 13]
    assert f.lost.tolist() == [False, True, True, False]


def test_unsynchronized_clocks_report_delay_relative_to_the_run_minimum(tmp_path):
    # receiver clock is 1000 s ahead: raw delays 1000.05, 1000.08
    sent = [(0, 0, 0.0, False), (0, 1, 0.02, False)]
    recv = [(0, 0, 0.0, 1000.05), (0, 1, 0.02, 1000.10)]
    _write(tmp_path, sent, recv, {"clock": "unsynchronized"})
    (f,), meta = load_flows(tmp_path)
    assert f.clock_offset_s == pytest.approx(1000.05)
    assert f.delay_s == pytest.approx([0.0, 0.03])


def test_sender_records_in_their_own_directory(tmp_path):
    snd, rcv = tmp_path / "snd", tmp_path / "rcv"
    _write(snd, [(0, 0, 0.0, False), (0, 1, 0.02, False)], [], {"clock": "unsynchronized",
                                                                "sender": {"x": 1}})
    _write(rcv, [], [(0, 1, 0.02, 5.0)], {"clock": "unsynchronized"})
    (f,), meta = load_flows(rcv, snd)
    assert f.lost.tolist() == [True, False] and not f.inferred
    assert meta["sender"] == {"x": 1}


def test_bad_results_directories(tmp_path):
    with pytest.raises(ParameterError, match="does not exist"):
        load_flows(tmp_path / "nope")
    with pytest.raises(ParameterError, match="no packet records"):
        load_flows(tmp_path)
    _write(tmp_path, [(0, 0, 0.0, False)], [(1, 0, 0.0, 0.1)])
    with pytest.raises(ParameterError, match="no sent records"):
        load_flows(tmp_path)

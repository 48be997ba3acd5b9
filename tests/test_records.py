"""The per-packet record files: parts survive interruption, readers see all of them."""

import math
import time

from tcpdelay.records import RecordWriter, read_records, read_run_metadata, write_run_metadata


def _recv_row(seq):
    return dict(flow_id=1, connection=0, seq=seq, size_bytes=174, send_time_s=seq * 0.02,
                recv_time_s=seq * 0.02 + 0.05)


def test_parts_are_flushed_as_they_fill_and_read_back_in_order(tmp_path):
    w = RecordWriter(tmp_path, "received", writer_id="t", flush_rows=10, flush_interval_s=1e9)
    for seq in range(25):
        w.append(**_recv_row(seq))
    # 2 full parts are on disk before close: an interrupted run keeps them
    assert read_records(tmp_path, "received").num_rows == 20
    w.close()
    table = read_records(tmp_path, "received")
    assert table.column("seq").to_pylist() == list(range(25))
    assert math.isclose(table.column("recv_time_s")[3].as_py(), 0.11)


def test_missing_kind_reads_as_empty_table_with_schema(tmp_path):
    table = read_records(tmp_path, "sent")
    assert table.num_rows == 0 and "frame_type" in table.schema.names


def test_run_metadata_round_trip(tmp_path):
    write_run_metadata(tmp_path, {"clock": "shared-monotonic", "profile": "voip"})
    assert read_run_metadata(tmp_path)["clock"] == "shared-monotonic"


def test_writers_started_together_flush_at_instants_spread_over_the_interval(tmp_path):
    # 160 real-time media programs started together all flushed ~1 s in, at once, and delayed
    # every packet of that moment; each writer's first flush is now due at its own offset.
    writers = [RecordWriter(tmp_path, "received", writer_id=f"receiver-{k}", flush_interval_s=1.0)
               for k in range(80)]
    due = sorted(w._last_flush + w.flush_interval_s for w in writers)
    assert due[-1] - due[0] > 0.8                      # spread over the interval
    gaps = [b - a for a, b in zip(due, due[1:])]
    assert max(gaps) < 0.2                             # no long stretch without a flush
    for w in writers:
        w.close()
    assert read_records(tmp_path, "received").num_rows == 0


def test_a_writer_flushes_after_its_interval_even_when_offset(tmp_path):
    w = RecordWriter(tmp_path, "received", writer_id="receiver-offset", flush_interval_s=0.05)
    w.append(**_recv_row(0))
    time.sleep(0.06)                                    # beyond any offset: a part is due
    w.append(**_recv_row(1))
    assert read_records(tmp_path, "received").num_rows == 2
    w.close()

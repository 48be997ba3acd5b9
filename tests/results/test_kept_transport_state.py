"""A sweep's kept transport state (``transport_state.parquet``): written from the runs' own
``quic_state`` / ``tcp_state`` records, read back per run; a UDP run has none and is left out,
any other run without records is refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tcpdelay.records import RecordWriter
from tcpdelay.results.kept_transport_state import keep_transport_state, kept_transport_state


def _run(tmp_path, name, transport):
    d = tmp_path / name / "seed-1"
    (d / "flows" / "0").mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"run": {"media": [{"sender": {"transport": transport}}]}}))
    return d


def test_quic_and_tcp_samples_are_kept_and_read_back_and_udp_is_left_out(tmp_path):
    quic = _run(tmp_path, "q", "quic-stream")
    w = RecordWriter(quic / "flows" / "0", "quic_state", writer_id="t")
    for i in range(3):
        w.append(flow_id=0, connection=0, time_s=10.0 + 0.01 * i, cwnd_bytes=12000 + i, ssthresh_bytes=None,
                 bytes_in_flight=11000, srtt_s=0.1 if i else None, rttvar_s=None, min_rtt_s=None,
                 lost_packets_total=0, ptos_total=0, pto_count=0)
    w.close()
    tcp = _run(tmp_path, "t", "tcp")
    w = RecordWriter(tcp, "tcp_state", writer_id="t")     # the run's sampler writes it in the run directory
    for i, fid in enumerate((0, 0, 1)):
        w.append(flow_id=fid, connection=0, time_s=5.0 + i, cwnd_segments=10, ssthresh_segments=None, srtt_s=0.02,
                 rttvar_s=None, delivery_rate_bps=None, retransmits_total=0, ca_state=0, bytes_acked=0,
                 mss_bytes=1448, pacing_rate_bps=None, cc_state_0=None, cc_state_1=None, cc_state_2=None,
                 cc_state_3=None)
    w.close()
    udp = _run(tmp_path, "u", "udp")
    runs = [{"cell_id": "q", "seed": 1, "dir": quic}, {"cell_id": "t", "seed": 1, "dir": tcp},
            {"cell_id": "u", "seed": 1, "dir": udp}]
    assert keep_transport_state(tmp_path, runs) == 3 + 2     # flow 0's TCP samples only
    kept = kept_transport_state(tmp_path)
    assert set(kept) == {("q", 1), ("t", 1)}
    q, t = kept[("q", 1)], kept[("t", 1)]
    assert list(q["time_s"]) == pytest.approx([0.0, 0.01, 0.02]) and list(q["cwnd_bytes"]) == [12000, 12001, 12002]
    assert np.isnan(q["srtt_s"][0]) and q["srtt_s"][1] == 0.1 and list(q["bytes_in_flight"]) == [11000] * 3
    assert list(t["cwnd_bytes"]) == [14480.0, 14480.0] and np.isnan(t["bytes_in_flight"]).all()
    # a QUIC or TCP run whose records stayed elsewhere: refused, naming it
    bare = _run(tmp_path, "b", "quic-datagram")
    with pytest.raises(FileNotFoundError, match=str(bare)):
        keep_transport_state(tmp_path, runs + [{"cell_id": "b", "seed": 1, "dir": bare}])

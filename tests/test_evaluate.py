"""The main job writes a self-contained report with the default paths."""

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_evaluate_writes_report_and_json(tmp_path):
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "evaluate", "--out", str(tmp_path), "--json"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    html = (tmp_path / "report.html").read_text()
    assert doc["report_path"] == str(tmp_path / "report.html")
    # self-contained: figures embedded, nothing fetched
    assert "data:image/png;base64," in html and "src='http" not in html
    paths = doc["throughput"]["paths"]
    assert len(paths) == 12  # RTT 20/100/300 ms x loss 0/0.1/1/5 %
    lossy = [p for p in paths if p["loss"] > 0]
    assert all(p["pftk_bps"] > 0 for p in lossy)
    assert all(p["pftk_bps"] is None for p in paths if p["loss"] == 0)  # unbounded without loss
    transfers = doc["latency"]["transfers"]
    assert len(transfers) == 12 * 3
    # more loss never makes the expected latency shorter, on any path and size
    for size in {t["size_bytes"] for t in transfers}:
        for rtt in {t["rtt_s"] for t in transfers}:
            series = sorted((t["loss"], t["total_mean_s"]) for t in transfers
                            if t["size_bytes"] == size and t["rtt_s"] == rtt)
            means = [m for _, m in series]
            assert means == sorted(means), (size, rtt, series)
            # no transfer beats one RTT of handshake plus one RTT of data
            assert means[0] >= 2 * rtt * 0.999
    # working regions: longer paths tolerate less loss (the model's region shrinks with RTT)
    for name in ("voip", "video"):
        by_rtt = {m["rtt_s"]: m["max_loss"] for m in doc["regions"][name]["max_loss_by_rtt"]}
        assert set(by_rtt) == {0.02, 0.1, 0.3}
        assert by_rtt[0.3] is not None and by_rtt[0.1] is not None
        assert by_rtt[0.3] < by_rtt[0.1]
    assert doc["regions"]["voip"]["percentile"] == 95 and doc["regions"]["voip"]["bound_s"] == 0.2
    # playout advice: L + RTT + 3/f, and it leaves at most 5 % of VoIP packets late (Brosh et al. §6.6)
    for adv in doc["playout"]["voip"]:
        assert adv["recommended_playout_s"] == adv["one_way_s"] + adv["rtt_s"] + 3 * 0.02
        assert adv["late_fraction_at_recommended"] <= 0.05
    assert "Working regions of media over TCP" in html and "Playout delay" in html
    # the short measured check: measured where the testbed runs (root, TUN, emulator built — as
    # in CI), otherwise a plain note saying why
    from tcpdelay.experiments.measured_check import testbed_unavailable

    check = doc["measured_check"]
    reason = testbed_unavailable()
    if reason is None:
        assert check["measured"] is True and len(check["points"]) == 3 and not check["failed"]
        assert "Model vs a short measurement on the testbed" in html
    else:
        assert check["measured"] is False and check["reason"] == reason and "Not measured" in html

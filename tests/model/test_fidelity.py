"""How far to trust the delay model near a query (tcpdelay.fidelity) on the committed table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tcpdelay.fidelity import load_table, nearby_error, summary_text


def _table():
    pts = [{"profile": "voip", "rtt_s": r, "loss": p, "stable": True, "mean_error": e, "p95_error": -e,
            "origin": "t"} for r, p, e in ((0.1, 0.01, 0.02), (0.1, 0.02, -0.05), (0.3, 0.02, 0.3),
                                          (0.02, 0.01, 0.01), (0.1, 0.05, 0.5))]
    return {"results": [{"stack": "linux", "source": "testbed", "points": pts}]}


def test_nearest_points_and_their_worst_error():
    err = nearby_error(stack="linux", rtt_s=0.1, loss=0.015, profile="voip", rate_pps=50, table=_table())
    assert [(p["rtt_s"], p["loss"]) for p in err["points"][:2]] == [(0.1, 0.02), (0.1, 0.01)]
    assert err["in_validated_range"] and not err["warnings"]
    assert err["max_abs_mean_error"] == pytest.approx(max(abs(p["mean_error"]) for p in err["points"]))
    assert "mean within" in summary_text(err)


def test_outside_the_measured_range_warns():
    err = nearby_error(stack="linux", rtt_s=0.6, loss=0.2, profile="voip", rate_pps=100, split=2, table=_table())
    text = " ".join(err["warnings"])
    assert not err["in_validated_range"]
    for piece in ("RTT 600 ms", "loss 20 %", "100 packets/s", "split-N"):
        assert piece in text
    none = nearby_error(stack="classic", rtt_s=0.1, loss=0.01, table=_table())
    assert none["max_abs_mean_error"] is None and "not measured" in summary_text(none)


def test_the_measurements_own_uncertainty_is_reported_and_named_when_large():
    table = _table()
    for p, se in zip(table["results"][0]["points"], (0.004, 0.05, 0.1, None, 0.2)):
        p["measured_mean_rel_se"] = se
    err = nearby_error(stack="linux", rtt_s=0.1, loss=0.015, profile="voip", rate_pps=50, table=table)
    got = {(p["rtt_s"], p["loss"]): p["measured_mean_rel_se"] for p in err["points"]}
    assert got[(0.1, 0.01)] == 0.004 and got[(0.1, 0.02)] == 0.05
    assert err["max_measured_mean_rel_se"] == max(v for v in got.values() if v is not None)
    assert f"uncertain by up to {err['max_measured_mean_rel_se'] * 100:.0f} %" in summary_text(err)
    # small uncertainties are not worth a word
    for p in table["results"][0]["points"]:
        p["measured_mean_rel_se"] = 0.01
    quiet = nearby_error(stack="linux", rtt_s=0.1, loss=0.015, profile="voip", rate_pps=50, table=table)
    assert quiet["max_measured_mean_rel_se"] == 0.01 and "uncertain" not in summary_text(quiet)


def test_committed_table_has_both_stacks_against_their_sources():
    doc = load_table()
    have = {(r["stack"], r["source"]) for r in doc["results"]}
    assert {("linux", "testbed"), ("classic", "ns3"), ("paper", "testbed"), ("paper", "ns3")} <= have
    for r in doc["results"]:
        assert r["points"] and all({"profile", "rtt_s", "loss", "mean_error", "p95_error"} <= set(p) for p in r["points"])
        # pooled runs give each measured mean its standard error
        assert any((p.get("measured_mean_rel_se") or 0) > 0 for p in r["points"])


def test_delay_and_advise_json_carry_the_error():
    def run(*args):
        out = subprocess.run([sys.executable, "-m", "tcpdelay", *args, "--json"], capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)
    d = run("delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02")
    assert d["model_error"]["stack"] == "linux" and d["model_error"]["points"]
    a = run("advise", "--profile", "voip", "--rtt-s", "0.5", "--loss", "0.02", "--stack", "classic")
    assert a["model_error"]["source"] == "ns3" and not a["model_error"]["in_validated_range"]

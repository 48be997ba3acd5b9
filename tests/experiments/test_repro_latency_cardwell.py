"""papers/001 (Cardwell, Savage, Anderson, "Modeling TCP Latency") reproduced on ns-3: the
committed summaries (the page docs/experiments/latency-cardwell.md quotes them) are what
tcpdelay.reproductions.tcp_latency computes from the committed runs, and what they say holds
of the runs."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from tcpdelay.reproductions import tcp_latency as repro  # noqa: E402

RESULTS = {"latency-cardwell-fig3": "handshake", "latency-cardwell-fig4": "handshake",
           "latency-cardwell-lossfree": "lossfree", "latency-cardwell-loss": "loss",
           "latency-cardwell-loss-nosack": "loss", "latency-cardwell-fig3-linux": "handshake",
           "latency-cardwell-lossfree-linux": "lossfree", "latency-cardwell-loss-iw10": "loss",
           "latency-cardwell-lte-verizon": "lte", "latency-cardwell-lte-tmobile": "lte", "latency-cardwell-lte-att": "lte",
           "latency-cardwell-lossfree-state": "state", "latency-cardwell-loss-state": "window",
           "latency-cardwell-loss-iw10-state": "window",
           "latency-cardwell-lossfree-linux-rtt64": "lossfree", "latency-cardwell-lossfree-linux-rtt16": "lossfree",
           "latency-cardwell-lossfree-linux-rtt256": "lossfree", "latency-cardwell-lossfree-paper": "lossfree",
           "latency-cardwell-loss-paper": "loss", "latency-cardwell-loss-linux": "loss",
           "latency-cardwell-lossfree-linux-iw10": "lossfree", "latency-cardwell-loss-linux-iw10": "loss",
           "latency-cardwell-lossfree-grid": "lossfree", "latency-cardwell-fig4-linux": "handshake",
           "latency-cardwell-lte-verizon-linux": "lte", "latency-cardwell-lte-tmobile-linux": "lte",
           "latency-cardwell-lte-att-linux": "lte", "latency-cardwell-lossfree-grid-linux": "lossfree",
           "latency-cardwell-loss-linux-iw10-1mb": "loss", "latency-cardwell-loss-linux-iw10-state": "window",
           "latency-cardwell-loss-linux-state": "window"}
COMMITTED = [n for n in RESULTS if (ROOT / "results" / n / "summary.json").exists()]


def test_the_reproductions_are_committed():
    assert COMMITTED, "no committed results/latency-cardwell-*/summary.json"


@pytest.mark.parametrize("name", COMMITTED)
def test_summary_recomputes_from_the_committed_runs(name):
    sweep = ROOT / "results" / name
    want = json.loads((sweep / "summary.json").read_text())
    assert repro.summary(RESULTS[name], sweep) == want


@pytest.mark.parametrize("name", [n for n in COMMITTED if RESULTS[n] == "handshake"])
def test_handshake_rows_are_compared_at_their_backends_syn_timeout(name):
    """ns-3 runs against the paper's T_s = 3 s (ns-3's ConnTimeout), testbed runs against
    Linux's 1 s; the result's name says which backend it is."""
    rows = json.loads((ROOT / "results" / name / "summary.json").read_text())["rows"]
    want = ("testbed", 1.0) if name.endswith("-linux") else ("ns3-simulation", 3.0)
    for r in rows:
        assert (r["backend"], r["syn_timeout_s"]) == want and r["rtt_s"] == pytest.approx(0.07)
        assert r["trials"] >= 100
        assert r["mean_s"] >= r["rtt_s"] - 1e-6


PAGE = ROOT / "docs" / "experiments" / "latency-cardwell.md"
#: each committed summary's tables on the page: (marker, the table part of markdown())
TABLES = repro.PAGE_TABLES


def test_every_committed_summary_has_its_table_on_the_page():
    assert set(COMMITTED) <= set(TABLES), sorted(set(COMMITTED) - set(TABLES))


@pytest.mark.parametrize("name", COMMITTED)
def test_the_pages_tables_are_the_committed_summaries(name):
    """Each table of docs/experiments/latency-cardwell.md follows its ``<!-- marker -->`` and is
    the script's table of the committed summary."""
    page = PAGE.read_text()
    for marker, part in TABLES[name]:
        marker = f"<!-- {marker} -->\n"
        assert marker in page, marker
        table = page.split(marker, 1)[1].split("\n\n", 1)[0]
        assert table == repro.markdown(json.loads((ROOT / "results" / name / "summary.json").read_text()), part)


@pytest.mark.parametrize("name", [n for n in COMMITTED if RESULTS[n] == "loss"])
def test_loss_rows_class_every_transfer_and_pool_them(name):
    """Each cell's transfers fall in exactly one of papers/001's classes, none given up, and the
    pooled row counts every transfer of the sweep; the §II-E distribution's mean is eq (25)'s
    within a third (they differ only by averaging over loss scenarios)."""
    rows = json.loads((ROOT / "results" / name / "summary.json").read_text())["rows"]
    cells, pooled = rows[:-1], rows[-1]
    grid = tomllib.loads((ROOT / "experiments" / f"{name}.toml").read_text())["sweep"]
    assert pooled["cell"] == "all" and len(cells) == math.prod(len(v) for v in grid.values())
    backend = "testbed" if "-linux" in name else "ns3-simulation"
    cross = tomllib.loads((ROOT / "experiments" / f"{name}.toml").read_text())["cross"][0]
    for r in cells:
        assert r["backend"] == backend and r["incomplete"] == 0
        assert r["transfers"] == cross["transfers"] * cross.get("count", 1)
        assert r["no_loss_n"] + r["fast_retransmit_n"] + r["rto_n"] == r["transfers"]
        assert r["dist_mean_s"] == pytest.approx(r["model_s"], rel=1 / 3)
    for k in ("no_loss_n", "fast_retransmit_n", "rto_n", "transfers"):
        assert pooled[k] == sum(r[k] for r in cells)


def test_class_errors_against_hand_computed_flows():
    """Figs 11-13's statistics: (modeled - measured) / RTT for loss-free flows, relative error
    (modeled - measured) / measured for the others, medians over each class."""
    f = [{"class": "no_loss", "transfer_s": 0.5, "rtt_s": 0.1, "eq25_s": 0.4, "pftk_s": None, "mathis_s": None},
         {"class": "no_loss", "transfer_s": 0.7, "rtt_s": 0.1, "eq25_s": 0.4, "pftk_s": None, "mathis_s": None},
         {"class": "no_loss", "transfer_s": 0.4, "rtt_s": 0.1, "eq25_s": 0.4, "pftk_s": None, "mathis_s": None},
         {"class": "fast_retransmit", "transfer_s": 1.0, "rtt_s": 0.1, "eq25_s": 2.0, "pftk_s": 1.5, "mathis_s": 0.5},
         {"class": "rto", "transfer_s": 2.0, "rtt_s": 0.1, "eq25_s": 1.0, "pftk_s": 3.0, "mathis_s": 2.0},
         {"class": "rto", "transfer_s": 4.0, "rtt_s": 0.1, "eq25_s": 1.0, "pftk_s": 3.0, "mathis_s": 2.0}]
    e = repro._class_errors(f)
    assert e["no_loss_n"] == 3 and e["no_loss_median_err_rtts"] == pytest.approx(-1.0)
    assert e["no_loss_within_1rtt"] == pytest.approx(2 / 3, abs=1e-3)
    assert e["no_loss_median_rel_err"] == pytest.approx(-0.2)
    assert (e["fast_retransmit_eq25_median_rel_err"], e["fast_retransmit_pftk_median_rel_err"],
            e["fast_retransmit_mathis_median_rel_err"]) == pytest.approx((1.0, 0.5, -0.5))
    assert e["rto_n"] == 2 and e["rto_eq25_median_rel_err"] == pytest.approx((-0.5 - 0.75) / 2)
    assert e["rto_pftk_median_rel_err"] == pytest.approx((0.5 - 0.25) / 2)
    assert repro.flow_loss_rate({"retransmits": 4}, 46) == pytest.approx(4 / 50)
    assert repro.flow_loss_rate({"retransmits": 0}, 46) == 0


@pytest.mark.parametrize("name", [n for n in COMMITTED if RESULTS[n] == "lte"])
def test_lte_rows_are_the_repositorys_trace_and_whole(name):
    """Each LTE cell ran over the trace its file names (the repository's copy, by name), every
    transfer finished, and the handshake RTT is at least the configured base RTT."""
    scenario = name.removesuffix("-linux")   # the testbed's runs of the same file
    trace = tomllib.loads((ROOT / "experiments" / f"{scenario}.toml").read_text())["path"]["forward"]["trace"]
    for r in json.loads((ROOT / "results" / name / "summary.json").read_text())["rows"]:
        assert r["trace"] == Path(trace).name and r["incomplete"] == 0 and r["transfers"] == 50
        assert r["handshake_rtt_s"] >= r["base_rtt_s"] - 1e-6


@pytest.mark.parametrize("name", [n for n in COMMITTED if RESULTS[n] in ("lossfree", "loss")])
def test_the_model_takes_the_growth_of_the_stack_that_ran(name):
    """The paper's TCP (ns-3 TcpNewReno: a segment per ACK) is compared at b = 2 with the 40-ms
    delayed-ACK timer's cost, every other stack (growth per segment acknowledged) at b = 1."""
    cc = tomllib.loads((ROOT / "experiments" / f"{name.split('-rtt')[0]}.toml").read_text())["cross"][0]["tcp"].get(
        "congestion_control")
    want = (2, 0.04) if cc == "newreno" else (1, 0.0)
    for r in json.loads((ROOT / "results" / name / "summary.json").read_text())["rows"]:
        if r["cell"] != "all":
            assert (r["b"], r["delayed_ack_s"]) == want, (name, r["cell"])


def test_the_grid_compares_each_cell_at_its_mss_and_w_max():
    """results/latency-cardwell-lossfree-grid (MSS 536/4312 x W_max 8..512): every row is eq (15)
    at its own MSS (the rows' segment size, d = size / MSS) and W_max (the window clamp in
    segments), and the grid is whole: 2 MSS x 4 W_max x 3 RTT x 4 d, 20 loss-free transfers each."""
    from tcpdelay.model.transfer import transfer_time_s

    path = ROOT / "results" / "latency-cardwell-lossfree-grid" / "summary.json"
    rows = json.loads(path.read_text())["rows"]
    assert {(r["mss_bytes"], r["w_max"], r["rtt_s"], r["d"]) for r in rows} == {
        (m, w, rtt, d) for m in (536, 4312) for w in (8, 32, 128, 512) for rtt in (0.016, 0.064, 0.256)
        for d in (1, 16, 256, 1024)}
    for r in rows:
        assert r["size_bytes"] == r["d"] * r["mss_bytes"] and r["transfers"] == r["no_loss"] == 20
        assert r["model_s"] == pytest.approx(transfer_time_s(r["d"], 0.0, r["rtt_s"], w1=3, b=1, w_max=r["w_max"]),
                                             abs=1e-4)
    # the clamp is what eq (15) says it is: W_max = 8 takes d / 8 rounds, not log2 d
    w8 = next(r for r in rows if (r["mss_bytes"], r["w_max"], r["rtt_s"], r["d"]) == (536, 8, 0.064, 1024))
    assert w8["mean_s"] > 100 * 0.064

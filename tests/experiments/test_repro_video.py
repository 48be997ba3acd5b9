"""Reproduction 5 (Watanabe et al., *Performance Characterization of Streaming Video over TCP
Variants*, Sec. V): tcpdelay.reproductions.video_tcp_variants recomputes the committed summaries from
the committed runs, and draws Fig 5 from what is committed."""

import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from tcpdelay.reproductions import video_tcp_variants as video  # noqa: E402

SWEEPS = sorted(p.parent.name for p in (ROOT / "results").glob("video-tcp-variants-*/summary.json"))
PAPER_VARIANTS = {"Reno", "Cubic", "Compound", "CCP(1)", "CCPD(1,2000)", "CCPD(1,4000)"}


def _same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9))
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def test_there_is_a_committed_reproduction():
    assert "video-tcp-variants-5a-reduced" in SWEEPS


@pytest.mark.parametrize("name", SWEEPS)
def test_the_tables_are_the_committed_summary(name):
    sweep = ROOT / "results" / name
    rows = video.evaluate(sweep)
    committed = json.loads((sweep / "summary.json").read_text())
    assert _same(rows, committed)
    assert {r["variant"] for r in rows} == PAPER_VARIANTS
    # the reproductions run at least three trials (the floor); a sweep that sets VLC
    # beside the model player on paths the model player ran already may run two
    least = 2 if name.endswith("-vlc-reduced") else 3
    for r in rows:
        assert r["trials"] == len(r["per_trial"]) >= least
        xs = [t["picture_discards"] for t in r["per_trial"]]
        assert r["picture_discards_mean"] == pytest.approx(sum(xs) / len(xs))


@pytest.mark.parametrize("name", SWEEPS)
def test_fig5_is_drawn_from_what_is_committed(name, tmp_path):
    sweep = ROOT / "results" / name
    series = video.cwnd_series(sweep)
    assert set(series["variant"].to_pylist()) == PAPER_VARIANTS
    video.figure(series, tmp_path / "fig5.png")
    assert (tmp_path / "fig5.png").stat().st_size > 10_000


def test_variant_labels_are_the_papers():
    assert video.variant_label({"streams[0].tcp.congestion_control": {"name": "ccpd", "kd": 4000}}) == "CCPD(1,4000)"
    assert video.variant_label({"streams[0].tcp.congestion_control": "ccp"}) == "CCP(1)"
    assert video.variant_label({"streams[0].tcp.congestion_control": "compound"}) == "Compound"

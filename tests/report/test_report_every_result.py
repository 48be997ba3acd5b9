"""Every committed result directory gives a report that shows what its runs measured (issue 27):
for each kind the JSON says was measured, its rows; at least one table with rows; figures whose
titles differ. Walks ``results/*`` (every directory with a sweep or a scenario)."""

import collections
from pathlib import Path

import pytest

from tcpdelay.report.html import Report, Section, Table, figure_title
from tcpdelay.report.results import build_report
from tcpdelay.results import load_results

RESULTS = Path(__file__).resolve().parents[2] / "results"
DIRS = sorted(d.name for d in RESULTS.iterdir()
              if d.is_dir() and ((d / "sweep.json").is_file() or (d / "scenario.toml").is_file()))


class _Drawn(Section):
    """A section that keeps each figure's title and caption, not its pixels (the PNG step is
    what takes the time; the pages themselves are checked in test_report_kinds and by eye)."""

    def figure(self, fig, caption=""):
        return self.png(b"", caption, figure_title(fig))


class _Titles(Report):
    def section(self, title):
        sec = _Drawn(title)
        self.sections.append(sec)
        return sec


def test_the_walk_finds_the_committed_results():
    assert len(DIRS) >= 60 and "latency-cardwell-fig3" in DIRS and "video-tcp-variants-5a-reduced" in DIRS


@pytest.mark.slow
@pytest.mark.parametrize("name", DIRS)
def test_every_committed_result_reports_what_it_measured(name):
    rep = _Titles(name)
    doc = build_report(load_results(RESULTS / name), rep)
    assert doc["runs"]["complete"] > 0
    assert doc["measured"], "nothing shown"
    rows = {
        "media": [f for c in doc["cells"] for f in c["flows"]],
        "transfers": [t for t in doc["transfers"] if t["transfers"] > 0],
        "streams": doc.get("streams", []),
        "cross_traffic": doc["cross_traffic"],
        "queue": doc["queue"],
        "tcp_state": doc["tcp"]["state"] + doc["tcp"]["end"],
    }
    for kind in doc["measured"]:
        assert rows[kind], f"{kind} measured but no rows"
    # what a run's files hold is measured: media flows in metrics.json, transfers in run.json
    assert ("media" in doc["measured"]) == any(rows["media"])
    tables = [i for s in rep.sections for i in s.items if isinstance(i, Table)]
    assert any(t.rows for t in tables) and all(t.rows for t in tables), "an empty table"
    assert all(len(t.columns) <= 13 for t in tables)
    titles = [p["title"] for p in doc["plots"]]
    assert doc["figures"] == len(titles) > 0
    assert not [t for t, n in collections.Counter(titles).items() if n > 1], "two figures share a title"

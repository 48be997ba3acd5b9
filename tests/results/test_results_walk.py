"""Every directory under results/ reopens from what git holds (run it on a fresh clone: the record
parts are not committed): ``tcpdelay report`` counts every committed run as complete and renders,
its numbers are the committed ones (each run's metrics.json, validation.json), the
``tcpdelay validate`` commands in results/README.md rerun on a copy of their directories
recompute the model without measuring anything and give the committed numbers again, and the
run counts results/README.md states are the committed ones. (The §5.3/§7 summary.json files
against what the reproduction scripts compute from the same files: test_repro_brosh.py.)"""

from __future__ import annotations

import base64
import collections
import json
import math
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tcpdelay.cli import main
from tcpdelay.report.html import Report, Section, Table, figure_title
from tcpdelay.report.results import build_report
from tcpdelay.profiles import PROFILES
from tcpdelay.results.runs import media_profiles

pytestmark = pytest.mark.slow   # reads and plots every committed result

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
DIRS = sorted(p.name for p in RESULTS.iterdir() if p.is_dir())
SWEEPS = [d for d in DIRS if (RESULTS / d / "sweep.json").is_file()]
README = (RESULTS / "README.md").read_text()


def _readme_rows() -> dict[str, str]:
    """results/README.md's table: directory -> its row."""
    rows = {}
    for line in README.splitlines():
        m = re.match(r"\| `([^`/]+)/` \|", line)
        if m:
            rows[m.group(1)] = line
    return rows


def _committed_runs(name: str) -> set[Path]:
    """The run directories (``cells/<id>/seed-<s>``) git holds for ``results/name`` (what is on
    disk when this is not a git checkout, e.g. an unpacked archive)."""
    files = None
    if (ROOT / ".git").exists():
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", f"results/{name}/cells"],
                             capture_output=True, text=True)
        if out.returncode == 0:
            files = [ROOT / f for f in out.stdout.splitlines()]
    if files is None:
        files = [p for p in (RESULTS / name / "cells").rglob("*") if p.is_file()]
    return {f.parent for f in files if re.fullmatch(r"seed-\d+", f.parent.name)}


def _tcpdelay(capsys, *args: str) -> tuple[int, str, str]:
    """``tcpdelay ARGS`` in this process: (exit status, stdout, stderr). A hundred commands here:
    a Python process each spent about a second of CPU starting (NumPy, Arrow, matplotlib, the
    model) before reading a file. ``tcpdelay report`` and ``validate`` as processes, with
    their exit statuses, are tested elsewhere (tests/cli, tests/sim/test_ns3_backend.py)."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    got = capsys.readouterr()
    return exc.value.code, got.out, got.err


class _Drawn(Section):
    """A section that keeps each figure's title, not its pixels: the figure is made from the data
    and closed, the PNG step (matplotlib's rasterizing, 4/5 of a report's time) is left to the
    directories of :data:`RENDERED`."""

    def figure(self, fig, caption=""):
        import matplotlib.pyplot as plt

        title = figure_title(fig)
        plt.close(fig)
        return self.png(b"", caption, title)


class _Titles(Report):
    def section(self, title):
        sec = _Drawn(title)
        self.sections.append(sec)
        return sec


def figure_kind(title: str) -> str:
    """What draws a figure, from its title: the words before its parameters (``TCP state: pie,
    seed 3`` and ``Delay CDF, flow voip12 (cells part 2 of 3)`` are ``TCP state`` and ``Delay
    CDF``)."""
    title = re.sub(r"\s*\((cells|connections) part .*\)$", "", title)
    return re.split(r"[:,]", title)[0].strip()


#: The directories whose reports are written as ``tcpdelay report`` writes them, every figure
#: rasterized, and the kinds of figure each of them draws from what git holds: between them every
#: kind a committed report has (each walked report's kinds are checked against them below). For
#: each family of results and backend, the directory that draws the most kinds (then the one
#: with the most runs); and the two that alone draw the transfers' TCP window and per-cell figures.
RENDERED = {
    "aqm-5.3-bytes-ecn-reduced": {"Bottleneck queue length", "Cross traffic goodput",
                                  "Delay CDF", "Late fraction", "Media flows per cell"},
    "aqm-hspa-audio-bulk-ecn-ns3": {"Bottleneck queue length", "Cross traffic goodput",
                                    "Delay CDF", "Late fraction", "Media flows per cell"},
    "droptail-5.3": {"Cross traffic goodput", "Delay CDF", "Late fraction", "Media flows per cell"},
    "fidelity-linux-2to5pct": {"Delay CDF", "Late fraction", "Media flows per cell"},
    "hspa-audio-web": {"Cross traffic goodput", "Media flows per cell"},
    "latency-cardwell-loss-iw10-state": {"TCP window", "Transfers"},
    "latency-cardwell-lossfree-grid": {"Transfers per cell"},
    "mpeg4-4.1-wired-reduced": {"Bottleneck queue length", "Cross traffic goodput", "Media flows per cell"},
    "mpeg4-4.1-wired-ns3": {"Bottleneck queue length", "Cross traffic goodput", "Media flows per cell"},
    "quic-droptail-5.3-reduced": {"Bottleneck queue length", "Cross traffic goodput",
                                  "Delay CDF", "Late fraction", "Media flows per cell"},
    "split-parallel-7": {"Bottleneck queue length", "Cross traffic goodput",
                         "Delay CDF", "Late fraction", "Media flows per cell"},
    "validate-grid": {"Delay CDF", "Late fraction", "Media flows per cell"},
    "validate-full-ns3": {"Delay CDF", "Late fraction", "Media flows per cell"},
    "video-tcp-variants-5b-reduced": {"Pulled stream"},
}
#: Kinds drawn from record parts results/ does not keep (tcp_state, link_queue: a fresh clone has
#: none), rasterized from real records by tests/report/test_report_tcp_state.py,
#: test_report_figures.py and test_report_kinds.py.
RENDERED_ELSEWHERE = {"TCP state", "Bottleneck queue over time"}
FIGURE_KINDS = set().union(*RENDERED.values()) | RENDERED_ELSEWHERE


def _check_reopened(name: str, doc: dict, rep: Report | None = None) -> None:
    """What a report of committed directory ``name`` must show: every committed run, complete;
    the numbers of each run's metrics.json; for each kind the JSON says was measured, its rows
    (issue 27); tables with rows; figures whose titles differ, of a kind :data:`RENDERED` draws."""
    runs = _committed_runs(name)
    index = json.loads((RESULTS / name / "sweep.json").read_text())
    assert runs, f"{name}: no committed run"
    # every committed run keeps its marker and its figures (what report reads)
    for rd in runs:
        assert (rd / "complete.json").is_file(), rd
        assert (rd / "packets.parquet").is_file() or (rd / "metrics.json").is_file(), rd
    assert doc["kind"] == "sweep" and len(doc["cells"]) == len(index["cells"])
    assert doc["runs"] == {"complete": len(runs), "failed": 0, "incomplete": 0}
    assert sum(doc["packets"].values()) == len(runs)
    by_dir = {Path(r["run_dir"]).resolve(): (c, r) for c in doc["cells"] for r in c["runs"]}
    assert set(by_dir) == {r.resolve() for r in runs}

    # the numbers are the committed ones: a cell of one run shows that run's metrics.json
    for rd in runs:
        cell, _ = by_dir[rd.resolve()]
        if len(cell["runs"]) != 1 or not (rd / "metrics.json").is_file():
            continue
        metrics = {f["flow_id"]: f for f in json.loads((rd / "metrics.json").read_text())["flows"]}
        assert {f["flow_id"] for f in cell["flows"]} == set(metrics), rd
        video = {fid for fid, p in media_profiles(rd, {}).items() if p in PROFILES and not PROFILES[p].voice}
        for f in cell["flows"]:
            m = metrics[f["flow_id"]]
            # the delays kept of these runs are at 1 µs
            for key in ("mean_s", "p95_s", "max_s", "std_s"):
                assert f["delay"][key] == pytest.approx(m["delay"][key], abs=2e-6), (rd, f["flow_id"], key)
            assert f["received"] == m["packets"]["received"], (rd, f["flow_id"])
            mos = (m.get("emodel") or {}).get("best", {}).get("mos")
            # recomputed from those 1-µs delays: the E-model moves MOS by at most ~7e-6 per µs of
            # delay (ITU-T G.107: Id's slope is at most 0.134 R per ms, MOS's at most 0.053 per R),
            # so the same 2 µs as the delays above (a testbed run's MOS moved 4.3e-6 when kept)
            if f["flow_id"] in video:   # metrics.json has the G.711 MOS it gave every flow (issue 54)
                assert f["mos"] is None, rd
                continue
            assert (f["mos"] is None and mos is None) or f["mos"] == pytest.approx(mos, abs=2e-5), rd

    # what was measured is shown (issue 27): for each kind the JSON says was measured, its rows
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
    titles = [p["title"] for p in doc["plots"]]
    assert doc["figures"] == len(titles) > 0
    assert not [t for t, n in collections.Counter(titles).items() if n > 1], "two figures share a title"
    new = {figure_kind(t) for t in titles} - FIGURE_KINDS
    assert not new, f"a kind of figure no directory of RENDERED draws as PNG: {new}; add one that does"
    if rep is not None:
        tables = [i for sec in rep.sections for i in sec.items if isinstance(i, Table)]
        assert any(t.rows for t in tables) and all(t.rows for t in tables), "an empty table"
        assert all(len(t.columns) <= 13 for t in tables)


def test_every_directory_is_a_result_the_readme_lists():
    rows = _readme_rows()
    assert sorted(rows) == DIRS, "results/README.md lists exactly the directories under results/"
    for d in DIRS:
        if d in SWEEPS:
            continue
        # a directory of computed figures (playout-6): no runs of its own; it names the
        # directories it is computed from, and those reopen (below)
        assert not (RESULTS / d / "cells").exists() and not list((RESULTS / d).glob("seed-*")), d
        sources = re.findall(r"`([\w.-]+)/`", rows[d].split("|")[3])
        assert sources and all(s in SWEEPS for s in sources), (d, sources)


@pytest.mark.parametrize("name", SWEEPS)
def test_readme_run_counts_are_the_committed_ones(name):
    runs = _committed_runs(name)
    m = re.search(r"\((\d+) runs", _readme_rows()[name])
    assert m, f"results/README.md: the row of {name}/ says how many runs it holds"
    assert int(m.group(1)) == len(runs), (name, int(m.group(1)), len(runs))


def test_the_walk_finds_the_committed_results():
    assert len(SWEEPS) >= 60 and "latency-cardwell-fig3" in SWEEPS and "video-tcp-variants-5a-reduced" in SWEEPS
    assert set(RENDERED) <= set(SWEEPS)


# one group per result with the other file's loading of it (tests/results/conftest.py)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(f"committed-{n}")) for n in SWEEPS])
def test_report_reopens_every_committed_run(name, committed_results):
    """Every committed directory's report, built as ``tcpdelay report`` builds it (its figures
    made from the data; not rasterized here, see the next test)."""
    rep = _Titles(name)
    doc = build_report(committed_results(name), rep)
    _check_reopened(name, doc, rep)


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_report_writes_every_kind_of_figure(name, tmp_path, capsys):
    """``tcpdelay report DIR --out F --json`` on the directories that between them draw every kind
    of figure: the page embeds every figure as a PNG, and its JSON is what the walk checks."""
    out = tmp_path / f"{name}.html"
    code, stdout, stderr = _tcpdelay(capsys, "report", str(RESULTS / name), "--out", str(out), "--json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    html = out.read_text()
    assert doc["report_path"] == str(out) and html.count("data:image/png;base64,") == doc["figures"]
    pngs = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    assert all(base64.b64decode(p[:24])[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    _check_reopened(name, doc)
    drawn = {figure_kind(p["title"]) for p in doc["plots"]}
    assert RENDERED[name] <= drawn, (name, RENDERED[name] - drawn)


VALIDATE = [d for d in SWEEPS if (RESULTS / d / "validation.json").is_file()]


def _validate_args(name: str) -> list[str]:
    """The ``tcpdelay validate`` arguments results/README.md gives for ``name`` (without --out)."""
    row = _readme_rows()[name]
    cmd = re.search(r"`(?:sudo )?\S*tcpdelay validate ([^`]*)`", row)
    assert cmd, f"results/README.md: the row of {name}/ gives its tcpdelay validate command"
    args = shlex.split(cmd.group(1))
    i = args.index("--out")
    assert args[i + 1] == f"results/{name}"
    return args[:i] + args[i + 2:]


@pytest.mark.parametrize("name", VALIDATE)
def test_validate_rerun_recomputes_the_model_from_what_is_committed(name, tmp_path, capsys):
    """The README's command on a copy of the directory: nothing is measured (every committed
    run is complete), and the measured side and the model are the committed ones (the delays
    statistics to the microsecond the committed delays are kept at)."""
    copy = tmp_path / name
    shutil.copytree(RESULTS / name, copy, ignore=shutil.ignore_patterns("sent", "received", "flows"))
    code, stdout, stderr = _tcpdelay(capsys, "validate", *_validate_args(name), "--out", str(copy), "--json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    committed = json.loads((RESULTS / name / "validation.json").read_text())
    runs = len(_committed_runs(name))
    assert doc["sweep"]["ran"] == 0 and doc["sweep"]["skipped"] == runs and not doc["sweep"]["failed"]
    assert [p["cell_id"] for p in doc["points"]] == [p["cell_id"] for p in committed["points"]]
    for new, old in zip(doc["points"], committed["points"]):
        for key, value in old["measured"].items():
            if isinstance(value, dict) or value is None:
                assert new["measured"][key] == pytest.approx(value, abs=1e-6), (name, old["cell_id"], key)
            else:
                tol = 1e-6 if key.endswith("_s") else 1e-9 * abs(value)
                assert abs(new["measured"][key] - value) <= tol, (name, old["cell_id"], key, new["measured"][key], value)
        for key in ("mean_s", "p95_s", "std_s"):
            a, b = (new["model"] or {}).get(key), (old["model"] or {}).get(key)
            assert (a is None and b is None) or math.isclose(a, b, rel_tol=1e-6), (name, old["cell_id"], key)
    # the rerun rewrote the same files, it added none (but its lock, .lock, which git ignores)
    def listing(d):
        return sorted(str(p.relative_to(d)) for p in d.rglob("*") if not p.name.startswith("."))

    assert listing(copy) == listing(RESULTS / name)

"""``tcpdelay metrics`` on the committed runs (issue 27, "Done when": every run under results/
gives a non-empty ``metrics``): exit status 0 and a non-empty answer, human and ``--json``, for a
deterministic sample that covers every results directory and, within each, every kind of run
(which files it kept, and the kind of its packets.parquet): the first run of each kind and the
directory's last run (about 150 of the 1586 runs: through the CLI they all take minutes;
``TCPDELAY_ALL_RUNS=1`` walks every run so). Every other run goes through the function the
command prints, in seconds (:func:`test_every_other_committed_run_has_metrics`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tcpdelay.cli import cli

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
RUN_NAME = re.compile(r"seed-\d+")


def _committed_runs() -> list[Path]:
    """Every run directory git holds under results/ (what is on disk when this is not a git
    checkout), sweeps' ``cells/<id>/seed-<s>`` and run directories' ``seed-<s>`` alike."""
    files = None
    if (ROOT / ".git").exists():
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", "results"], capture_output=True, text=True)
        if out.returncode == 0:
            files = [ROOT / f for f in out.stdout.splitlines()]
    if files is None:
        files = [p for p in RESULTS.rglob("*") if p.is_file()]
    return sorted({f.parent for f in files if RUN_NAME.fullmatch(f.parent.name)})


def _kind(run: Path) -> tuple:
    """What the run kept: its files and folders, and its packets.parquet's kind."""
    names = tuple(sorted(p.name for p in run.iterdir() if not p.name.startswith(".")))
    packets = run / "packets.parquet"
    kind = None
    if packets.is_file():
        meta = pq.read_schema(packets).metadata or {}
        kind = json.loads(meta.get(b"tcpdelay.packets", b"{}")).get("kind")
    return names, kind


def _sample() -> list[Path]:
    runs = _committed_runs()
    if os.environ.get("TCPDELAY_ALL_RUNS") == "1":
        return runs
    by_dir: dict[str, list[Path]] = {}
    for r in runs:
        by_dir.setdefault(r.relative_to(RESULTS).parts[0], []).append(r)
    picked = []
    for _, rs in sorted(by_dir.items()):
        seen = set()
        for r in rs:
            k = _kind(r)
            if k not in seen:
                seen.add(k)
                picked.append(r)
        if rs[-1] not in picked:
            picked.append(rs[-1])
    return picked


RUNS = _sample()
assert RUNS, "no committed run under results/"


@pytest.mark.parametrize("run", RUNS, ids=lambda p: str(p.relative_to(RESULTS)))
def test_metrics_of_a_committed_run(run):
    runner = CliRunner()
    human = runner.invoke(cli, ["metrics", str(run)])
    assert human.exit_code == 0, (human.output, repr(human.exception))
    assert human.output.strip() and "warning:" not in human.output, human.output
    doc = runner.invoke(cli, ["metrics", str(run), "--json"])
    assert doc.exit_code == 0, (doc.output, repr(doc.exception))
    res = json.loads(doc.output)
    # it measured something, and says where that came from
    assert any(res.get(k) for k in ("flows", "transfers", "streams", "cross", "queue")), res
    assert res["sources"] and res["warnings"] == []
    assert all(f["name"] and not str(f["name"]).isdigit() for f in res["flows"])


def test_every_other_committed_run_has_metrics():
    """The runs the sample above leaves out, each through the function ``metrics`` prints
    (:func:`tcpdelay.results.runs.summarize_run`): every committed run answers, measured
    something and says where it came from, without a warning (the "Done when" of issue 27)."""
    from tcpdelay.results.runs import summarize_run

    picked = set(RUNS)
    rest = [r for r in _committed_runs() if r not in picked]
    bad = []
    for run in rest:
        try:
            res = summarize_run(run)
        except Exception as err:  # noqa: BLE001 — collected, every failing run is named at once
            bad.append(f"{run.relative_to(RESULTS)}: {err!r}")
            continue
        if not any(res.get(k) for k in ("flows", "transfers", "streams", "cross", "queue")) \
                or not res["sources"] or res["warnings"]:
            bad.append(f"{run.relative_to(RESULTS)}: nothing measured or warnings {res['warnings']}")
    assert not bad, "\n".join(bad[:20]) + f"\n({len(bad)} of {len(rest)} runs)"

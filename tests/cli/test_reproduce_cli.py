"""``tcpdelay reproduce`` as a user meets it (real subprocesses): the list names every paper's
reproduction, ``--tables`` rewrites each page's tables from the committed results byte for byte,
``--dry-run`` plans the sweeps the page shows (complete in results/), the summaries it keeps are
the committed ones, and bad input is one line with exit status 2. Nothing is measured here."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcpdelay.reproductions.catalog import REPRODUCTIONS

ROOT = Path(__file__).resolve().parents[2]


def tcpdelay(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "tcpdelay", "reproduce", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_the_list_names_the_five_papers_reproductions():
    res = tcpdelay("--list", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)["reproductions"]
    assert [r["id"] for r in doc] == list(REPRODUCTIONS)
    papers = {r["paper"] for r in doc}
    for author in ("Brosh", "Cardwell", "HSPA", "Watanabe", "Papadimitriou"):
        assert sum(author in p for p in papers) == 1, author
    for r in doc:
        assert {"id", "paper", "sections", "scenarios", "sizes", "wall_time_s"} <= set(r)
        assert r["sections"] and set(r["sizes"]) <= {"reduced", "full"} and r["sizes"]
        assert (ROOT / r["page"]).is_file()
        for s in r["scenarios"]:
            assert (ROOT / s).is_file(), s
        assert set(r["wall_time_s"]) == set(r["backends"]) <= {"testbed", "ns3"}
        for per_size in r["wall_time_s"].values():
            assert set(per_size) <= set(r["sizes"]) and all(s > 0 for s in per_size.values())
    human = tcpdelay("--list")
    assert human.returncode == 0 and all(r["id"] in human.stdout for r in doc)


@pytest.mark.parametrize("rid", list(REPRODUCTIONS))
def test_tables_rewrite_the_page_identically_from_the_committed_results(rid, tmp_path):
    page = REPRODUCTIONS[rid].page_path
    copy = tmp_path / page.name
    shutil.copy(page, copy)
    res = tcpdelay(rid, "--tables", "--page", str(copy), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert copy.read_bytes() == page.read_bytes()
    assert doc["changed"] == []
    if REPRODUCTIONS[rid].tables is not None:
        assert len(doc["tables"]) >= 1
        for marker in doc["tables"]:
            assert marker in page.read_text()


def test_tables_put_back_a_table_that_differs(tmp_path):
    page = REPRODUCTIONS["droptail-5.3"].page_path
    text = page.read_text()
    row = "| 100 packets | 0 | 1.23 [1.02] |"
    assert text.count(row) == 1
    copy = tmp_path / page.name
    copy.write_text(text.replace(row, "| 100 packets | 0 | 9.99 [1.02] |"))
    res = tcpdelay("droptail-5.3", "--tables", "--page", str(copy), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["changed"] == ["<!-- table-3 -->"]
    assert copy.read_text() == text


def test_a_page_without_its_marker_is_one_line_and_exit_2(tmp_path):
    page = REPRODUCTIONS["droptail-5.3"].page_path
    copy = tmp_path / page.name
    copy.write_text(page.read_text().replace("<!-- table-4 -->\n", ""))
    res = tcpdelay("droptail-5.3", "--tables", "--page", str(copy))
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "table-4" in res.stderr and "Traceback" not in res.stderr


def test_dry_run_of_the_committed_results_has_nothing_to_do():
    res = tcpdelay("mpeg4-transport", "--dry-run", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["dry_run"] and len(doc["sweeps"]) == sum(w.page for w in REPRODUCTIONS["mpeg4-transport"].sweeps)
    left = {Path(p["out_dir"]).name: p["runs"] - p["complete"] for p in doc["sweeps"]}
    # every run measured (papers/004 §4.2's wired UDP at 80 flows too, since 28 November)
    assert {k: v for k, v in left.items() if v} == {}
    for p in doc["sweeps"]:
        assert p["runs"] > 0 and p["failed"] == 0 and (p["estimate_s"] == 0) == (p["complete"] == p["runs"]), p
    assert {p["backend"] for p in doc["sweeps"]} == {"ns3", "testbed"}


def test_dry_run_into_an_empty_directory_plans_every_run(tmp_path):
    res = tcpdelay("droptail-5.3", "--dry-run", "--out", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [Path(p["out_dir"]).name for p in doc["sweeps"]] == ["droptail-5.3", "droptail-5.3-long", "droptail-5.3-video"]
    assert all(p["complete"] == 0 and p["estimate_s"] > 0 for p in doc["sweeps"])
    assert doc["estimate_s"] == pytest.approx(sum(p["estimate_s"] for p in doc["sweeps"]))
    assert not any(tmp_path.iterdir())               # a dry run writes nothing


def test_backend_size_and_only_choose_the_sweeps(tmp_path):
    res = tcpdelay("latency-cardwell", "--dry-run", "--backend", "ns3", "--only", "III", "--json")
    assert [Path(p["out_dir"]).name for p in json.loads(res.stdout)["sweeps"]] == [
        "latency-cardwell-fig3", "latency-cardwell-fig4"]
    res = tcpdelay("latency-cardwell", "--dry-run", "--backend", "testbed", "--only", "IV-A", "--json")
    shards = [p["shard"] for p in json.loads(res.stdout)["sweeps"] if p["scenario"].endswith("lossfree-linux.toml")]
    assert shards == ["1/3", "2/3", "3/3"]
    res = tcpdelay("split-parallel-7", "--dry-run", "--size", "full", "--out", str(tmp_path), "--json")
    (p,) = json.loads(res.stdout)["sweeps"]
    assert p["scenario"] == "experiments/split-parallel-7.toml" and p["size"] == "full"
    res = tcpdelay("playout-6", "--dry-run", "--json")
    assert [Path(p["out_dir"]).name for p in json.loads(res.stdout)["sweeps"]] == [
        "validate-reduced", "validate-wide", "validate-boundary"]


@pytest.mark.parametrize("args, fragment", [
    (["no-such-paper"], "no reproduction 'no-such-paper'"),
    (["droptail-5.3", "--backend", "ns3"], "--backend ns3"),
    (["hspa-audio", "--size", "full"], "--size full"),
    (["mpeg4-transport", "--only", "9.9"], "--only 9.9"),
    (["mpeg4-transport", "--backend", "testbed", "--size", "full"], "no sweep on testbed at size full"),
    (["mpeg4-transport", "--backend", "quantum"], "--backend"),
    ([], "give a reproduction ID"),
    (["droptail-5.3", "--tables", "--dry-run"], "choose one"),
    (["--list", "droptail-5.3"], "--list takes no ID"),
    (["mpeg4-transport", "--tables", "--out", "/nonexistent-results"], "no results directory /nonexistent-results"),
])
def test_bad_input_is_one_line_and_exit_2(args, fragment):
    res = tcpdelay(*args)
    assert res.returncode == 2, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcpdelay: error: ") and fragment in lines[0], res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("rid, name", [("mpeg4-transport", "mpeg4-rate-calibration-wired-ns3"),
                                       ("video-tcp-variants", "video-tcp-variants-5a-reduced"),
                                       ("latency-cardwell", "latency-cardwell-fig3"),
                                       ("droptail-5.3", "droptail-5.3-long")])
def test_the_summaries_kept_are_the_committed_ones(rid, name, tmp_path):
    """What a run keeps (the old scripts' ``--write``) from a copy of a committed sweep: the same
    summary as committed."""
    shutil.copytree(ROOT / "results" / name, tmp_path / name)
    (tmp_path / name / "summary.json").unlink()
    rep = REPRODUCTIONS[rid]
    written = rep.summarize(tmp_path, tuple(w for w in rep.sweeps if w.result == name))
    assert tmp_path / name / "summary.json" in written
    assert _same(json.loads((tmp_path / name / "summary.json").read_text()),
                 json.loads((ROOT / "results" / name / "summary.json").read_text()))


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9))
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.ns3
def test_a_run_resumes_and_keeps_the_summaries(tmp_path):
    """A reproduction run into a directory holding its complete sweeps measures nothing (the
    sweep machinery resumes), writes the summaries (the committed ones, byte for byte) and,
    lacking the page's other sweeps, leaves the page alone and says why."""
    for name in ("latency-cardwell-fig3", "latency-cardwell-fig4"):
        shutil.copytree(ROOT / "results" / name, tmp_path / name)
        (tmp_path / name / "summary.json").unlink()
    page = REPRODUCTIONS["latency-cardwell"].page_path
    copy = tmp_path / "page.md"
    shutil.copy(page, copy)
    res = tcpdelay("latency-cardwell", "--backend", "ns3", "--only", "III", "--out", str(tmp_path),
                   "--page", str(copy), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [(p["result"]["ran"], p["result"]["skipped"]) for p in doc["sweeps"]] == [(0, 1), (0, 10)]
    for name in ("latency-cardwell-fig3", "latency-cardwell-fig4"):
        assert (tmp_path / name / "summary.json").read_bytes() == (ROOT / "results" / name / "summary.json").read_bytes()
    assert doc["tables"] == [] and "latency-cardwell-loss" in doc["tables_skipped"]
    assert copy.read_bytes() == page.read_bytes()


def test_tables_alone_rewrite_no_page(tmp_path, monkeypatch, capsys, cli_exit):
    """Issue 54, item 6: ``reproduce ID --tables`` rewrote the page in docs/ by default; it now
    compares, and rewrites only the page named by ``--page``. (The repository's page is a copy
    here, one table changed, so that a write would show.)"""
    from tcpdelay.reproductions import catalog

    page = REPRODUCTIONS["droptail-5.3"].page_path
    row = "| 100 packets | 0 | 1.23 [1.02] |"
    edited = page.read_text().replace(row, "| 100 packets | 0 | 9.99 [1.02] |")
    fake = tmp_path / "docs" / "experiments" / page.name
    fake.parent.mkdir(parents=True)
    fake.write_text(edited)
    monkeypatch.setattr(catalog, "REPO_ROOT", tmp_path)
    assert cli_exit(["reproduce", "droptail-5.3", "--tables", "--out", str(ROOT / "results"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["changed"] == ["<!-- table-3 -->"] and doc["written"] is False
    assert fake.read_text() == edited
    assert cli_exit(["reproduce", "droptail-5.3", "--tables", "--out", str(ROOT / "results")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{fake}: " in out and "1 differ from the page: <!-- table-3 -->; not written (--page" in out
    assert cli_exit(["reproduce", "droptail-5.3", "--tables", "--out", str(ROOT / "results"),
                     "--page", str(fake), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["written"] is True and fake.read_text() == page.read_text()


def test_a_missing_page_is_refused_before_any_work(tmp_path):
    """It was refused after the tables were made (6 s); now before the results are even looked
    for (this OUT does not exist: that would be the error otherwise)."""
    res = tcpdelay("droptail-5.3", "--tables", "--page", str(tmp_path / "missing.md"), "--out", str(tmp_path / "none"))
    assert res.returncode == 2
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"tcpdelay: error: tcpdelay reproduce: --page: {tmp_path / 'missing.md'} does not exist")


def test_tables_from_another_folder_say_where_they_looked(tmp_path):
    """From a folder without results/ it listed the page's 30 sweeps as missing; now it names the
    folder it looked in, and the committed results."""
    res = tcpdelay("mpeg4-transport", "--tables", cwd=tmp_path)
    assert res.returncode == 2
    (line,) = res.stderr.splitlines()
    assert f"no results directory {tmp_path / 'results'}; the committed results are in {ROOT / 'results'}" in line
    assert len(line.replace(str(tmp_path), "").replace(str(ROOT), "")) < 250
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "mpeg4-4.1-wired-ns3").symlink_to(ROOT / "results" / "mpeg4-4.1-wired-ns3")
    (line,) = tcpdelay("mpeg4-transport", "--tables", cwd=tmp_path).stderr.splitlines()
    every = len({w.result for w in REPRODUCTIONS["mpeg4-transport"].sweeps if w.page})
    assert f"{tmp_path / 'results'} lacks {every - 1} of the {every} sweeps the page shows: " in line
    # one line of words, not a list of 23 sweeps (the paths' lengths are the machine's: not counted)
    assert len(line.replace(str(tmp_path), "").replace(str(ROOT), "")) < 250


def test_the_list_fits_80_columns_and_colours_no_digit(tmp_path):
    """Issue 54, item 6: ``--list`` printed 146-204-column lines, and in a terminal rich's
    highlighter coloured the digits inside names ("droptail-5.3", "playout-6.md")."""
    import os
    import re

    env = {**os.environ, "COLUMNS": "80", "FORCE_COLOR": "1"}   # coloured as in a terminal
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "reproduce", "--list"], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    lines = res.stdout.splitlines()
    assert all(len(ansi.sub("", line)) <= 80 for line in lines), max(lines, key=len)
    ids = [line for line in lines if ansi.search(line)]
    assert ids == [f"\x1b[1m{rid}\x1b[0m" for rid in REPRODUCTIONS]    # only the ids are styled, whole
    assert "docs/experiments/droptail-5.3.md;" in res.stdout

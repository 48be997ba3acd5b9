"""The suite's parallel pass relies on pytest-xdist's ``--dist loadgroup``: every test of one
``xdist_group`` (a module with a module-scoped fixture, the Ray tests) runs in one worker. A
pytest and pytest-xdist pair that drops the groups does so silently (pytest-xdist#1386: pytest
9.2 with xdist 3.8), and then two Ray clusters or two module fixtures run side by side. This runs
a small grouped file on two workers, in a subprocess, with the installed pair."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

#: The environment of the pytest runs below: not the one that writes tests/durations.json.
_ENV = {k: v for k, v in os.environ.items() if k != "TCPDELAY_WRITE_DURATIONS"}

GROUPED = textwrap.dedent('''
    import os
    import pytest

    pytestmark = pytest.mark.xdist_group("one")

    @pytest.mark.parametrize("i", range(8))
    def test_grouped(i):
        with open(os.environ["WORKERS_FILE"], "a") as fh:
            fh.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
''')


def test_tests_of_one_xdist_group_run_in_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")       # not the project's configuration
    workers = tmp_path / "workers.txt"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                          "--dist", "loadgroup", "test_grouped.py"], cwd=tmp_path, capture_output=True,
                         text=True, env={**_ENV, "WORKERS_FILE": str(workers)})
    assert out.returncode == 0, out.stdout + out.stderr
    seen = workers.read_text().split()
    assert len(seen) == 8 and len(set(seen)) == 1, seen


def test_the_groups_conftest_gives_reach_pytest_xdist():
    """tests/conftest.py groups the tests of a module-scoped fixture (and the ns-3 tests) by adding
    ``xdist_group`` markers at collection; pytest-xdist reads the markers into the node ids in its
    own collection hook, so the conftest's must run first (``tryfirst``): without it every group
    so given was dropped without a word, and a module fixture was made once per worker (a file of
    three tests that share one ran on two workers). A file of the project's whose tests share a
    module fixture, on two workers: all in one, under its group's name."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist",
                          "loadgroup", "tests/testbed/test_fixed_pow.py"], cwd=root, capture_output=True, text=True,
                         timeout=300, env={**_ENV, "COLUMNS": "400"})    # node ids whole
    assert out.returncode == 0, out.stdout + out.stderr
    ran = [line.split() for line in out.stdout.splitlines() if line.startswith("[gw")]
    assert len(ran) == 3, out.stdout
    assert len({r[0] for r in ran}) == 1, ran
    assert all(r[-1].endswith("@test_fixed_pow") for r in ran), ran


def test_tests_are_handed_out_longest_first_and_groups_stay_together(tmp_path, monkeypatch):
    """tests/conftest.py orders the collected tests by tests/durations.json, longest first; a
    group's tests stay together at the place of their sum; unknown tests last, in their order."""
    import importlib.util
    import json
    from pathlib import Path

    import pytest

    path = Path(__file__).with_name("conftest.py")
    spec = importlib.util.spec_from_file_location("tcpdelay_tests_conftest", path)
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)

    class Item:
        def __init__(self, nodeid, group=None):
            self.nodeid, self.group = nodeid, group

        def get_closest_marker(self, name):
            return pytest.mark.xdist_group(self.group).mark if name == "xdist_group" and self.group else None

    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"a.py::short": 1.0, "a.py::long": 9.0, "g.py::one": 4.0, "g.py::two": 3.0,
                                     "b.py::mid": 5.0}))
    monkeypatch.setattr(conftest, "DURATIONS_FILE", durations)
    items = [Item("a.py::short"), Item("u.py::unknown"), Item("g.py::one@g", "g"), Item("a.py::long"),
             Item("g.py::two@g", "g"), Item("b.py::mid"), Item("u.py::unknown2")]
    conftest._longest_first(items)
    assert [i.nodeid for i in items] == ["a.py::long", "g.py::one@g", "g.py::two@g", "b.py::mid", "a.py::short",
                                         "u.py::unknown", "u.py::unknown2"]


def test_the_second_pass_collects_every_test_marked_alone():
    """``make test``'s second pass collects only the files ``make alone-files`` names (a grep for
    the marker), not the whole suite: a test marked ``alone`` in any other file would then run in
    neither pass (the first deselects it). Every test the whole suite marks ``alone`` is in them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]

    def alone(*paths: str) -> set[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                              "-m", "alone", *paths], cwd=root, capture_output=True, text=True, timeout=300, env=_ENV)
        assert out.returncode == 0, out.stdout + out.stderr
        return {line for line in out.stdout.splitlines() if "::" in line}

    files = subprocess.run(["make", "-s", "--no-print-directory", "alone-files"], cwd=root, capture_output=True,
                           text=True, check=True).stdout.split()
    assert files and all((root / f).is_file() for f in files), files
    everywhere = alone("tests")
    assert everywhere, "no test is marked alone: the second pass would run nothing"
    assert alone(*files) == everywhere

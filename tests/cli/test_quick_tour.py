"""Issue 54, item 6: the README's quick tour, copied line by line into a fresh clone, failed at
its second line: ``--plot out/latency.png`` is refused while ``out/`` does not exist (on
purpose: --plot creates no folder, tests/cli/test_out_paths.py), and a clone has no ``out/``
(it is in .gitignore). The tour makes the folder before its first plot."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _predict_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"Predict \(no privileges needed\):\s*```sh\n(.*?)```", text, re.S)
    assert block, "README.md: the quick tour's Predict block is gone"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_every_plot_folder_is_made_before_its_plot():
    made: set[str] = set()
    plots = 0
    for line in _predict_block():
        words = shlex.split(line)
        if words[:2] == ["mkdir", "-p"]:
            made.update(os.path.normpath(w) for w in words[2:])
        for i, w in enumerate(words[:-1]):
            if w == "--plot":
                plots += 1
                folder = os.path.dirname(os.path.normpath(words[i + 1]))
                assert not folder or folder in made, f"{line!r}: nothing before it makes {folder}/"
    assert plots >= 2


def test_the_tour_up_to_its_first_plot_runs_in_a_fresh_folder(tmp_path):
    """The tour's lines as written, from a folder without ``out/`` (as a fresh clone is)."""
    lines = _predict_block()
    first_plot = next(i for i, line in enumerate(lines) if "--plot" in line)
    env = {**os.environ, "COLUMNS": "80"}
    for line in lines[:first_plot + 1]:
        words = shlex.split(line)
        if words[0] == ".venv/bin/tcpdelay":
            words = [sys.executable, "-m", "tcpdelay", *words[1:]]
        res = subprocess.run(words, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
        assert res.returncode == 0, f"{line!r}: {res.stderr}"
    plot = shlex.split(lines[first_plot])
    assert (tmp_path / plot[plot.index("--plot") + 1]).stat().st_size > 1000

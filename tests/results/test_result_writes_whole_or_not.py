"""Every result file is written whole or not at all (issue 27, defect 10): on a real full disk (a
64 KiB tmpfs, root) a result writer leaves neither a half file nor its temporary file, keeps the
file it was replacing, and its error names the file; ``tcpdelay run`` on a disk full before the
first run leaves no empty ``scenario.toml`` and says which file it could not write."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tcpdelay.experiments import record
from tcpdelay.experiments.plan import plan_run
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.experiments.sweep import prepare
from tcpdelay.jsonio import write_json
from tcpdelay.results import layout
from tcpdelay.results.packets import write_delay_packets

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")

SCENARIO = {"name": "whole", "duration_s": 2, "seed": 3, "path": {"rtt_s": 0.02, "rate_bps": 1e6},
            "flows": [{"name": "voip", "profile": "voip"}], "cross": [{"kind": "bulk"}]}


@pytest.fixture
def disk(tmp_path, tmpfs):
    """A 64 KiB tmpfs, unmounted afterwards."""
    with tmpfs.mounted(tmp_path / "disk", "64k") as where:
        yield where


def _plan():
    return plan_run(parse_scenario(SCENARIO), 3)


def _results(plan) -> dict:
    """A backend's answers, with a long status text (random: it does not compress) so that
    flows.parquet does not fit."""
    return {f"tx:{m.flow_id}": {"packets": 10, "elapsed_s": 1.0, "status": os.urandom(100_000).hex()}
            for m in plan.media}


def _hidden(d: Path) -> list[str]:
    return sorted(p.name for p in d.rglob(".*"))


def test_flows_parquet_that_does_not_fit_leaves_the_old_file_and_names_itself(disk):
    rd = disk / "run"
    rd.mkdir()
    plan = _plan()
    record.write_flows(rd, plan, {})                      # a first, small flows.parquet fits
    before = (rd / layout.FLOWS_FILE).read_bytes()
    with pytest.raises(OSError) as err:
        record.write_flows(rd, plan, _results(plan))      # 200 kB of random text: more than the disk
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(rd / layout.FLOWS_FILE)
    assert (rd / layout.FLOWS_FILE).read_bytes() == before          # the old file, whole
    assert pq.read_table(rd / layout.FLOWS_FILE).num_rows == len(plan.media) + len(plan.cross)
    assert _hidden(rd) == []                                         # no temporary file left


def test_every_writer_on_a_full_disk_leaves_nothing_and_names_its_file(disk, tmpfs):
    rd = disk / "run"
    rd.mkdir()
    plan = _plan()
    scenario = parse_scenario(SCENARIO)
    tmpfs.fill(disk)
    writers = {
        layout.SCENARIO_FILE: lambda: record.write_scenario(rd, scenario),
        layout.FLOWS_FILE: lambda: record.write_flows(rd, plan, {}),
        layout.ENVIRONMENT_FILE: lambda: record.write_environment(rd, {"kernel": "k" * 10_000}),
        layout.METRICS_FILE: lambda: write_json(rd / layout.METRICS_FILE, {"flows": ["m" * 10_000]}),
        layout.PACKETS_FILE: lambda: write_delay_packets(rd, pa.array(range(5000)).to_numpy() * 0,
                                                         pa.array(range(5000)).to_numpy() / 1e3, source="test"),
    }
    for name, write in writers.items():
        with pytest.raises(OSError) as err:
            write()
        assert err.value.errno == errno.ENOSPC, name
        assert err.value.filename == str(rd / name), (name, err.value.filename)
    assert sorted(p.name for p in rd.iterdir()) == []    # no empty or half file, no temporary file


def test_a_sweep_on_a_full_disk_leaves_no_empty_scenario_toml(disk, tmpfs):
    out = disk / "out"
    out.mkdir()
    tmpfs.fill(disk)
    with pytest.raises(OSError) as err:
        prepare(parse_scenario(SCENARIO), out, [])
    assert err.value.filename == str(out / layout.SCENARIO_FILE)
    assert list(out.iterdir()) == []


def test_run_on_a_disk_full_before_the_first_run_is_one_line_naming_the_file(disk, tmp_path, tmpfs):
    f = tmp_path / "whole.toml"
    f.write_text('name = "whole"\nduration_s = 1\nseed = 3\n[path]\nrtt_s = 0.02\nrate_bps = 1e6\n'
                 '[[flows]]\nname = "voip"\nprofile = "voip"\n')
    out = disk / "out"
    tmpfs.fill(disk)
    proc = subprocess.run([sys.executable, "-m", "tcpdelay", "run", str(f), "--out", str(out), "--backend", "ns3"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tcpdelay run: error: --out {out}: cannot write "), lines
    assert "No space left" in lines[0]
    written = [p for p in out.rglob("*") if p.is_file() and p.name != ".lock"] if out.exists() else []
    assert written == [], [(str(p), p.stat().st_size) for p in written]


KILLED_WRITER = """
import sys, time
from pathlib import Path
from tcpdelay.atomic_file import write_atomic

def half(tmp):
    with open(tmp, "wb") as fh:
        fh.write(b"half a file")
        fh.flush()
        Path(sys.argv[2]).write_text("writing")
        time.sleep(60)        # killed here, mid-write

write_atomic(Path(sys.argv[1]), half)
"""


def test_a_writer_killed_mid_write_leaves_the_old_file_whole(tmp_path):
    path = tmp_path / "flows.parquet"
    path.write_bytes(b"the old file")
    flag = tmp_path / "flag"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path), str(flag)])
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert path.read_bytes() == b"the old file"

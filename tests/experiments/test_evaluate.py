"""``tcpdelay evaluate`` (``make run``): it says what it is doing while it runs, on stderr, and
ends with where the report is and how to open it; ``--json`` keeps stdout to the JSON.

Each run is a real subprocess whose stderr is a pipe (not a terminal, as in CI), so the
progress comes as plain lines.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from tcpdelay.experiments.evaluate import PARTS
from tcpdelay.experiments.measured_check import POINTS, testbed_unavailable

EXE = [sys.executable, "-m", "tcpdelay", "evaluate"]
#: The measured check's run length in the test of the whole job (seconds).
CHECK_S = 3.0


def _evaluate(*args):
    # no COLUMNS: a narrow or absent terminal width must not wrap the paths
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    return subprocess.run([*EXE, *args], capture_output=True, text=True, env=env, timeout=900)


def _check_progress(stderr: str) -> None:
    """A start line and a done line for every part, in report order, numbered i/n."""
    lines = stderr.splitlines()
    n = len(PARTS)
    at = -1
    for i, (name, title, _) in enumerate(PARTS, 1):
        start = next(j for j, line in enumerate(lines) if line == f"[{i}/{n}] {name}: {title} …")
        done = next(j for j, line in enumerate(lines)
                    if re.fullmatch(rf"\[{i}/{n}\] {name}: done in \d+\.\d s( — .+)?", line))
        assert at < start < done, (name, stderr)
        at = done
    # the model parts tell their steps too (which RTT, which profile)
    assert f"[2/{n}] latency: table, RTT 100 ms" in lines
    assert f"[3/{n}] regions: profile voip" in lines
    assert "\x1b[" not in stderr  # no terminal control codes in a log
    # each step once: a part that computes and then draws the same thing (the advice's paths)
    # does not list it twice (issue 27)
    steps = [line for line in lines if line.startswith("[")]
    assert len(steps) == len(set(steps)), [s for s in steps if steps.count(s) > 1]
    assert sum(line.startswith(f"[5/{n}] advice: VoIP call") for line in lines) == 1


@pytest.mark.slow
def test_progress_for_each_part_and_where_the_report_is(tmp_path):
    out = tmp_path / ("a-long-directory-name-" * 6)  # longer than a default 80-column line
    proc = _evaluate("--out", str(out), "--check-duration-s", "0")
    assert proc.returncode == 0, proc.stderr
    _check_progress(proc.stderr)
    assert f"[{len(PARTS)}/{len(PARTS)}] measured_check: done in" in proc.stderr and "not measured: left out" in proc.stderr
    report = (out / "report.html").resolve()
    assert report.is_file() and report.stat().st_size > 10_000
    # the last lines name the report and how to open it (a command when there is one, the URL always)
    last = proc.stdout.strip().splitlines()
    assert last[-2] == f"Report written to {report}"
    assert report.as_uri() in last[-1]


@pytest.mark.slow
def test_evaluate_writes_report_and_json(tmp_path):
    # the measured check's runs 3 s each, not the default DURATION_S (10 s): the same code in a
    # third of the time (the default is make run's, and docs/cli.md's)
    res = _evaluate("--out", str(tmp_path), "--json", "--check-duration-s", str(CHECK_S))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)  # stdout is the JSON alone: progress and the last line go to stderr
    _check_progress(res.stderr)
    assert f"Report written to {doc['report_path']}" in res.stderr.splitlines()
    html = (tmp_path / "report.html").read_text()
    assert doc["report_path"] == str(tmp_path / "report.html")
    # self-contained: figures embedded, nothing fetched
    assert "data:image/png;base64," in html and "src='http" not in html
    paths = doc["throughput"]["paths"]
    assert len(paths) == 12  # RTT 20/100/300 ms x loss 0/0.1/1/5 %
    lossy = [p for p in paths if p["loss"] > 0]
    assert all(p["pftk_bps"] > 0 for p in lossy)
    assert all(p["pftk_bps"] is None for p in paths if p["loss"] == 0)  # unbounded without loss
    transfers = doc["latency"]["transfers"]
    assert len(transfers) == 12 * 3
    # more loss never makes the expected latency shorter, on any path and size
    for size in {t["size_bytes"] for t in transfers}:
        for rtt in {t["rtt_s"] for t in transfers}:
            series = sorted((t["loss"], t["total_mean_s"]) for t in transfers
                            if t["size_bytes"] == size and t["rtt_s"] == rtt)
            means = [m for _, m in series]
            assert means == sorted(means), (size, rtt, series)
            # no transfer beats one RTT of handshake plus one RTT of data
            assert means[0] >= 2 * rtt * 0.999
    # working regions: longer paths tolerate less loss (the model's region shrinks with RTT)
    for name in ("voip", "video"):
        by_rtt = {m["rtt_s"]: m["max_loss"] for m in doc["regions"][name]["max_loss_by_rtt"]}
        assert set(by_rtt) == {0.02, 0.1, 0.3}
        assert by_rtt[0.3] is not None and by_rtt[0.1] is not None
        assert by_rtt[0.3] < by_rtt[0.1]
    assert doc["regions"]["voip"]["percentile"] == 95 and doc["regions"]["voip"]["bound_s"] == 0.2
    # playout advice: L + RTT + 3/f, and it leaves at most 5 % of VoIP packets late (Brosh et al. §6.6)
    for adv in doc["playout"]["voip"]:
        # (the JSON writes 0.05 + 0.1 + 0.06 as 0.21, without the sum's rounding noise: jsonio)
        assert adv["recommended_playout_s"] == pytest.approx(adv["one_way_s"] + adv["rtt_s"] + 3 * 0.02, rel=1e-15)
        assert adv["late_fraction_at_recommended"] <= 0.05
    assert "Working regions of media over TCP" in html and "Playout delay" in html
    # the short measured check: measured where the testbed runs (root, TUN, emulator built — as
    # in CI), otherwise a plain note saying why
    check = doc["measured_check"]
    reason = testbed_unavailable()
    if reason is None:
        assert check["measured"] is True and len(check["points"]) == 3 and not check["failed"]
        assert "Model vs a short measurement on the testbed" in html
        # each measured run is announced as it starts
        runs = [(s, p) for s, losses in POINTS for p in losses]
        for i, (stack, loss) in enumerate(runs, 1):
            assert (f"[{len(PARTS)}/{len(PARTS)}] measured_check: run {i} of {len(runs)}: {stack}, loss {loss * 100:g} %, "
                    f"{CHECK_S:g} s of VoIP") in res.stderr.splitlines()
        assert check["duration_s"] == CHECK_S
        assert f"[{len(PARTS)}/{len(PARTS)}] measured_check: done in" in res.stderr and "3 points measured" in res.stderr
    else:
        assert check["measured"] is False and check["reason"] == reason and "Not measured" in html


def test_a_check_left_out_has_every_key_of_a_measured_one():
    """docs/cli.md: `measured_check` has `duration_s`, `wall_s`, `failed` and `points` always."""
    from tcpdelay.experiments.evaluate import public
    from tcpdelay.experiments.measured_check import run_measured_check

    check = public(run_measured_check(duration_s=0))
    assert set(check) == {"measured", "reason", "duration_s", "wall_s", "failed", "points"}
    assert check["measured"] is False and check["duration_s"] == 0 and check["wall_s"] >= 0
    assert check["failed"] == [] and check["points"] == []


@pytest.mark.parametrize("value", ["0.5", "-1", "3601", "nan"])
def test_bad_check_duration_is_one_line(value):
    proc = _evaluate("--check-duration-s", value, "--out", "/nonexistent-never-written")
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "--check-duration-s" in err, err


def test_unwritable_out_is_one_line_before_any_work(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = _evaluate("--out", str(blocker / "sub"), "--check-duration-s", "0")
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "--out" in err and str(blocker / "sub") in err, err
    assert "[1/" not in err  # refused before the first part started


def test_the_job_hands_each_part_to_the_page_then_writes_it(tmp_path):
    """The parts compute, the page draws: each part's data goes to ``page.add`` inside the part's
    progress (its drawing is part of its time), private keys included; the result holds the
    data without them, and ``report_path`` is what ``page.write`` returned."""
    from tcpdelay.experiments.evaluate import evaluate

    calls, events = [], []

    class Page:
        def add(self, name, data, step):
            calls.append((name, data))
            step(f"drawing {name}")

        def write(self, path):
            calls.append(("write", path))
            return path.parent / "page.html"

    result = evaluate(tmp_path / "o", events.append, page=Page(), check_duration_s=0)
    assert [c[0] for c in calls] == [name for name, _, _ in PARTS] + ["write"]
    assert calls[-1][1] == tmp_path / "o" / "report.html"
    assert result["report_path"] == str(tmp_path / "o" / "page.html")
    for name, data in calls[:-1]:
        assert result[name] == {k: v for k, v in data.items() if not k.startswith("_")}, name
    added = dict(calls[:-1])
    assert {k for k in added["regions"] if k.startswith("_")} == {"_regions", "_profiles"}
    assert added["measured_check"]["_why"] == "left-out" and result["measured_check"]["measured"] is False
    # the page's steps come between the part's start and its end
    for i, (name, _, _) in enumerate(PARTS):
        kinds = [(e.kind, e.text) for e in events if e.name == name]
        assert kinds[0][0] == "start" and kinds[-1][0] == "done"
        assert kinds[-2] == ("step", f"drawing {name}")
    # without a page: the same data, nothing written
    plain = evaluate(tmp_path / "none", check_duration_s=0)
    assert "report_path" not in plain and not (tmp_path / "none").exists()
    assert plain["throughput"] == result["throughput"] and plain["playout"] == result["playout"]


def test_the_page_draws_every_part():
    from tcpdelay.report.evaluation_page import SECTIONS

    assert list(SECTIONS) == [name for name, _, _ in PARTS]

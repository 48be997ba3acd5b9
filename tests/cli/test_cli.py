"""The command line as a user meets it: real subprocesses of the installed ``tcpdelay``."""

import json
import subprocess
import sys

import pytest
from pathlib import Path


def tcpdelay(*args):
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, fragment", [
    (["throughput", "--rtt-s", "0.1", "--loss", "1.5"], "--loss"),
    (["throughput", "--rtt-s", "-1", "--loss", "0.1"], "--rtt-s"),
    (["throughput", "--loss", "0.1"], "Missing option '--rtt-s'"),
    (["no-such-command"], "No such command"),
])
def test_bad_input_is_one_line_and_exit_2(args, fragment):
    res = tcpdelay(*args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("tcpdelay: error: ") and fragment in lines[0]
    assert "Traceback" not in res.stderr


def test_every_command_has_help_and_json():
    import click

    from tcpdelay.cli import COMMAND_MODULES, cli

    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMAND_MODULES)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None and cmd.name == name
        res = tcpdelay(name, "--help")
        assert res.returncode == 0, (name, res.stderr)
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if hasattr(cmd, "commands"):  # a group: each subcommand
            for sub in cmd.commands.values():
                sub_opts = {o for p in sub.params for o in getattr(p, "opts", [])}
                assert "--json" in sub_opts, f"{name} {sub.name} lacks --json"
        else:
            assert "--json" in opts, f"{name} lacks --json"


def test_a_light_command_does_not_import_the_heavy_ones():
    code = ("import sys; from tcpdelay.cli import main\n"
            "try:\n    main(['throughput', '--rtt-s', '0.1', '--loss', '0.01', '--json'])\n"
            "except SystemExit:\n    pass\n"
            "print('scipy.sparse' in sys.modules, 'tcpdelay.testbed' in sys.modules, file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stderr.strip().splitlines()[-1] == "False False", res.stderr


def test_throughput_json_keys_and_values():
    res = tcpdelay("throughput", "--rtt-s", "0.1", "--loss", "0.01", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    for key in ("pftk_segments_per_s", "pftk_simple_segments_per_s", "mathis_segments_per_s",
                "pftk_bps", "pftk_simple_bps", "mathis_bps"):
        assert doc[key] > 0
    # T0 defaults to RTT + 200 ms
    assert doc["t0_s"] == pytest.approx(0.3)
    # bps = segments/s * 8 * MSS (1460 by default)
    assert doc["mathis_bps"] == pytest.approx(doc["mathis_segments_per_s"] * 8 * 1460)
    # Mathis with b = 1: sqrt(1.5) / (0.1 * sqrt(0.01)) = 1.2247 / 0.01 = 122.47 segments/s
    assert doc["mathis_segments_per_s"] == pytest.approx(122.474487, rel=1e-6)


def test_no_loss_unlimited_throughput_is_null_in_json():
    doc = json.loads(tcpdelay("throughput", "--rtt-s", "0.1", "--loss", "0", "--json").stdout)
    assert doc["pftk_bps"] is None and doc["mathis_bps"] is None
    doc = json.loads(tcpdelay("throughput", "--rtt-s", "0.1", "--loss", "0", "--max-window", "10", "--json").stdout)
    # window-limited: 10 segments per 100 ms RTT
    assert doc["pftk_segments_per_s"] == pytest.approx(100.0)


# ---------------------------------------------------------------------------------------------
# Every input gets one line: exit 2, exactly one line on stderr that names the command and the
# flag as typed, never a traceback (issue 9, item 10). Each case was a traceback, or a line
# naming neither the command nor the flag, before.

def assert_one_line(res, prefix):
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"tcpdelay: error: {prefix}"), lines[0]
    return lines[0]


@pytest.mark.parametrize("args, prefix", [
    # the line docs/cli.md promises, word for word
    (["throughput", "--rtt-s", "nan", "--loss", "0.01"], "tcpdelay throughput: --rtt-s: NaN is not allowed"),
    (["throughput", "--rtt-s", "inf", "--loss", "0.01"], "tcpdelay throughput: --rtt-s: inf is not allowed"),
    (["throughput", "--rtt-s", "", "--loss", "0.01"], "tcpdelay throughput: --rtt-s: '' is not a number"),
    (["throughput", "--rtt-s", "0.1", "--loss", "nan"], "tcpdelay throughput: --loss: NaN"),
    (["throughput", "--rtt-s", "0.1", "--loss", "0.01", "--max-window", "inf"], "tcpdelay throughput: --max-window: inf"),
    (["latency", "--size-bytes", "nan", "--rtt-s", "0.1", "--loss", "0.01"], "tcpdelay latency: --size-bytes: NaN"),
    (["latency", "--size-bytes", "1e308", "--rtt-s", "0.1", "--loss", "0.01"], "tcpdelay latency: --size-bytes: 1e+308"),
    (["latency", "--size-bytes", "99999999999999999999999", "--rtt-s", "0.1", "--loss", "0.01"],
     "tcpdelay latency: --size-bytes: 1e+23"),
    (["latency", "--size-bytes", "1e4", "--rtt-s", "0.1", "--loss", "0.01", "--init-window", "nan"],
     "tcpdelay latency: --init-window: NaN"),
    (["region", "--profile", "voip", "--rtts-s", "1e308", "--losses", "0.01"], "tcpdelay region: --rtts-s: 1e+308"),
    (["region", "--profile", "voip", "--rtts-s", "99999999999999999999999", "--losses", "0.01"],
     "tcpdelay region: --rtts-s: 1e+23"),
    (["region", "--profile", "voip", "--rtts-s", "nan", "--losses", "0.01"], "tcpdelay region: --rtts-s: NaN"),
    (["region", "--profile", "voip", "--rtts-s", "0.1", "--losses", "inf"], "tcpdelay region: --losses: inf"),
    (["region", "--profile", "voip", "--rtts-s", "0.1", "--losses", "0.01", "--workers", "99999999999999999999999"],
     "tcpdelay region: --workers: "),
    (["region", "--profile", "voip", "--percentile", "nan"], "tcpdelay region: --percentile: NaN"),
    (["playout", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--one-way-s", "1e308"],
     "tcpdelay playout: --one-way-s: "),
    (["validate", "--rtt-s", "inf"], "tcpdelay validate: --rtt-s: inf is not allowed"),
    (["testbed", "up", "--delay-s", "nan"], "tcpdelay testbed up: --delay-s: NaN is not allowed"),
    (["testbed", "up", "--rate-bps", "1e308"], "tcpdelay testbed up: --rate-bps: "),
    (["run", ""], "tcpdelay run: SCENARIO_FILE: empty path"),
    (["no-such-command"], "tcpdelay: No such command"),
])
def test_bad_values_name_the_command_and_the_flag(args, prefix):
    assert_one_line(tcpdelay(*args), prefix)


def test_metrics_paths_name_the_argument_or_flag(tmp_path):
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    for args, prefix in [
        (["metrics", ""], "tcpdelay metrics: RESULTS: empty path"),
        (["metrics", str(a_file)], f"tcpdelay metrics: RESULTS: {a_file} is not a directory"),
        (["metrics", str(tmp_path / "missing")], f"tcpdelay metrics: RESULTS: {tmp_path / 'missing'} does not exist"),
        (["metrics", str(tmp_path), "--sent", ""], "tcpdelay metrics: --sent: empty path"),
        (["metrics", str(tmp_path), "--sent", "/dev/null"], "tcpdelay metrics: --sent: /dev/null is not a directory"),
        (["metrics", str(tmp_path), "--jitter-buffer-s", "nan"], "tcpdelay metrics: --jitter-buffer-s: NaN"),
        (["metrics", str(tmp_path), "--cross-traffic-start-s", "-inf"], "tcpdelay metrics: --cross-traffic-start-s: -inf"),
    ]:
        assert_one_line(tcpdelay(*args), prefix)


def test_the_library_names_its_parameter_and_the_cli_the_flag():
    """A ParameterError from the model (``rtt_s: ...``) reaches the user as the flag typed."""
    import click

    from tcpdelay.cli import cli
    from tcpdelay.cli.common import name_the_flag

    ctx = click.Context(cli.get_command(click.Context(cli), "delay"), info_name="delay")
    assert name_the_flag(ctx, "rtt_s: 2 is bad") == "--rtt-s: 2 is bad"
    assert name_the_flag(ctx, "plot_path: x") == "--plot: x"
    assert name_the_flag(ctx, "one_way_s: x") == "--one-way-s: x"
    assert name_the_flag(ctx, "give --profile NAME") == "give --profile NAME"  # no parameter: unchanged
    assert name_the_flag(ctx, "frobnicate: x") == "frobnicate: x"


@pytest.mark.parametrize("shard", ["3/2", "0/4", "two"])
def test_a_bad_shard_is_one_line_and_exit_2(shard, tmp_path):
    root = Path(__file__).resolve().parents[2]
    res = tcpdelay("sweep", str(root / "experiments" / "voip-random-loss.toml"), "--shard", shard,
                   "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "shard" in res.stderr
    assert not (tmp_path / "o").exists()


def test_a_dry_run_plans_every_run_and_writes_nothing(tmp_path):
    import json

    root = Path(__file__).resolve().parents[2]
    res = tcpdelay("sweep", str(root / "experiments" / "voip-random-loss.toml"), "--dry-run", "--nodes", "2",
                   "--shard", "1/3", "--out", str(tmp_path / "o"), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["units"] == 4 and doc["shard"] == "1/3" and not (tmp_path / "o").exists()    # 12 runs, a third
    assert [r["status"] for r in doc["runs"]] == ["planned"] * 4
    # 20-s runs + 5 s each, 4 of them over 2 nodes x 1 job: 50 s
    assert doc["estimate"]["busy_s"] == 4 * 25.0 and doc["estimate"]["wall_s"] == 50.0


def _closed_port() -> int:
    import socket

    with socket.socket() as s:        # a port nobody listens on (bound, then released)
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("extra, fragment", [
    (["--engine", "spark"], "--engine"),
    (["--address", "127.0.0.1:6379"], "--address: only with --engine ray"),
    (["--engine", "ray", "--address", "not an address"], "not a Ray cluster address"),
    (["--engine", "ray", "--address", "CLOSED"], "no Ray cluster answers"),
])
def test_a_bad_engine_or_address_is_one_line_and_exit_2(extra, fragment, tmp_path):
    root = Path(__file__).resolve().parents[2]
    extra = [f"127.0.0.1:{_closed_port()}" if a == "CLOSED" else a for a in extra]
    res = tcpdelay("sweep", str(root / "experiments" / "voip-random-loss.toml"), *extra, "--backend", "ns3",
                   "--out", str(tmp_path / "o"))
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("tcpdelay: note:")]
    assert len(lines) == 1 and fragment in lines[0], res.stderr
    assert not (tmp_path / "o").exists()

"""The command line as a user meets it: real subprocesses of the installed ``tcpdelay``."""

import json
import subprocess
import sys

import pytest


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

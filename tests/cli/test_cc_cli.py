"""``tcpdelay cc list``: every variant the papers compare, by the names the issue gives, with the
name TCP_CONGESTION takes, its source, its status here and its parameters."""

import json
import subprocess
import sys

from tcpdelay.testbed.congestion import VARIANTS

NAMES = {"reno", "cubic", "bbr", "newreno", "vegas", "westwood", "westwood+", "compound", "ccp", "ccpd"}


def _tcpdelay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True)


def test_cc_list_json_names_every_variant_with_its_parameters():
    out = _tcpdelay("cc", "list", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    by_name = {v["name"]: v for v in doc["variants"]}
    assert set(by_name) == NAMES
    for v in doc["variants"]:
        assert {"name", "kernel_name", "source", "status", "parameters"} <= set(v)
        assert v["source"] in ("builtin", "bpf")
        assert v["status"] in ("builtin", "unavailable", "loaded", "loadable", "not built")
        assert [p["name"] for p in v["parameters"]] == [p.name for p in VARIANTS[v["name"]].params]
    assert by_name["reno"]["kernel_name"] == "reno" and by_name["reno"]["source"] == "builtin"
    assert by_name["ccpd"]["kernel_name"] == "tdccpd" and by_name["ccpd"]["source"] == "bpf"
    assert {p["name"]: p["default"] for p in by_name["ccpd"]["parameters"]}["kd"] == 2000
    assert {p["name"]: p["default"] for p in by_name["compound"]["parameters"]}["k"] == 0.75


def test_cc_list_table_lists_them_too():
    out = _tcpdelay("cc", "list")
    assert out.returncode == 0, out.stderr
    for name in ("compound", "ccpd", "westwood+"):
        assert name in out.stdout

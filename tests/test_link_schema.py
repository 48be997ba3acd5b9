"""One schema for a link: the Python vocabulary (tcpdelay.link) and the emulator's file reader
(tcpdelay-link, emulator/src/config.rs + schema.rs) accept the same keys within the same limits,
and docs/emulator.md's key table is the one generated from that schema."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tcpdelay import link
from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.testbed.emulator import find_binary
from tcpdelay.testbed.spec import parse_spec

ROOT = Path(__file__).resolve().parents[1]
ENDPOINTS = {"a": {"netns": "tdl-none-a", "tun": "t0"}, "b": {"netns": "tdl-none-b", "tun": "t1"}}


def emulator(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([find_binary(), *args], capture_output=True, text=True, timeout=30)


def test_emulator_schema_is_the_python_schema():
    proc = emulator("--schema")
    assert proc.returncode == 0, proc.stderr
    rust = json.loads(proc.stdout)
    python = link.schema()
    assert rust.keys() == python.keys()
    assert rust["direction"] == python["direction"]
    assert rust["loss"] == python["loss"]
    assert rust["outage"] == python["outage"]
    assert rust["aqm"] == python["aqm"]
    assert rust["whole"] == python["whole"]
    assert rust["limits"] == python["limits"]  # 60.0 == 60: numbers compare by value
    # The key sets are the models' fields, and every limit names a key of them.
    assert python["direction"] == list(link.DirectionSpec.model_fields)
    for key in python["limits"]:
        head, _, tail = key.partition(".")
        if head == "loss":
            assert tail in python["loss"]["gilbert_elliott"]
        elif head == "outages":
            assert tail in python["outage"]
        elif head == "aqm":
            assert any(tail in keys for keys in python["aqm"].values())
        else:
            assert key in python["direction"]


def test_docs_key_table_is_generated_from_the_schema():
    """docs/emulator.md holds exactly link.key_table() (regenerate it from there after a change)."""
    page = (ROOT / "docs" / "emulator.md").read_text(encoding="utf-8")
    table = link.key_table()
    assert table in page
    for key in link.schema()["direction"]:
        assert f"| `{key}` |" in table
    for key in link.LIMITS:
        assert link.limit_text(key) in table


def _direction(key: str, value: float) -> dict:
    """The smallest direction table that sets ``key`` (a key of LIMITS) to ``value``."""
    head, _, tail = key.partition(".")
    if head == "loss":
        if tail == "p":
            return {"loss": {"model": "bernoulli", "p": value}}
        return {"loss": {"model": "gilbert_elliott", "p": 0.1, "r": 0.5, tail: value}}
    if head == "outages":
        return {"outages": [{"at_s": 1.0, "duration_s": 1.0, tail: value}]}
    if head == "aqm":
        discipline = next(name for name, keys in link.schema()["aqm"].items() if tail in keys)
        return {"aqm": {"discipline": discipline, tail: value}}
    return {key: value}


def _path(key: str) -> str:
    head, _, tail = key.partition(".")
    return {"loss": f"loss.{tail}", "outages": f"outages[0].{tail}", "aqm": f"aqm.{tail}"}.get(head, key)


def _outside(key: str) -> list[float]:
    """Values just outside ``LIMITS[key]``: just over the maximum, just under (or at, when
    exclusive) the minimum."""
    lim = link.LIMITS[key]
    step = 1 if key in link.WHOLE else 1e-6
    low = lim.min if lim.min_exclusive else lim.min - step
    return [lim.max + step, low]


def _rust_check(direction: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    """``tcpdelay-link --check`` of a file with ``direction`` as ``a_to_b``."""
    path = tmp_path / f"link{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps({**ENDPOINTS, "a_to_b": direction}))
    return emulator("--config", str(path), "--check")


@pytest.mark.parametrize("key", list(link.LIMITS))
def test_just_outside_each_limit_both_sides_refuse_with_one_line(key, tmp_path):
    for value in _outside(key):
        direction = _direction(key, value)
        where = _path(key)
        with pytest.raises(ParameterError) as err:
            link.DirectionSpec(**direction)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("DirectionSpec.") and key.split(".")[-1] in msg, msg
        with pytest.raises(ParameterError) as err:
            parse_spec({"link": {"a_to_b": direction}})
        assert "\n" not in str(err.value) and "TestbedSpec.link.a_to_b." in str(err.value), str(err.value)
        with pytest.raises(ParameterError) as err:
            parse_scenario({"duration_s": 10, "flows": [{"profile": "voip"}], "path": direction})
        assert "\n" not in str(err.value) and str(err.value).startswith("scenario: path."), str(err.value)
        proc = _rust_check(direction, tmp_path)
        assert proc.returncode == 2, (key, value, proc.stdout)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tcpdelay-link: a_to_b.{where}: must be"), (value, lines)


@pytest.mark.parametrize("key", list(link.LIMITS))
def test_at_each_maximum_both_sides_accept(key, tmp_path):
    direction = _direction(key, link.LIMITS[key].max)
    spec = link.DirectionSpec(**direction)
    proc = _rust_check(spec.settings(), tmp_path)  # the file the testbed writes, null keys and all
    assert proc.returncode == 0, proc.stderr


def test_fractional_rate_is_refused_by_both(tmp_path):
    with pytest.raises(ParameterError, match="whole number"):
        link.DirectionSpec(rate_bps=1.5e6 + 0.5)
    proc = _rust_check({"rate_bps": 1.5e6 + 0.5}, tmp_path)
    assert proc.returncode == 2 and "a_to_b.rate_bps: must be a whole number" in proc.stderr


def test_byte_queue_below_the_mtu_is_refused_by_both(tmp_path):
    with pytest.raises(ParameterError, match="less than mtu_bytes 1500"):
        parse_spec({"link": {"a_to_b": {"queue_bytes": 1499}}})
    assert parse_spec({"link": {"a_to_b": {"queue_bytes": 1000}}, "mtu_bytes": 1000}).mtu_bytes == 1000
    proc = _rust_check({"queue_bytes": 1499}, tmp_path)
    assert proc.returncode == 2 and "a_to_b.queue_bytes: must be at least mtu (1500)" in proc.stderr


def test_unknown_keys_are_refused_by_both_naming_the_allowed_ones(tmp_path):
    with pytest.raises(ParameterError, match="unknown key 'delya_s'; allowed: delay_s, jitter_s"):
        link.DirectionSpec(delya_s=0.1)
    proc = _rust_check({"delya_s": 0.1}, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("tcpdelay-link: a_to_b.delya_s: unknown field `delya_s`, expected one of `delay_s`")


@pytest.mark.parametrize("key", list(link.LIMITS))
def test_a_named_link_in_links_has_the_same_limits_naming_its_path(key, tmp_path):
    """The multi-link form (``links``, docs/emulator.md "Many links in one process") reads each
    link's directions with the same schema: refused just outside each limit, with the link's
    path in the one line, and accepted at the maximum."""
    def check(direction: dict) -> subprocess.CompletedProcess:
        path = tmp_path / f"links{len(list(tmp_path.iterdir()))}.json"
        other = {"name": "access-h0", "a": {"netns": "tdl-none-c", "tun": "t2"}, "b": {"netns": "tdl-none-a", "tun": "t3"}}
        path.write_text(json.dumps({"links": [other, {"name": "bottleneck", **ENDPOINTS, "a_to_b": direction}]}))
        return emulator("--config", str(path), "--check")

    for value in _outside(key):
        proc = check(_direction(key, value))
        lines = proc.stderr.splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (value, proc.stderr)
        assert lines[0].startswith(f"tcpdelay-link: links[1].a_to_b.{_path(key)}: must be"), lines
    proc = check(link.DirectionSpec(**_direction(key, link.LIMITS[key].max)).settings())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["links"][1]["name"] == "bottleneck"

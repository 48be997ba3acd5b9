"""The scenario file: loading, one-line errors naming the bad key, path resolution, sweeps."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.plan import plan_run
from tcpdelay.experiments.scenario import (
    PROFILES, BernoulliLoss, GilbertElliottLoss, NoLoss, apply_overrides, cell_scenario, describe,
    dump_scenario, grid, load_scenario, parse_scenario,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "experiments").glob("*.toml"))
BASE = {"duration_s": 10, "flows": [{"profile": "voip"}]}


def with_(**kw) -> dict:
    return {**BASE, **kw}


def error(data) -> str:
    with pytest.raises(ParameterError) as exc:
        parse_scenario(data, source="scenario.toml")
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_load_and_round_trip(path):
    sc = load_scenario(path)
    assert sc.flows or sc.streams or sc.cross   # cross traffic alone is a scenario too (papers/004 §4.1, papers/001)
    again = parse_scenario(tomllib.loads(dump_scenario(sc)), source="again")
    assert again == sc
    for overrides in grid(sc):
        cell_scenario(sc, overrides)


def test_examples_exist():
    names = {p.name for p in EXAMPLES}
    assert {"voip-random-loss.toml", "droptail-web.toml", "audio-page-load.toml"} <= names


@pytest.mark.parametrize("data, expected", [
    ({"duration_s": 10, "flows": [{"profile": "voip"}, {"profile": "voip2"}]},
     "scenario.toml: flows[1].profile: 'voip2' is not one of voip, voip-low, "),
    (with_(flows=[{"profile": "voip", "transport": "sctp"}]), "flows[0].transport: 'sctp' is not one of tcp, udp"),
    (with_(path={"dealy_s": 0.1}), "path: unknown key 'dealy_s'; allowed: delay_s,"),
    (with_(path={"loss": {"model": "gilbert", "p": 0.1}}),
     "path.loss.model: 'gilbert' is not one of none, bernoulli, gilbert_elliott"),
    (with_(path={"loss": {"model": "bernoulli", "p": 1.5}}), "path.loss.p: 1.5: input should be less than or equal to 1"),
    (with_(path={"loss": {"p": 0.5}}), "path.loss: missing key 'model'"),
    (with_(path={"forward": {"rate_bps": "fast"}}), "path.forward.rate_bps: 'fast': input should be a valid number"),
    (with_(path={"queue_packets": 10, "queue_bytes": 1000}), "path: queue_packets and queue_bytes are exclusive"),
    (with_(path={"rtt_s": 0.1, "delay_s": 0.05}), "path: rtt_s and delay_s are exclusive"),
    (with_(path={"outages": [{"at_s": 1}]}), "path.outages[0].duration_s: missing (required)"),
    (with_(path=5), "path: 5 must be a table"),
    (with_(cross=[{"kind": "ftp"}]), "cross[0].kind: 'ftp' is not one of bulk, web_onoff, page_load, transfers, udp"),
    (with_(cross=[{"kind": "udp"}]), "cross[0].rate_bps: missing (required)"),
    (with_(cross=[{"kind": "bulk", "size_bytes": -1}]), "cross[0].size_bytes: -1: input should be greater than or equal to 1"),
    (with_(cross=[{"kind": "bulk", "start_s": 5, "start_spread_s": 2, "stop_s": 6}]), "cross[0]: stop_s 6 must be after the latest start 7"),
    (with_(cross=[{"kind": "page_load"}]), "cross[0] starts at 12 s, not before duration_s 10"),
    (with_(cross=[{"kind": "page_load", "connections": 6, "total_bytes": 5, "start_s": 1}]), "cross[0]: total_bytes 5 is less than one byte per connection"),
    (with_(flows=[{"profile": "voip", "tcp": {"preset": "reno"}}]),
     "flows[0].tcp.preset: 'reno' is not one of newreno-2008, linux-default"),
    (with_(flows=[{"profile": "voip", "tcp": {"congestion_control": "Cubic!"}}]), "flows[0].tcp.congestion_control: 'Cubic!' is not a congestion-control name"),
    (with_(flows=[{"profile": "voip", "transport": "udp", "heuristics": {"connections": 2}}]),
     "flows[0]: heuristics.connections needs transport = 'tcp'"),
    (with_(flows=[{"profile": "voip", "heuristics": {"scheduler": "intelligent"}}]), "needs connections >= 2"),
    (with_(flows=[{"transport": "tcp"}]), "flows[0]: give a profile, or packet_size_bytes and interval_s"),
    (with_(flows=[{"profile": "mpeg4-tes"}]), "flows[0]: profile 'mpeg4-tes' needs rate_bps"),
    (with_(flows=[{"profile": "voip", "stop_s": 20}]), "flows[0].stop_s 20 is after duration_s 10"),
    (with_(flows=[{"profile": "voip", "count": 2.5}]), "flows[0].count: 2.5: input should be a valid integer"),
    (with_(flows=[]), "a scenario needs at least one of flows, streams or cross traffic"),
    ({"flows": [{"profile": "voip"}]}, "scenario.toml: duration_s: missing (required)"),
    (with_(metrics=["delay", "mos2"]), "metrics: 'mos2' is not one of delay,"),
    (with_(seeds=[1, 1]), "seeds: repeated seeds"),
    (with_(seeds=[1, 2], repetitions=3), "repetitions 3 does not match the 2 seeds"),
    (with_(sweep={"path.rtt_s": 0.1}), "sweep.\"path.rtt_s\": give a non-empty list of values"),
    (with_(sweep={"flows[3].profile": ["video"]}), "sweep key 'flows[3].profile': there is no element [3] (the scenario has 1)"),
    (with_(sweep={"path.loss.p": [0.1, 2]}, path={"loss": {"model": "bernoulli", "p": 0}}),
     "scenario.toml [sweep: path.loss.p = 2]: path.loss.p: 2: input should be less than or equal to 1"),
    (with_(sweep={"flows.0.profile": ["video", "vidoe"]}), "[sweep: flows.0.profile = 'vidoe']: flows[0].profile: 'vidoe' is not one of"),
])
def test_errors_are_one_line_naming_the_key(data, expected):
    msg = error(data)
    assert expected in msg, msg
    assert msg.startswith("scenario.toml")


def test_bad_toml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("duration_s = \n")
    with pytest.raises(ParameterError, match=r"^bad.toml: not valid TOML: .*line 1"):
        load_scenario(bad)
    with pytest.raises(ParameterError, match="no such scenario file"):
        load_scenario(tmp_path / "absent.toml")


def test_trace_paths_resolve_relative_to_the_file(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "lte.down").write_text("0\n1\n")
    f = tmp_path / "s.toml"
    f.write_text('duration_s = 5\n[path.forward]\ntrace = "traces/lte.down"\n[[flows]]\nprofile = "voip"\n')
    sc = load_scenario(f)
    assert sc.path.direction("forward").trace_file == str((tmp_path / "traces" / "lte.down").resolve())
    assert sc.path.direction("reverse").trace_file is None
    f.write_text('duration_s = 5\n[path]\ntrace = "nope.down"\n[[flows]]\nprofile = "voip"\n')
    with pytest.raises(ParameterError, match=r"s.toml: path.trace: file 'nope.down' does not exist"):
        load_scenario(f)


def test_direction_resolution():
    sc = parse_scenario(with_(path={
        "rtt_s": 0.1, "rate_bps": 3e6, "queue_packets": 100,
        "loss": {"model": "bernoulli", "p": 0.01},
        "forward": {"queue_bytes": 50_000, "loss": {"model": "gilbert_elliott", "p": 0.01, "r": 0.5}},
        "reverse": {"delay_s": 0.01, "loss": {"model": "none"}},
    }))
    fw, rv = sc.path.direction("forward"), sc.path.direction("reverse")
    assert fw.delay_s == pytest.approx(0.05) and rv.delay_s == 0.01
    assert fw.rate_bps == rv.rate_bps == 3e6
    # A direction's choice of queue unit replaces the path's.
    assert (fw.queue_bytes, fw.queue_packets) == (50_000, None)
    assert (rv.queue_packets, rv.queue_bytes) == (100, None)
    assert isinstance(fw.loss, GilbertElliottLoss) and (fw.loss.k, fw.loss.h) == (1.0, 0.0)
    assert isinstance(rv.loss, NoLoss)
    default = parse_scenario(BASE).path.direction("forward")
    assert (default.delay_s, default.rate_bps, default.queue_packets, default.outages) == (0.0, None, None, ())


def test_seeds_and_profiles():
    assert parse_scenario(with_(seed=7, repetitions=3)).seed_list == (7, 8, 9)
    assert parse_scenario(with_(seeds=[5, 3])).seed_list == (5, 3)
    assert parse_scenario(BASE).seed_list == (1,)
    sc = parse_scenario(with_(flows=[{"profile": "video"}, {"packet_size_bytes": 200, "interval_s": 0.01},
                                     {"profile": "mpeg4-tes", "rate_bps": 1e6}]))
    assert sc.flows[0].cbr == (1448, 0.02)
    assert sc.flows[1].cbr == (200, 0.01)
    assert sc.flows[2].cbr is None
    assert {"voip", "video", "voip-onoff", "mpeg4-tes"} <= set(PROFILES)


def test_grid_order_and_overrides():
    sc = parse_scenario(with_(path={"loss": {"model": "bernoulli", "p": 0.0}},
                              sweep={"path.loss.p": [0.001, 0.01], "flows[0].profile": ["voip", "video", "voip-low"]}))
    cells = grid(sc)
    assert len(cells) == 6
    assert cells[0] == {"path.loss.p": 0.001, "flows[0].profile": "voip"}
    assert cells[1] == {"path.loss.p": 0.001, "flows[0].profile": "video"}
    assert cells[5] == {"path.loss.p": 0.01, "flows[0].profile": "voip-low"}
    c = cell_scenario(sc, cells[4])
    assert c.path.loss.p == 0.01 and c.flows[0].profile == "video" and c.sweep == {}
    assert describe(cells[4]) == "path.loss.p=0.01 flows[0].profile='video'"
    assert grid(parse_scenario(BASE)) == [{}]


def test_apply_overrides_creates_tables_and_copies():
    data = {"a": {"b": 1}, "l": [{"x": 1}]}
    out = apply_overrides(data, {"a.c.d": 2, "l[0].x": 5, "l.0.y": [1]})
    assert out == {"a": {"b": 1, "c": {"d": 2}}, "l": [{"x": 5, "y": [1]}]}
    assert data == {"a": {"b": 1}, "l": [{"x": 1}]}
    with pytest.raises(ParameterError, match="is not a key"):
        apply_overrides(data, {"a..b": 1})


def test_linked_sweep_keys_set_one_value_at_every_key():
    sc = parse_scenario(with_(
        flows=[{"profile": "voip", "tcp": {"congestion_control": "reno"}}],
        cross=[{"kind": "bulk", "count": 2, "tcp": {"congestion_control": "reno"}}],
        sweep={"flows[0].tcp.congestion_control & cross[0].tcp.congestion_control": ["reno", "vegas"],
               "cross[0].count": [1, 3]}))
    cells = grid(sc)
    assert len(cells) == 4                                 # linked keys are one axis, not two
    c = cell_scenario(sc, cells[2])
    assert c.flows[0].tcp.congestion_control == "vegas" == c.cross[0].tcp.congestion_control
    assert c.cross[0].count == 1
    with pytest.raises(ParameterError, match="an empty key around '&'"):
        apply_overrides({"a": 1}, {"a & ": 2})
    with pytest.raises(ParameterError, match="a key is linked to itself"):
        apply_overrides({"a": 1}, {"a & a": 2})
    with pytest.raises(ParameterError, match="there is no element \\[1\\]"):
        apply_overrides({"l": [{}]}, {"l[0].x & l[1].x": 2})
    with pytest.raises(ParameterError, match="cannot sweep itself"):
        grid(parse_scenario(with_(sweep={"path.rtt_s & sweep.x": [1]})))


def test_cross_traffic_alone_is_a_scenario():
    """papers/004 §4.1's reference: FTP flows only, no media flow."""
    sc = parse_scenario({"duration_s": 10, "cross": [{"kind": "bulk", "count": 3}]})
    assert sc.flows == () and sc.cross[0].count == 3
    assert "needs at least one of flows, streams or cross traffic" in error(
        {"duration_s": 10, "cross": [{"kind": "bulk", "count": 0}]})


@settings(max_examples=40, deadline=None)
@given(p=st.floats(0, 1), rtt=st.floats(0, 2), q=st.integers(1, 10_000), cc=st.sampled_from(["reno", "cubic", "bbr"]),
       profile=st.sampled_from([p for p in PROFILES if p not in ("mpeg4-tes", "video-trace")]))
def test_round_trip_through_toml(p, rtt, q, cc, profile):
    sc = parse_scenario(with_(path={"rtt_s": rtt, "queue_packets": q, "loss": {"model": "bernoulli", "p": p}},
                              flows=[{"profile": profile, "tcp": {"congestion_control": cc}}]))
    assert parse_scenario(tomllib.loads(dump_scenario(sc))) == sc
    assert isinstance(sc.path.direction("forward").loss, BernoulliLoss)


# --------------------------------------------------------------------------- item 10: bounded grids, one line

def _huge_grid_file(tmp_path) -> Path:
    """A valid scenario whose [sweep] is 100 x 100 x 100 = 10^6 cells (far over the limit)."""
    delays = ", ".join(f"{0.001 * (i + 1):g}" for i in range(100))
    durations = ", ".join(str(i + 1) for i in range(100))
    starts = ", ".join(f"{0.01 * i:g}" for i in range(100))
    f = tmp_path / "huge.toml"
    f.write_text(f'duration_s = 3\n[[flows]]\nprofile = "voip"\n[sweep]\n"path.forward.delay_s" = [{delays}]\n'
                 f'"duration_s" = [{durations}]\n"flows[0].start_s" = [{starts}]\n')
    return f


def _cli(*args, env=None):
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_a_huge_sweep_grid_is_refused_at_once_naming_its_size(tmp_path):
    from tcpdelay.experiments.scenario import MAX_SWEEP_CELLS

    f = _huge_grid_file(tmp_path)
    with pytest.raises(ParameterError, match=rf"^huge.toml: \[sweep\]: the grid has 1000000 cells \(100 x 100 x 100\); "
                                             rf"at most {MAX_SWEEP_CELLS}"):
        load_scenario(f)
    # tcpdelay run ignores [sweep]: the grid is neither expanded nor refused
    assert load_scenario(f, sweep=False).duration_s == 3
    res = _cli("sweep", str(f), "--out", str(tmp_path / "out"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.splitlines() == [
        f"tcpdelay: error: tcpdelay sweep: huge.toml: [sweep]: the grid has 1000000 cells (100 x 100 x 100); "
        f"at most {MAX_SWEEP_CELLS} per scenario (split it into several files)"]
    assert not (tmp_path / "out").exists()


def test_run_does_not_expand_the_sweep_grid(tmp_path):
    """`run` ignores [sweep]: with a 10^6-cell grid it gets past loading at once and stops at the
    next check (here: no emulator binary), one line, nothing written."""
    f = _huge_grid_file(tmp_path)
    res = _cli("run", str(f), "--out", str(tmp_path / "out"), env={"TCPDELAY_LINK": str(tmp_path / "no-emulator")})
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcpdelay: error: TCPDELAY_LINK="), lines  # the machine's, not input
    assert not (tmp_path / "out").exists()


def test_a_directory_given_as_a_file_says_so(tmp_path):
    (tmp_path / "traces").mkdir()
    f = tmp_path / "s.toml"
    f.write_text('duration_s = 3\n[[flows]]\nprofile = "video-trace"\ntrace = "traces"\n')
    with pytest.raises(ParameterError, match=r"^s.toml: flows\[0\].trace: 'traces' is a directory, not a trace file$"):
        load_scenario(f)
    f.write_text('duration_s = 3\n[[flows]]\nprofile = "video-trace"\ntrace = ""\n')
    with pytest.raises(ParameterError, match=r"^s.toml: flows\[0\].trace: empty path"):
        load_scenario(f)
    with pytest.raises(ParameterError, match=r"is a directory, not a scenario file"):
        load_scenario(tmp_path)
    f.write_text('duration_s = 3\n[[flows]]\nprofile = "video-trace"\ntrace = "traces"\n')
    res = _cli("sweep", str(f), "--out", str(tmp_path / "out"))
    assert res.returncode == 2 and res.stderr.splitlines() == [
        "tcpdelay: error: tcpdelay sweep: s.toml: flows[0].trace: 'traces' is a directory, not a trace file"]


def test_access_table_keys_limits_and_trace_files(tmp_path):
    from tcpdelay.errors import ParameterError
    from tcpdelay.experiments.scenario import load_scenario

    ok = parse_scenario({"duration_s": 5, "flows": [{"profile": "voip"}],
                         "access": {"delay_s": 0.01, "queue_packets": 30, "left": {"queue_bytes": 30000}}})
    left, right = ok.access.side("left"), ok.access.side("right")
    assert (left.queue_bytes, left.queue_packets, left.delay_s) == (30000, None, 0.01)
    assert (right.queue_packets, right.delay_s) == (30, 0.01)
    for bad, fragment in [({"bogus": 1}, "access: unknown key .bogus"), ({"delay_s": -1}, "access.delay_s"),
                          ({"right": {"loss": {"model": "bernoulli", "p": 2}}}, "access.right.loss")]:
        with pytest.raises(ParameterError, match=fragment):
            parse_scenario({"duration_s": 5, "flows": [{"profile": "voip"}], "access": bad})
    (tmp_path / "t.trace").write_text("1\n2\n")
    (tmp_path / "s.toml").write_text('duration_s = 5\n[[flows]]\nprofile = "voip"\n[access.right]\ntrace = "t.trace"\n')
    assert load_scenario(tmp_path / "s.toml").access.right.trace == str((tmp_path / "t.trace").resolve())
    (tmp_path / "m.toml").write_text('duration_s = 5\n[[flows]]\nprofile = "voip"\n[access]\ntrace = "nope.trace"\n')
    with pytest.raises(ParameterError, match="access.trace"):
        load_scenario(tmp_path / "m.toml")


def test_trace_paths_in_a_sweep_resolve_relative_to_the_file(tmp_path):
    """A sweep over traces (one value per trace file, or tables holding one) finds them next to
    the scenario file, as a trace outside the sweep is found; a missing one is named."""
    (tmp_path / "traces").mkdir()
    for name in ("a.down", "b.down"):
        (tmp_path / "traces" / name).write_text("0\n1\n")
    f = tmp_path / "s.toml"
    f.write_text('duration_s = 5\n[[flows]]\nprofile = "voip"\n[path.forward]\ntrace = "traces/a.down"\n'
                 '[sweep]\n"path.forward.trace" = ["traces/a.down", "traces/b.down"]\n'
                 '"access.right" = [{ trace = "traces/b.down" }]\n')
    sc = load_scenario(f)
    resolved = [str((tmp_path / "traces" / n).resolve()) for n in ("a.down", "b.down")]
    assert sc.sweep["path.forward.trace"] == resolved
    assert sc.sweep["access.right"] == [{"trace": resolved[1]}]
    cells = [cell_scenario(sc, o) for o in grid(sc)]
    assert [c.path.direction("forward").trace_file for c in cells] == resolved
    assert all(c.access.right.trace == resolved[1] for c in cells)
    f.write_text('duration_s = 5\n[[flows]]\nprofile = "voip"\n[sweep]\n"path.forward.trace" = ["traces/nope.down"]\n')
    with pytest.raises(ParameterError, match=r"s.toml: \[sweep\] 'path.forward.trace', value 1.trace: "
                                             r"file 'traces/nope.down' does not exist"):
        load_scenario(f)


# --------------------------------------------------------------------------- MSS, window clamp, MTU

_TRANSFERS = {"kind": "transfers", "size_bytes": 536 * 16}


def _transfers(tcp: dict, path: dict | None = None, kind: dict | None = None) -> dict:
    return {"duration_s": 10, "path": {"rtt_s": 0.064, **(path or {})}, "cross": [{**(kind or _TRANSFERS), "tcp": tcp}]}


def test_mss_window_clamp_and_mtu_are_taken_by_transfers():
    sc = parse_scenario(_transfers({"mss_bytes": 4312, "window_clamp_bytes": 8 * 4312}, {"mtu_bytes": 9000}))
    assert sc.cross[0].tcp.mss_bytes == 4312 and sc.cross[0].tcp.window_clamp_bytes == 8 * 4312
    plan = plan_run(sc, 1)
    assert plan.mtu_bytes == 9000 and plan.testbed_spec(1).mtu_bytes == 9000
    # the MTU is no direction key: the link's direction tables do not get it
    assert "mtu_bytes" not in plan.link["a_to_b"]
    # unset: 1500, and left out of the scenario's data (older scenarios keep their cell ids)
    plain = parse_scenario(_transfers({}))
    assert plain.path.mtu == 1500 and plan_run(plain, 1).mtu_bytes == 1500
    assert "mtu_bytes" not in plain.to_data()["path"]
    assert parse_scenario(_transfers({"mss_bytes": 1448})).cross[0].tcp.mss_bytes == 1448   # 1448 + 52 = 1500


@pytest.mark.parametrize("tcp, path, kind, expected", [
    ({"mss_bytes": 1449}, None, None,
     "scenario.toml: cross[0].tcp.mss_bytes: 1449 + 52 bytes of headers does not fit path.mtu_bytes 1500; "
     "raise path.mtu_bytes to at least 1501"),
    ({"mss_bytes": 4312}, {"mtu_bytes": 4000}, None,
     "scenario.toml: cross[0].tcp.mss_bytes: 4312 + 52 bytes of headers does not fit path.mtu_bytes 4000; "
     "raise path.mtu_bytes to at least 4364"),
    ({"mss_bytes": 10}, None, None, "scenario.toml: cross[0].tcp.mss_bytes: 10: input should be greater than or equal to 76"),
    ({"mss_bytes": 9000}, {"mtu_bytes": 9000}, None,
     "scenario.toml: cross[0].tcp.mss_bytes: 9000: input should be less than or equal to 8948"),
    ({"window_clamp_bytes": 100}, None, None,
     "scenario.toml: cross[0].tcp.window_clamp_bytes: 100: input should be greater than or equal to 1024"),
    ({}, {"mtu_bytes": 9001}, None, "scenario.toml: path.mtu_bytes: 9001: input should be less than or equal to 9000"),
    ({}, {"mtu_bytes": 100}, None, "scenario.toml: path.mtu_bytes: 100: input should be greater than or equal to 576"),
    ({"mss_bytes": 536}, None, {"kind": "bulk", "size_bytes": 10_000},
     "scenario.toml: cross[0].tcp.mss_bytes: only cross kind 'transfers' applies it (kind 'bulk' would ignore it)"),
    ({"window_clamp_bytes": 4288}, None, {"kind": "page_load", "start_s": 0, "start_spread_s": 0},
     "scenario.toml: cross[0].tcp.window_clamp_bytes: only cross kind 'transfers' applies it "
     "(kind 'page_load' would ignore it)"),
])
def test_bad_mss_window_clamp_and_mtu_are_one_line(tcp, path, kind, expected):
    assert error(_transfers(tcp, path, kind)) == expected


def test_a_media_flow_or_a_stream_refuses_the_transfers_keys():
    assert error(with_(flows=[{"profile": "voip", "tcp": {"mss_bytes": 536}}])) == (
        "scenario.toml: flows[0].tcp.mss_bytes: only cross kind 'transfers' applies it (a media flow would ignore it)")
    assert error({"duration_s": 10, "streams": [{"kind": "http_video", "tcp": {"window_clamp_bytes": 65536}}]}) == (
        "scenario.toml: streams[0].tcp.window_clamp_bytes: only cross kind 'transfers' applies it "
        "(kind 'http_video' would ignore it)")


def test_a_sweep_cell_whose_mss_does_not_fit_the_mtu_is_refused_at_load():
    data = {**_transfers({"mss_bytes": 536}), "sweep": {"cross[0].tcp.mss_bytes": [536, 4312]}}
    msg = error(data)
    assert "cross[0].tcp.mss_bytes = 4312" in msg and "does not fit path.mtu_bytes 1500" in msg
    data["path"]["mtu_bytes"] = 9000
    assert parse_scenario(data, source="scenario.toml").sweep


def test_a_default_quic_table_leaves_the_cell_id_of_every_older_scenario_unchanged():
    # The flows' quic table came after many sweeps ran: its defaults are left out of the data a
    # cell id hashes, so committed runs still resume; a table that says something stays.
    from tcpdelay.experiments.sweep import cell_id

    base = {"name": "a", "duration_s": 5, "path": {"rtt_s": 0.05}, "flows": [{"profile": "voip"}]}
    sc = parse_scenario(base)
    assert "quic" not in sc.to_data()["flows"][0]
    assert cell_id(sc) == "7c1c74101afa"                # its id before flows had a quic table
    quic = parse_scenario({**base, "flows": [{"profile": "voip", "transport": "quic-stream", "quic": {"congestion_control": "cubic"}}]})
    assert quic.to_data()["flows"][0]["quic"]["congestion_control"] == "cubic"
    assert parse_scenario(quic.to_data()) == quic

"""The testbed's declarative spec: validation at the boundary, presets, emulator configuration."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tcpdelay.cli.testbed import build_spec_data
from tcpdelay.errors import ParameterError
from tcpdelay.testbed import (
    LINUX_DEFAULT,
    NEWRENO_2008,
    BernoulliLoss,
    DirectionSpec,
    GilbertElliottLoss,
    HostSpec,
    LinkSpec,
    TcpSettings,
    TestbedSpec,
    preset,
)
from tcpdelay.testbed.emulator import emulator_config
from tcpdelay.testbed.spec import parse_spec


def test_default_is_one_pair_without_impairments():
    spec = TestbedSpec()
    assert [h.name for h in spec.hosts] == ["left0", "right0"]
    assert spec.topology == "pair"
    assert spec.link.a_to_b.delay_s == 0 and spec.link.a_to_b.loss.model == "none"


def test_dumbbell_names_hosts_and_shares_settings():
    spec = TestbedSpec.dumbbell(3, 2, tcp=NEWRENO_2008)
    assert [h.name for h in spec.hosts] == ["left0", "left1", "left2", "right0", "right1"]
    assert spec.topology == "dumbbell"
    assert all(h.tcp == NEWRENO_2008 for h in spec.hosts)


@pytest.mark.parametrize("make, fragment", [
    (lambda: DirectionSpec(delay_s=-0.01), "delay_s"),
    (lambda: DirectionSpec(rate_bps=1e6, trace_file="x.trace"), "exclusive"),
    (lambda: DirectionSpec(queue_packets=10, queue_bytes=15000), "exclusive"),
    (lambda: BernoulliLoss(p=1.5), "p"),
    (lambda: GilbertElliottLoss(p=0.1, r=0.0), "r"),
    (lambda: HostSpec(name="Left-0", side="left"), "host name"),
    (lambda: HostSpec(name="a", side="middle"), "side"),
    (lambda: TcpSettings(congestion_control="no such"), "congestion"),
    (lambda: TcpSettings(rmem_bytes=(4096, 1024, 8192)), "rmem_bytes"),
    (lambda: TcpSettings(initcwnd_segments=0), "initcwnd_segments"),
    (lambda: TestbedSpec(hosts=(HostSpec(name="a", side="left"),)), "right side has 0 hosts"),
    (lambda: TestbedSpec(hosts=(HostSpec(name="a", side="left"), HostSpec(name="a", side="right"))), "unique"),
    (lambda: TestbedSpec.dumbbell(0, 1), "left=0"),
    (lambda: preset("vegas-1995"), "allowed: newreno-2008, linux-default"),
    (lambda: parse_spec({"link": {"a_to_b": {"delay_s": -1}}}), "TestbedSpec.link.a_to_b.delay_s: Input should be greater"),
    (lambda: parse_spec({"hosts": [{"name": "a", "side": "left", "tcp": {"sack": "maybe"}}]}), "hosts.0.tcp.sack"),
])
def test_bad_values_raise_one_line_parameter_errors(make, fragment):
    with pytest.raises(ParameterError) as err:
        make()
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_presets_differ_where_the_papers_care():
    assert preset("newreno-2008") == NEWRENO_2008 and preset("linux-default") == LINUX_DEFAULT
    assert (NEWRENO_2008.congestion_control, NEWRENO_2008.initcwnd_segments) == ("reno", 3)
    assert (NEWRENO_2008.sack, NEWRENO_2008.rack, NEWRENO_2008.tlp) == (True, False, False)
    assert (LINUX_DEFAULT.rack, LINUX_DEFAULT.tlp, LINUX_DEFAULT.initcwnd_segments) == (True, True, 10)


def test_merged_overrides_only_given_fields():
    s = NEWRENO_2008.merged(TcpSettings(initcwnd_segments=10))
    assert s.initcwnd_segments == 10 and s.congestion_control == "reno" and s.rack is False


@given(p=st.floats(0.0001, 0.5), r=st.floats(0.01, 1.0))
def test_gilbert_loss_ratio_and_burst_length(p, r):
    ge = GilbertElliottLoss(p=p, r=r)
    assert ge.loss_ratio == pytest.approx(p / (p + r))
    assert ge.mean_burst_packets == pytest.approx(1 / r)


def test_emulator_config_follows_the_contract():
    link = LinkSpec(a_to_b=DirectionSpec(delay_s=0.05, loss=BernoulliLoss(p=0.01), rate_bps=10e6, queue_packets=100),
                    b_to_a=DirectionSpec(delay_s=0.04))
    cfg = emulator_config(TestbedSpec(link=link, seed=7), ("nsA", "tunA"), ("nsB", "tunB"), "/run/tcpdelay/abc123")
    assert cfg["a"] == {"netns": "nsA", "tun": "tunA"} and cfg["b"] == {"netns": "nsB", "tun": "tunB"}
    assert cfg["seed"] == 7 and cfg["ready_file"] == "/run/tcpdelay/abc123/link.ready"
    a = cfg["a_to_b"]
    assert a["delay_s"] == 0.05 and a["loss"] == {"model": "bernoulli", "p": 0.01}
    assert a["rate_bps"] == 10e6 and a["queue_packets"] == 100 and a["queue_bytes"] is None
    assert cfg["b_to_a"]["delay_s"] == 0.04 and cfg["b_to_a"]["loss"] == {"model": "none"}
    json.dumps(cfg)  # plain JSON


def test_spec_round_trips_through_json():
    spec = TestbedSpec.dumbbell(2, 1, link=LinkSpec.symmetric(delay_s=0.02, loss=GilbertElliottLoss(p=0.01, r=0.3)),
                                tcp=LINUX_DEFAULT)
    assert parse_spec(json.loads(spec.model_dump_json())) == spec


def test_cli_flags_build_a_spec_over_a_config_file(tmp_path):
    cfg = tmp_path / "tb.toml"
    cfg.write_text('seed = 3\n[link.a_to_b]\ndelay_s = 0.03\nrate_bps = 5e6\n[tcp]\ncongestion_control = "bbr"\n')
    data = build_spec_data(str(cfg), 2, None, None, None, 0.01, None, None, None, None, None, 3, None)
    spec = parse_spec(data)
    assert spec.seed == 3 and spec.topology == "dumbbell"
    assert spec.link.a_to_b.delay_s == 0.03 and spec.link.a_to_b.rate_bps == 5e6
    assert spec.link.b_to_a.loss == BernoulliLoss(p=0.01)
    assert all(h.tcp.congestion_control == "bbr" and h.tcp.initcwnd_segments == 3 for h in spec.hosts)


def test_emulator_options_pass_through_but_cannot_override_the_testbed():
    spec = TestbedSpec(emulator_options={"spin_us": 100, "events_format": "jsonl"})
    cfg = emulator_config(spec, ("a", "ta"), ("b", "tb"), "/run/tcpdelay/abc123")
    assert cfg["spin_us"] == 100 and cfg["events_format"] == "jsonl" and cfg["a"]["tun"] == "ta"
    with pytest.raises(ParameterError, match="may not set a_to_b, seed"):
        emulator_config(TestbedSpec(emulator_options={"seed": 2, "a_to_b": {}}), ("a", "ta"), ("b", "tb"), "/x")

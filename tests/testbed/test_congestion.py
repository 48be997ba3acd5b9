"""The congestion controls by name (tcpdelay.testbed.congestion): what runs for a choice on a
kernel with and without the algorithm built in, the parameters' checks, and the scenario's and
the testbed spec's way of naming them. No root needed."""

import re
from pathlib import Path

import pytest

from tcpdelay.cli.testbed import build_spec_data
from tcpdelay.errors import ParameterError
from tcpdelay.experiments.plan import host_tcp_settings
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.testbed.congestion import NAME_MAX, PREFIX, VARIANTS, check_params, choice_key, resolve
from tcpdelay.testbed.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ["reno", "cubic", "bbr"]


def test_the_papers_variants_are_all_named():
    assert {"reno", "cubic", "bbr", "newreno", "vegas", "westwood", "westwood+", "compound", "ccp", "ccpd"} == set(VARIANTS)


def test_kernel_algorithms_run_as_themselves():
    for name in ("reno", "cubic", "bbr"):
        alg = resolve(name, available=KERNEL)
        assert (alg.kernel_name, alg.source, alg.values) == (name, "builtin", {})
    # a kernel algorithm tcpdelay does not list passes through, without parameters
    assert resolve("htcp", available=KERNEL).kernel_name == "htcp"
    with pytest.raises(ParameterError, match="takes no parameters"):
        resolve("htcp", {"beta": 1})


def test_a_variant_the_kernel_ships_runs_as_the_kernels_own_with_default_parameters():
    assert resolve("vegas", available=KERNEL).source == "bpf"
    alg = resolve("vegas", available=[*KERNEL, "vegas"])
    assert (alg.kernel_name, alg.source) == ("vegas", "builtin")
    # other parameters: the kernel's are global, so the BPF program runs even where vegas is built in
    alg = resolve("vegas", {"alpha": 1, "beta": 3}, available=[*KERNEL, "vegas"])
    assert alg.source == "bpf" and alg.values == {"alpha": 1, "beta": 3, "gamma": 1, "diff_by_rtt": 0}
    # Linux's westwood is Westwood+; the original Westwood never runs as it
    assert resolve("westwood+", available=[*KERNEL, "westwood"]).kernel_name == "westwood"
    assert resolve("westwood", available=[*KERNEL, "westwood"]).source == "bpf"


def test_instance_names_are_short_distinct_and_stable():
    names = set()
    for v in VARIANTS.values():
        if v.bpf_object is None:
            continue
        default = resolve(v.name, available=KERNEL)
        assert default.kernel_name == v.base_name
        names.add(default.kernel_name)
        for p in v.params:
            other = p.minimum if p.default != p.minimum else p.maximum
            alg = resolve(v.name, {p.name: other}, available=KERNEL)
            assert alg.kernel_name != default.kernel_name
            assert alg.kernel_name == resolve(v.name, {p.name: other}, available=KERNEL).kernel_name
            names.add(alg.kernel_name)
    for n in names:
        assert n.startswith(PREFIX) and len(n) <= NAME_MAX and re.fullmatch(r"[a-z0-9_]+", n), n


@pytest.mark.parametrize("params, message", [
    ({"delta": 1}, r"no parameter 'delta'; allowed: alpha, beta, gamma"),
    ({"alpha": -1}, r"alpha = -1 is out of range \[0, 1000\] packets"),
    ({"alpha": 1.5}, r"alpha = 1.5 must be a whole number"),
    ({"alpha": "two"}, r"alpha = 'two' is not a number"),
])
def test_bad_parameters_are_one_line(params, message):
    with pytest.raises(ParameterError, match=message):
        check_params("vegas", params)
    with pytest.raises(ParameterError, match="is not one of"):
        check_params("vegass", {})


def test_every_bpf_variant_has_its_program_and_its_parameters_are_the_programs_globals():
    for v in VARIANTS.values():
        if v.bpf_object is None:
            continue
        source = (ROOT / "bpf" / "cc" / f"{v.bpf_object}.bpf.c").read_text()
        declared = set(re.findall(r"const\s+volatile\s+\w+\s+param_(\w+)", source))
        assert declared == {p.name for p in v.params}, v.name
        assert "TDCC_NAME" in source, v.name


def test_scenario_names_a_variant_with_its_parameters():
    base = {"name": "cc", "duration_s": 2.0, "flows": [{"profile": "voip"}]}
    sc = parse_scenario({**base, "flows": [{"profile": "voip", "tcp": {
        "congestion_control": {"name": "vegas", "alpha": 1, "beta": 3}}}]})
    host = host_tcp_settings(sc.flows[0].tcp)
    assert host["congestion_control"] == "vegas" and host["congestion_params"] == {"alpha": 1, "beta": 3}
    plain = parse_scenario({**base, "flows": [{"profile": "voip", "tcp": {"congestion_control": "westwood+"}}]})
    assert host_tcp_settings(plain.flows[0].tcp) == {"congestion_control": "westwood+"}
    with pytest.raises(ParameterError, match=r"flows\[0\]\.tcp\.congestion_control.*no parameter 'delta'"):
        parse_scenario({**base, "flows": [{"profile": "voip", "tcp": {
            "congestion_control": {"name": "vegas", "delta": 1}}}]})
    with pytest.raises(ParameterError, match="takes no parameters"):
        parse_scenario({**base, "flows": [{"profile": "voip", "tcp": {
            "congestion_control": {"name": "htcp", "beta": 1}}}]})


def test_testbed_spec_and_its_flags_name_variants():
    spec = parse_spec({"hosts": [{"name": "a", "side": "left", "tcp": {"congestion_control": "westwood",
                                                                       "congestion_params": {"tau_ms": 250}}},
                                 {"name": "b", "side": "right"}], "congestion_controls": ["vegas"]})
    assert spec.hosts[0].tcp.congestion_params == {"tau_ms": 250} and spec.congestion_controls == ("vegas",)
    with pytest.raises(ParameterError, match="no parameter 'ki'"):
        parse_spec({"hosts": [{"name": "a", "side": "left", "tcp": {"congestion_control": "westwood",
                                                                    "congestion_params": {"ki": 1}}},
                              {"name": "b", "side": "right"}]})
    data = build_spec_data(None, None, None, None, None, None, None, None, None, None, "vegas", None, None,
                           cc="vegas, westwood+")
    assert data["congestion_controls"] == ["vegas", "westwood+"]
    with pytest.raises(ParameterError, match=r"^--cc: congestion control: 'bogus' is not one of"):
        build_spec_data(None, None, None, None, None, None, None, None, None, None, None, None, None, cc="bogus")


def test_choice_keys():
    assert choice_key("vegas", None) == "vegas"
    assert choice_key("vegas", {"beta": 3, "alpha": 1}) == "vegas(alpha=1,beta=3)"

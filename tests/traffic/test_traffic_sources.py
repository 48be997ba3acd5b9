"""CBR and VoIP on/off sources, the source protocol and the profile table."""

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.traffic import (
    CbrSource, Mpeg4TesSource, Packet, Source, VideoTraceSource, VoipOnOffSource,
    build_source,
)


def test_cbr_exact_schedule():
    src = CbrSource(packet_bytes=172, interval_s=0.02)
    pkts = list(src.packets(0.1, seed=7))
    # 0.1 s / 0.02 s = 5 packets at 0, 20, 40, 60, 80 ms (100 ms is not < duration)
    assert [p.at_s for p in pkts] == [0.0, 0.02, 0.04, 0.06, 0.08]
    assert all(p == Packet(p.at_s, 172, -1, "", True) for p in pkts)
    assert src.rate_bps == pytest.approx(172 * 8 / 0.02)  # 68.8 kb/s


def test_cbr_long_run_does_not_drift():
    pkts = list(CbrSource(200, 0.03).packets(60.0))
    # 60 / 0.03 = 2000 packets; the last one at 1999 * 0.03 = 59.97 s exactly (no accumulation)
    assert len(pkts) == 2000
    assert pkts[-1].at_s == 1999 * 0.03


def test_sources_satisfy_the_protocol():
    assert isinstance(CbrSource(100, 0.02), Source)
    assert isinstance(VoipOnOffSource(), Source)
    assert isinstance(Mpeg4TesSource(1e6), Source)


def test_voip_on_off_means_within_statistical_tolerance():
    src = VoipOnOffSource(packet_bytes=172, interval_s=0.02, mean_on_s=1.0, mean_off_s=1.35)
    starts, lengths = src.periods(20000.0, seed=3)
    offs = starts[1:] - starts[:-1] - lengths[:-1]
    n = len(lengths)
    # about 20000 / 2.35 = 8500 cycles; the std of an exponential mean over n samples is mean/sqrt(n)
    # (1.1 % for n = 8500); 5 % is more than 4 standard errors
    assert n > 8000
    assert lengths.mean() == pytest.approx(1.0, rel=0.05)
    assert offs.mean() == pytest.approx(1.35, rel=0.05)
    # exponential: std == mean
    assert lengths.std() == pytest.approx(1.0, rel=0.08)


def test_voip_packets_lie_inside_talk_spurts_on_the_interval_grid():
    src = VoipOnOffSource()
    starts, lengths = src.periods(300.0, seed=11)
    pkts = list(src.packets(300.0, seed=11))
    t = np.array([p.at_s for p in pkts])
    assert np.all(np.diff(t) >= 0) and t[-1] < 300.0
    spurt = np.searchsorted(starts, t, side="right") - 1
    offset = t - starts[spurt]
    # every packet is k * 20 ms after its spurt's start, before the spurt ends (or the first one)
    k = np.rint(offset / 0.02)
    assert np.allclose(offset, k * 0.02)
    assert np.all((offset < lengths[spurt]) | (k == 0))
    # activity: packets * 20 ms / 300 s is close to 1.0 / 2.35 = 0.426 (+ half a packet per spurt)
    assert len(pkts) * 0.02 / 300 == pytest.approx(1 / 2.35, abs=0.12)


def test_voip_is_deterministic_for_a_seed():
    a = list(VoipOnOffSource().packets(30.0, seed=5))
    b = list(VoipOnOffSource().packets(30.0, seed=5))
    c = list(VoipOnOffSource().packets(30.0, seed=6))
    assert a == b and a != c


def test_profiles_give_cbr_sources_without_the_framing_prefix():
    voip = build_source("voip")
    # profile size 174 B includes the 2-byte RFC 4571 prefix: the RTP packet is 172 B
    assert (voip.packet_bytes, voip.interval_s) == (172, 0.02)
    assert (build_source("video-low").packet_bytes, build_source("video-low").interval_s) == (1446, 0.03)
    talk = build_source("voip-low", on_off=True)
    assert isinstance(talk, VoipOnOffSource) and talk.interval_s == 0.03


@pytest.mark.parametrize("bad", [
    lambda: CbrSource(31, 0.02),  # below the transport's 32-byte RTP + media header
    lambda: CbrSource(100, 0.0),
    lambda: VoipOnOffSource(mean_on_s=-1),
    lambda: build_source("nope"),
    lambda: build_source("video", on_off=True),
    lambda: list(CbrSource(100, 0.02).packets(float("inf"))),
])
def test_bad_parameters_raise_parameter_error(bad):
    with pytest.raises(ParameterError):
        bad()


def test_every_profile_of_the_table_builds_its_kind(tmp_path):
    from tcpdelay.model.delay.profiles import PROFILES as MODEL_PROFILES
    from tcpdelay.profiles import DELAY_MODEL_PROFILES, KINDS, PROFILES
    from tcpdelay.traffic.sources import BUILDERS
    from tcpdelay.traffic.video_trace import write_trace

    assert set(BUILDERS) == set(KINDS) and {p.kind for p in PROFILES.values()} <= set(KINDS)
    assert tuple(MODEL_PROFILES) == DELAY_MODEL_PROFILES     # the model adds criteria, by name
    trace = tmp_path / "t.txt"
    write_trace(trace, "IPB", [3000, 1000, 500])
    extra = {"mpeg4-tes": {"rate_bps": 5e5}, "video-trace": {"trace": str(trace)}}
    for name, prof in PROFILES.items():
        src = build_source(name, **extra.get(prof.kind, {}))
        assert src.name == name
        if prof.size_bytes is not None:
            assert (src.packet_bytes, src.interval_s) == (prof.size_bytes - 2, prof.interval_s)
    assert build_source(None, size_bytes=302, interval_s=0.01) == CbrSource(300, 0.01)
    assert build_source("voip", interval_s=0.03) == CbrSource(172, 0.03, name="voip")


@pytest.mark.parametrize("call, message", [
    (lambda: build_source("voip", rate_bps=1e5), "profile 'voip' (cbr) takes no rate_bps"),
    (lambda: build_source("mpeg4-tes", rate_bps=1e5, on_off=True), "(mpeg4-tes) takes no on_off"),
    (lambda: build_source("mpeg4-tes"), "profile 'mpeg4-tes' needs rate_bps"),
    (lambda: build_source("video-trace"), "profile 'video-trace' needs trace"),
    (lambda: build_source(None, size_bytes=174), "give a profile, or size_bytes and interval_s"),
    (lambda: build_source("voip2"), "profile: 'voip2' is not one of voip, voip-low, "),
])
def test_the_builder_refuses_what_a_profile_does_not_take(call, message):
    with pytest.raises(ParameterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_a_prepared_source_sends_the_same_packets_and_keeps_the_sources_attributes():
    from tcpdelay.traffic.mpeg4_tes import Mpeg4TesSource
    from tcpdelay.traffic.source import PreparedSource

    src = Mpeg4TesSource(0.9e6)
    ready = PreparedSource(src, 10.0, 7)
    assert list(ready.packets(10.0, 7)) == list(src.packets(10.0, 7))
    assert list(ready.packets(10.0, 7)) == list(src.packets(10.0, 7))    # every call, from the start
    assert (ready.name, ready.nominal_interval_s, ready.fps) == (src.name, src.nominal_interval_s, src.fps)
    with pytest.raises(ParameterError, match="prepared for duration_s=10.0, seed=7"):
        ready.packets(10.0, 8)

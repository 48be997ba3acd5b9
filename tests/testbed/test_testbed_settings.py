"""Per-host TCP settings applied in real namespaces and read back from the kernel."""

import pytest

from tcpdelay.testbed import LINUX_DEFAULT, NEWRENO_2008, HostSpec, TcpSettings, Testbed, TestbedSpec
from tcpdelay.testbed.congestion import PREFIX
from tcpdelay.testbed.netns import list_netns, unavailable_reason
from tcpdelay.testbed.tcp_settings import available_congestion_controls, rack_always_on

pytestmark = [pytest.mark.testbed, pytest.mark.skipif(unavailable_reason() is not None,
                                                      reason=str(unavailable_reason()))]


def _spec(**hosts):
    return TestbedSpec(hosts=tuple(HostSpec(name=n, side=side, tcp=tcp) for n, (side, tcp) in hosts.items()))


def test_every_setting_reads_back_as_set_per_host():
    custom = TcpSettings(congestion_control="reno", initcwnd_segments=4, initrwnd_segments=20, sack=False,
                         rack=False, tlp=False, slow_start_after_idle=False, no_metrics_save=True, ecn=1,
                         rmem_bytes=(4096, 87380, 8_000_000), wmem_bytes=(4096, 65536, 9_000_000))
    spec = _spec(old=("left", NEWRENO_2008), new=("left", LINUX_DEFAULT), custom=("right", custom),
                 plain=("right", TcpSettings()))
    with Testbed(spec, start_link=False) as tb:
        old, new, cust, plain = (tb.hosts[n] for n in ("old", "new", "custom", "plain"))
        assert old.tcp_applied["congestion_control"] == "reno"
        assert old.tcp_applied["initcwnd_segments"] == 3
        assert (old.sysctl("net.ipv4.tcp_sack"), old.sysctl("net.ipv4.tcp_early_retrans")) == ("1", "0")
        assert int(old.sysctl("net.ipv4.tcp_recovery")) & 1 == 0
        # rack = false is written, but from Linux 6.17 SACK connections use RACK regardless
        assert old.tcp_applied["rack"] is False and old.tcp_applied["rack_in_effect"] is rack_always_on()
        assert new.tcp_applied["rack_in_effect"] is True
        assert cust.tcp_applied["rack_in_effect"] is False   # no SACK: NewReno's duplicate-ACK counting
        assert new.tcp_applied["congestion_control"] == "cubic"
        assert new.tcp_applied["initcwnd_segments"] == 10
        assert int(new.sysctl("net.ipv4.tcp_recovery")) & 1 == 1 and new.sysctl("net.ipv4.tcp_early_retrans") == "3"
        # The custom host, straight from the kernel rather than from tcp_applied.
        assert cust.sysctl("net.ipv4.tcp_sack") == "0"
        assert cust.sysctl("net.ipv4.tcp_slow_start_after_idle") == "0"
        assert cust.sysctl("net.ipv4.tcp_no_metrics_save") == "1"
        assert cust.sysctl("net.ipv4.tcp_ecn") == "1"
        assert cust.sysctl("net.ipv4.tcp_rmem") == "4096 87380 8000000"
        assert cust.sysctl("net.ipv4.tcp_wmem") == "4096 65536 9000000"
        route = cust.run(["ip", "route", "show", tb.right[0].routes[0]]).stdout
        assert "initcwnd 4" in route and "initrwnd 20" in route
        # A host without settings keeps the kernel's defaults, not another host's.
        assert plain.sysctl("net.ipv4.tcp_sack") == "1"
        assert plain.tcp_applied["initcwnd_segments"] is None


def test_congestion_control_goes_through_the_route_when_the_namespace_may_not_choose_it():
    allowed = open("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read().split()
    # the kernel's own controls: a BPF instance (``td…``) is offered only while another test's
    # testbed holds it, and may be gone by the time this one's is built (the race of a CI run)
    own = [cc for cc in available_congestion_controls() if not cc.startswith(PREFIX)]
    for cc in own:
        spec = _spec(a=("left", TcpSettings(congestion_control=cc)), b=("right", TcpSettings()))
        with Testbed(spec, start_link=False) as tb:
            got = tb.hosts["a"].tcp_applied
            assert got["congestion_control"] == cc
            if cc in allowed:
                assert got["congestion_control_via"] == "sysctl"
                assert tb.hosts["a"].sysctl("net.ipv4.tcp_congestion_control") == cc
            else:
                assert got["congestion_control_via"] == "route"
                assert f"congctl {cc}" in tb.hosts["a"].run(["ip", "route"]).stdout


def test_hosts_are_isolated_namespaces_with_their_own_sysctls():
    spec = _spec(x=("left", TcpSettings(sack=False)), y=("right", TcpSettings(sack=True)))
    machine_sack = open("/proc/sys/net/ipv4/tcp_sack").read()
    with Testbed(spec, start_link=False) as tb:
        assert tb.hosts["x"].sysctl("net.ipv4.tcp_sack") == "0"
        assert tb.hosts["y"].sysctl("net.ipv4.tcp_sack") == "1"
        assert open("/proc/sys/net/ipv4/tcp_sack").read() == machine_sack  # the machine is untouched
        names = {h.netns for h in tb.hosts.values()}
        assert names <= set(list_netns())
    assert not names & set(list_netns())

"""The programs under measurement run real time just below the emulator (become_realtime) and
cross traffic runs niced (Host.spawn's ``niceness``), read back from the kernel in the child."""

import os

import pytest

from tcpdelay.experiments.backends import testbed as tb_backend
from tcpdelay.testbed import HostSpec, Testbed, TestbedSpec
from tcpdelay.testbed.netns import unavailable_reason
from tcpdelay.testbed.testbed import REALTIME_PRIORITY, become_realtime

pytestmark = [pytest.mark.testbed, pytest.mark.skipif(unavailable_reason() is not None,
                                                      reason=str(unavailable_reason()))]


def _scheduling() -> tuple[int, int, int]:
    """(policy, real-time priority, niceness) of the calling process."""
    return os.sched_getscheduler(0), os.sched_getparam(0).sched_priority, os.nice(0)


def _realtime_then_scheduling() -> tuple[bool, tuple[int, int, int]]:
    return become_realtime(), _scheduling()


def test_spawn_nices_the_child_and_the_child_can_become_realtime():
    before = _scheduling()
    spec = TestbedSpec(hosts=(HostSpec(name="a", side="left"), HostSpec(name="b", side="right")))
    with Testbed(spec, start_link=False) as tb:
        a = tb.hosts["a"]
        assert a.call(_scheduling, niceness=10, timeout_s=30) == (os.SCHED_OTHER, 0, 10)
        assert a.call(_scheduling, timeout_s=30) == (os.SCHED_OTHER, 0, 0)
        assert a.call(_realtime_then_scheduling, timeout_s=30) == (True, (os.SCHED_RR, REALTIME_PRIORITY, 0))
        with pytest.raises(ValueError, match="niceness"):
            a.spawn(_scheduling, niceness=20)
    assert _scheduling() == before


class _Host:
    """Stands in for a testbed host to record how the backend starts its programs (the real
    Host.spawn is tested above)."""

    address = "10.0.0.1"

    def __init__(self, log: list):
        self.log = log

    def spawn(self, fn, *args, **kwargs):
        self.log.append((getattr(fn, "__name__", str(fn)), kwargs.get("niceness", 0), kwargs.get("realtime", False)))


def test_every_cross_traffic_starter_nices_its_program():
    from types import SimpleNamespace

    from tcpdelay.experiments.scenario import Tcp

    log: list = []
    hosts = {"c": _Host(log), "s": _Host(log)}
    fake_tb = SimpleNamespace(hosts=hosts, kernel_name=lambda name, params: name)
    cross = SimpleNamespace(size_bytes=None, on_mean_s=1.0, off_mean_s=1.0, packet_size_bytes=1000, mode="onoff",
                            gap_mean_s=None, connections=1, total_bytes=1, transfers=1, gap_s=0.1, timeout_s=1.0,
                            rate_bps=1e6, tcp=Tcp())
    plan = SimpleNamespace(client="c", server="s", port=1, seed=1, cross=cross)
    for kind, start in tb_backend.CROSS_STARTERS.items():
        start(fake_tb, plan, 0.0, 1.0)
    assert len(log) == len(tb_backend.CROSS_STARTERS)
    assert all(nice == tb_backend.CROSS_NICENESS and not rt for _, nice, rt in log), log

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


def _stopped_inside_a_callback(flag: str) -> str:
    """A program whose stop (SIGINT) arrives while a weakref's callback runs, where Python cannot
    raise it (importlib's module locks have such callbacks)."""
    import time
    import weakref

    class Thing:
        pass

    def callback(_ref):
        open(flag, "w").close()
        time.sleep(5)           # the SIGINT lands here

    thing = Thing()
    ref = weakref.ref(thing, callback)  # noqa: F841 - the callback runs when thing goes
    del thing
    time.sleep(10)              # a program that missed its stop goes on
    return "went on"


def test_a_stop_that_lands_in_a_callback_still_stops_the_program_and_prints_nothing(tmp_path, capfd):
    import signal
    import time

    from tcpdelay.testbed.testbed import RemoteError

    spec = TestbedSpec(hosts=(HostSpec(name="a", side="left"), HostSpec(name="b", side="right")))
    flag = tmp_path / "in-callback"
    with Testbed(spec, start_link=False) as tb:
        handle = tb.hosts["a"].spawn(_stopped_inside_a_callback, str(flag))
        deadline = time.monotonic() + 30
        while not flag.exists():
            assert time.monotonic() < deadline, "the callback never ran"
            time.sleep(0.01)
        os.kill(handle.pid, signal.SIGINT)
        with pytest.raises(RemoteError, match="KeyboardInterrupt"):
            handle.result(timeout_s=8)
    assert "Exception ignored" not in capfd.readouterr().err

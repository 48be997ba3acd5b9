"""A run's start instant fixed once its programs are ready (tcpdelay.start_gate), with forked
processes as the testbed forks them: the run waits for every program that waits on the gate and
for nothing else, each program gets t0 plus its own offset, a program that ends before it is
ready stops the wait, and a server's end follows the instant once it is fixed."""

from __future__ import annotations

import os
import pickle
import threading
import time

import pytest

from tcpdelay.start_gate import (UNFIXED_GRACE_S, Deadline, StartGate, instant_if_fixed,
                                 process_ended, start_instant)


def _fork(fn) -> tuple[int, int]:
    """``fn()`` in a forked child; (pid, the read end its pickled result comes back on)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.write(w, pickle.dumps(fn()))
        finally:
            os._exit(0)
    os.close(w)
    return pid, r


def _result(pid: int, r: int):
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return pickle.loads(data)


def test_the_run_waits_for_every_program_then_each_gets_t0_plus_its_offset():
    gate = StartGate()
    delays_s = [0.0, 0.3, 0.6]
    instants = [gate.at(offset_s) for offset_s in (0.0, 0.5, 2.0)]
    server = gate.later(1.0)
    assert gate.expected == 3

    def program(i):
        def run():
            time.sleep(delays_s[i])           # a slow start: the run must wait for it
            got = start_instant(instants[i])
            return got, time.monotonic()
        return run

    kids = [_fork(program(i)) for i in range(3)]
    t_start = time.monotonic()
    assert gate.wait_ready(30.0)
    waited = time.monotonic() - t_start
    assert waited >= 0.55                     # the slowest program took 0.6 s to be ready
    assert instant_if_fixed(server) is None and gate.t0 is None
    t0 = time.monotonic() + 0.2
    gate.open(t0)
    results = [_result(*k) for k in kids]
    for (got, woke), offset_s in zip(results, (0.0, 0.5, 2.0)):
        assert got == t0 + offset_s
        assert woke >= t0 - 0.2               # none went on before the gate opened
    assert gate.t0 == t0 and instant_if_fixed(server) == t0 + 1.0
    # the instant a program resolves is that program's: resolving again does not report again
    assert start_instant(instants[0]) == t0


def test_instants_for_programs_that_are_not_waited_for_do_not_hold_the_run():
    gate = StartGate()
    server = gate.later(0.0)
    assert gate.expected == 0 and gate.wait_ready(0.1)
    assert instant_if_fixed(server) is None


def test_a_program_that_ends_before_it_is_ready_stops_the_wait():
    gate = StartGate()
    gate.at(0.0)
    pid, r = _fork(lambda: "crashed at its start")
    t = time.monotonic()
    assert not gate.wait_ready(30.0, gone=lambda: process_ended(pid))
    assert time.monotonic() - t < 25.0        # well before the timeout: it noticed the end
    assert _result(pid, r) == "crashed at its start"
    assert gate.ready == 0 and gate.expected == 1


def test_a_program_not_ready_in_time_is_a_timeout():
    gate = StartGate()
    gate.at(0.0)
    assert not gate.wait_ready(0.2)


def test_a_stop_before_the_gate_opens_ends_the_wait_with_no_instant():
    gate = StartGate()
    at = gate.at(0.0)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    assert start_instant(at, stop) is None
    assert gate.wait_ready(1.0)               # it did report ready


def test_plain_instants_pass_through():
    assert start_instant(12.5) == 12.5 and instant_if_fixed(12.5) == 12.5
    before = time.monotonic()
    assert before <= start_instant(None) <= time.monotonic()


def test_a_deadline_follows_the_start_once_it_is_fixed():
    gate = StartGate()
    at = gate.later(0.5)
    made = time.monotonic()
    end = Deadline(at, 2.0)
    # not fixed: the duration and a grace from when it was made, so a server keeps serving
    assert made + 2.0 + UNFIXED_GRACE_S <= end.value() <= time.monotonic() + 2.0 + UNFIXED_GRACE_S
    gate.open(1000.0)
    assert end.value() == 1000.0 + 0.5 + 2.0
    assert Deadline(7.0, 3.0).value() == 10.0
    assert time.monotonic() + 3.0 - 0.5 <= Deadline(None, 3.0).value() <= time.monotonic() + 3.0


def test_a_server_forked_before_the_gate_opens_ends_with_the_run():
    """A server made before t0 is known (as the testbed starts its servers first) serves until
    t0 + its duration, read once the gate opens."""
    gate = StartGate()
    at = gate.later(0.0)

    def server():
        end = Deadline(at, 0.3)
        while time.monotonic() < end.value():
            time.sleep(0.01)
        return time.monotonic()

    pid, r = _fork(server)
    time.sleep(0.2)
    t0 = time.monotonic() + 0.1
    gate.open(t0)
    ended = _result(pid, r)
    assert t0 + 0.3 <= ended < t0 + UNFIXED_GRACE_S


@pytest.mark.parametrize("offset_s", [0.0, 1.5])
def test_repr_names_the_offset(offset_s):
    assert f"{offset_s:g} s" in repr(StartGate().at(offset_s))

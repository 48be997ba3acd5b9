"""CPU per test: a pytest plugin that prints, for each test, the CPU seconds (user + system) it
cost — pytest's own process, its children that ended (getrusage RUSAGE_CHILDREN), and every
process still running below it (/proc/<pid>/stat utime + stime, and cutime + cstime: its own
children that ended) — and the test's wall time, setup and teardown included.

    PYTHONPATH=benchmarks .venv/bin/python -m pytest -p pytest_cpu_per_test -p no:cacheprovider \\
        tests/sim/test_ns3_backend.py

``CPU_PER_TEST_OUT=FILE`` also appends one line per test there (self, descendants, total, wall,
node id). A session-scoped fixture (the shared ns-3 worker, a Ray cluster) counts in the first
test that uses it. Not counted: a process that leaves the tree before it ends (the children of a
killed process, re-parented to init) — a Ray worker killed on purpose shows as negative CPU.
Run one file at a time, on a machine as quiet as can be: CPU seconds vary less with the load than
wall time does, but they do vary (two busy cores share caches).
"""

from __future__ import annotations

import os
import resource
import time

import pytest

_TICKS_S = os.sysconf("SC_CLK_TCK")
_per_test: dict[str, tuple[float, float, float]] = {}


def _descendants_cpu_s() -> float:
    """CPU seconds of the processes now running below this one, with their ended children."""
    children: dict[int, list[int]] = {}
    cpu_s: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()   # after the command, which may hold spaces
        ppid = int(fields[1])
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
        children.setdefault(ppid, []).append(int(entry))
        cpu_s[int(entry)] = (utime + stime + cutime + cstime) / _TICKS_S
    total, stack = 0.0, list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        total += cpu_s.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total


def _cpu_s() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, ended.ru_utime + ended.ru_stime + _descendants_cpu_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, t0 = _cpu_s(), time.monotonic()
    yield
    after = _cpu_s()
    _per_test[item.nodeid] = (after[0] - before[0], after[1] - before[1], time.monotonic() - t0)


def _line(nodeid: str, v: tuple[float, float, float]) -> str:
    return f"{v[0]:8.1f} {v[1]:8.1f} {v[0] + v[1]:8.1f} {v[2]:8.1f}  {nodeid}"


def pytest_sessionfinish(session):
    out = os.environ.get("CPU_PER_TEST_OUT")
    if out and _per_test:
        with open(out, "a") as f:
            f.writelines(_line(k, v) + "\n" for k, v in _per_test.items())


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("CPU per test, s (pytest itself, its descendants, total, wall with setup):")
    for k, v in sorted(_per_test.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:40]:
        terminalreporter.write_line(_line(k, v))

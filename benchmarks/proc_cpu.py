"""Reading CPU time from /proc, shared by the testbed benchmarks (`testbed_access_links.py`,
`endpoint_cpu.py`; a sibling module, imported with the benchmarks directory on ``sys.path``).

- :func:`stat_fields` parses one ``/proc/PID[/task/TID]/stat`` (the fields after the command
  name, so ``fields[11]`` is utime, ``fields[12]`` stime, ``fields[38]`` the scheduling policy);
- :func:`descendants` lists every process below a root pid (the run's own: a testbed run forks
  its endpoints and the emulator from the process that runs it) with its command name, its CPU
  and its network namespace;
- :class:`CpuByRole` samples them in a thread and keeps, per process, its CPU over time, adding
  to the processes that were reaped since the last look what they used after it (from
  ``getrusage(RUSAGE_CHILDREN)``: the run's process reaps them, so that sum is exact), so a
  process's last records and summary, written after the last look, are counted too.

CPU from /proc/PID/stat is in clock ticks (10 ms): a process's CPU between two instants is
known to about a tick, exact at its end (the rusage of the reaped).
"""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

HZ = os.sysconf("SC_CLK_TCK")


def stat_fields(path: str) -> list[str] | None:
    """The fields of a /proc stat file after ``(comm)``; None when it is gone."""
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def netns_inode(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def netns_names() -> dict[int, str]:
    """Named network namespaces (``ip netns``: /run/netns) by inode."""
    out = {}
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return out
    for name in names:
        try:
            out[os.stat(f"/run/netns/{name}").st_ino] = name
        except OSError:
            pass
    return out


def interface_packets(pid: int | str) -> int | None:
    """Packets received plus sent on every interface but lo of the network namespace ``pid``
    (or ``"PID/task/TID"``) runs in (/proc/PID/net/dev)."""
    try:
        with open(f"/proc/{pid}/net/dev") as f:
            lines = f.read().splitlines()[2:]
    except OSError:
        return None
    total = 0
    for line in lines:
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            continue
        v = rest.split()
        total += int(v[1]) + int(v[9])
    return total


@dataclass
class Proc:
    pid: int
    comm: str
    cpu_s: float         # utime + stime + cutime + cstime (its own reaped children too)
    ppid: int
    threads: int = 1


def descendants(root: int) -> dict[int, Proc]:
    """Every live process below ``root`` (not ``root`` itself), by pid."""
    procs: dict[int, Proc] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        f = stat_fields(f"/proc/{name}/stat")
        if f is None:
            continue
        procs[int(name)] = Proc(int(name), "", sum(int(x) for x in f[11:15]) / HZ, int(f[1]), int(f[17]))
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out[pid] = procs[pid]
        todo += children.get(pid, [])
    return out


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@dataclass
class Series:
    """One process: its role, and its CPU at each look (``t``, ``cpu``), plus what it used after
    its last look (``tail_s``, from the reaped children's rusage)."""
    role: str
    comm: str
    t: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    tail_s: float = 0.0
    gone: bool = False

    def at(self, when: float) -> float:
        """CPU used up to ``when`` (linear between looks; 0 before the first, everything after
        the last once it is gone)."""
        if not self.t or when <= self.t[0]:
            return 0.0 if not self.t or when < self.t[0] else self.cpu[0]
        if when >= self.t[-1]:
            return self.cpu[-1] + (self.tail_s if self.gone else 0.0)
        i = next(k for k in range(1, len(self.t)) if self.t[k] >= when)
        t0, t1, c0, c1 = self.t[i - 1], self.t[i], self.cpu[i - 1], self.cpu[i]
        return c0 + (c1 - c0) * (when - t0) / (t1 - t0)

    @property
    def total_s(self) -> float:
        return (self.cpu[-1] if self.cpu else 0.0) + self.tail_s


class CpuByRole(threading.Thread):
    """Looks at every process below this one every ``every_s`` and files it under
    ``classify(proc, netns_name)`` (a role name, e.g. ``"tx"``, ``"rx"``, ``"emulator"``,
    ``"other"``), decided when it is first seen."""

    def __init__(self, classify: Callable[[Proc, str | None], str], every_s: float = 0.2,
                 count_packets: tuple[str, ...] = ()):
        super().__init__(daemon=True)
        self.classify, self.every_s, self.count_packets = classify, every_s, count_packets
        self.packets_t: list[float] = []
        self.packets: list[int] = []
        self._ns_packets: dict[int, int] = {}
        self._seen_ns_now: set[int] = set()
        self.series: dict[int, Series] = {}
        self.unseen_s: dict[str, float] = {}     # reaped with nothing of ours gone: helpers
        self.stop_event = threading.Event()
        self.own_cpu_s = 0.0                     # this sampler's own thread CPU
        self._ns: dict[int, str] = {}
        self._children = _children_cpu_s()
        self._balance = 0.0
        self._pending: list[Series] = []

    def _netns_name(self, ino: int | None) -> str | None:
        if ino is not None and ino not in self._ns:
            self._ns = netns_names()
        return self._ns.get(ino) if ino is not None else None

    def _role(self, p: Proc) -> str:
        """The role of the namespaces ``p``'s threads run in: a process whose threads serve
        hosts of both sides (one program for every flow end) is ``"ends"``."""
        p.comm = comm(p.pid)
        own = self.classify(p, self._netns_name(netns_inode(p.pid)))
        if own == "emulator":
            return own
        try:
            tids = os.listdir(f"/proc/{p.pid}/task")
        except OSError:
            return own
        roles = {self.classify(p, self._netns_name(netns_inode(f"{p.pid}/task/{tid}"))) for tid in tids} - {"other"}
        if len(roles) > 1:
            return "ends"
        return roles.pop() if roles else own

    def look(self) -> None:
        # The reaped children's CPU first, then the walk: a process reaped in between is gone
        # from the walk before its CPU is in the sum, so the balance waits for the next look.
        children = _children_cpu_s()
        t_before = time.monotonic()
        live = descendants(os.getpid())
        now_t = (t_before + time.monotonic()) / 2      # (a walk on a busy machine takes a while)
        self._balance += children - self._children
        self._children = children
        for pid, p in live.items():
            s = self.series.get(pid)
            if s is None or s.gone:          # (a reused pid is a new process)
                role = self._role(p)
                s = self.series[pid] = Series(role, p.comm)
            elif s.role == "other" or (p.threads > 1 and s.role in ("tx", "rx")):
                # a fork seen before it entered its namespace; a process whose threads go on
                # entering hosts' namespaces (one serving both sides becomes "ends" for good)
                role = self._role(p)
                if s.role == "other" or role == "ends":
                    s.role = role
                elif role not in ("other", s.role):
                    s.role = "ends"
            s.t.append(now_t)
            s.cpu.append(p.cpu_s)
        if self.count_packets:
            self._count_packets(now_t, [pid for pid, s in self.series.items()
                                        if pid in live and s.role in self.count_packets])
        for pid, s in self.series.items():
            if not s.gone and pid not in live:
                s.gone = True
                self._balance -= s.cpu[-1]
                self._pending.append(s)
        if self._balance < 0:
            return                           # some of the gone are not in the sum yet
        mine = [s for s in self._pending if s.role != "other"]
        if mine:                             # what they used after their last look, shared evenly
            for s in mine:
                s.tail_s += self._balance / len(mine)
        else:                                # reaped unseen (short helpers: ip, sysctl)
            self.unseen_s["other"] = self.unseen_s.get("other", 0.0) + self._balance
        self._balance, self._pending = 0.0, []

    def _count_packets(self, now_t: float, pids: list[int]) -> None:
        for pid in pids:
            try:
                tasks = os.listdir(f"/proc/{pid}/task")   # (a grouped process's threads: a namespace each)
            except OSError:
                continue
            for tid in tasks:
                ino = netns_inode(f"{pid}/task/{tid}")
                if ino is None or ino in self._seen_ns_now:
                    continue
                self._seen_ns_now.add(ino)
                n = interface_packets(f"{pid}/task/{tid}")
                if n is not None:
                    self._ns_packets[ino] = n
        self._seen_ns_now = set()
        self.packets_t.append(now_t)
        self.packets.append(sum(self._ns_packets.values()))

    def packets_between(self, start: float, end: float) -> float:
        """Packets the counted processes' hosts sent and received (every interface but lo, each
        host's last count kept once it is gone) between ``start`` and ``end``, interpolated."""
        def at(when: float) -> float:
            t, c = self.packets_t, self.packets
            if not t or when <= t[0]:
                return float(c[0]) if t else 0.0
            if when >= t[-1]:
                return float(c[-1])
            i = next(k for k in range(1, len(t)) if t[k] >= when)
            return c[i - 1] + (c[i] - c[i - 1]) * (when - t[i - 1]) / (t[i] - t[i - 1])
        return at(end) - at(start)

    def run(self) -> None:
        t = time.thread_time()
        while not self.stop_event.wait(self.every_s):
            self.look()
        self.look()
        self.own_cpu_s = time.thread_time() - t

    def __enter__(self) -> "CpuByRole":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.join()

    def cpu_s(self, role: str, start: float | None = None, end: float | None = None) -> float:
        """The CPU the processes of ``role`` used between ``start`` and ``end`` (monotonic; None:
        from their start, to their end)."""
        return sum((s.at(end) if end is not None else s.total_s) - (s.at(start) if start is not None else 0.0)
                   for s in self.series.values() if s.role == role)

    def processes(self, role: str) -> int:
        return sum(1 for s in self.series.values() if s.role == role)

    def busiest_s(self, role: str, start: float, end: float, window_s: float = 1.0) -> float:
        """The most CPU ``role`` used in any ``window_s`` between ``start`` and ``end`` (cores)."""
        best, t = 0.0, start
        while t + window_s <= end + 1e-9:
            best = max(best, self.cpu_s(role, t, t + window_s) / window_s)
            t += window_s / 2
        return best

"""What the machine did to a run's programs while it ran: CPU pressure and CPU throttling,
read from the kernel at the run's start and at its end (:func:`sample`, :func:`between`).

* **CPU pressure** (PSI, ``/proc/pressure/cpu``, Linux 4.20+): the ``total`` stall time of its
  ``some`` line (µs during which at least one runnable task waited for a CPU) and of its
  ``full`` line (all non-idle tasks waited), taken over the run's span and given as a fraction
  of it — not the ``avg10`` of the moment, which forgets a stall ten seconds later.
* **Throttling.** What the kernel exposes about a task kept off the CPU by a budget:
  ``/proc/sys/kernel/sched_rt_runtime_us`` and ``sched_rt_period_us`` (real-time tasks together
  may use at most that share of each CPU; ``-1``: no limit), the run's cgroup ``cpu.stat``
  (``nr_throttled`` and ``throttled_usec`` of cgroup v2, ``throttled_time`` ns of v1: CFS
  bandwidth throttling of the cgroup the run's processes are in), and the scheduler's debug
  file where it is readable (``/sys/kernel/debug/sched/debug``, ``/proc/sched_debug`` before
  5.13: ``rt_throttled`` per CPU at the two instants). None of them counts real-time throttling
  events on a kernel without debugfs, so the measure that sees it whatever its cause is the
  emulator's own: the time its threads were runnable but waited on a run queue
  (``/proc/<pid>/task/*/schedstat``, second field), over the span.

Every reading is optional: a file the kernel does not have is a None, never an error.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

CPU_PRESSURE_FILE = "/proc/pressure/cpu"
RT_RUNTIME_FILE = "/proc/sys/kernel/sched_rt_runtime_us"
RT_PERIOD_FILE = "/proc/sys/kernel/sched_rt_period_us"
SCHED_DEBUG_FILES = ("/sys/kernel/debug/sched/debug", "/proc/sched_debug")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def cpu_pressure_totals_us() -> tuple[int, int] | None:
    """PSI's ``some`` and ``full`` total stall times (µs since boot); None without PSI."""
    text = _read(CPU_PRESSURE_FILE)
    if text is None:
        return None
    got = {}
    for line in text.splitlines():
        kind, *fields = line.split()
        for f in fields:
            if f.startswith("total="):
                got[kind] = int(f[6:])
    if "some" not in got:
        return None
    return got["some"], got.get("full", 0)


def cgroup_cpu_stat() -> tuple[str, dict] | None:
    """This process's cgroup's ``cpu.stat`` throttling counters as ``(file, {"nr_throttled",
    "throttled_us"})``: cgroup v2's (``throttled_usec``), else v1's cpu controller's
    (``throttled_time``, ns); None when neither has them."""
    text = _read("/proc/self/cgroup") or ""
    v2 = v1 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
        elif "cpu" in parts[1].split(","):
            v1 = (parts[1], parts[2])
    candidates = []
    if v2 is not None:
        candidates += [os.path.join(root, v2.lstrip("/"), "cpu.stat")
                       for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")]
    if v1 is not None:
        candidates.append(os.path.join("/sys/fs/cgroup", v1[0], v1[1].lstrip("/"), "cpu.stat"))
    for path in candidates:
        stat = _read(path)
        if stat is None:
            continue
        kv = dict(line.split(None, 1) for line in stat.splitlines() if " " in line)
        if "nr_throttled" not in kv:
            continue
        if "throttled_usec" in kv:
            us = int(kv["throttled_usec"])
        elif "throttled_time" in kv:
            us = int(kv["throttled_time"]) // 1000
        else:
            us = None
        return path, {"nr_throttled": int(kv["nr_throttled"]), "throttled_us": us}
    return None


def rt_throttled_cpus() -> int | None:
    """How many CPUs' real-time run queues the scheduler's debug file shows throttled now;
    None when no debug file is readable (debugfs not mounted)."""
    for path in SCHED_DEBUG_FILES:
        text = _read(path)
        if text is None:
            continue
        return sum(1 for line in text.splitlines()
                   if line.strip().startswith(".rt_throttled") and line.split(":")[-1].strip() not in ("0", ""))
    return None


def task_wait_ns(pid: int) -> int | None:
    """Nanoseconds the threads of ``pid`` have spent runnable on a run queue, not running
    (``schedstat``'s second field, summed over its threads); None when it is gone."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total, seen = 0, False
    for tid in tids:
        text = _read(f"/proc/{pid}/task/{tid}/schedstat")
        if text is None:
            continue
        fields = text.split()
        if len(fields) >= 2:
            total += int(fields[1])
            seen = True
    return total if seen else None


def _int_file(path: str) -> int | None:
    text = _read(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class LoadSample:
    """One reading of every counter (:func:`sample`)."""

    t_s: float
    pressure_us: tuple[int, int] | None
    cgroup: tuple[str, dict] | None
    rt_throttled_cpus: int | None
    wait_ns: dict = field(default_factory=dict)
    """pid -> :func:`task_wait_ns`, for the pids given to :func:`sample`."""


def sample(pids: dict[str, int | None] | None = None) -> LoadSample:
    """Every counter now; ``pids`` (name -> pid) are the processes whose run-queue wait is
    followed (e.g. ``{"emulator": pid}``)."""
    return LoadSample(time.monotonic(), cpu_pressure_totals_us(), cgroup_cpu_stat(), rt_throttled_cpus(),
                      {name: (task_wait_ns(pid) if pid else None) for name, pid in (pids or {}).items()})


def between(a: LoadSample, b: LoadSample) -> dict:
    """What the machine did between samples ``a`` and ``b``: ``span_s``; ``cpu_pressure``
    (``some_stall_us``, ``full_stall_us`` and each as a fraction of the span; None without PSI);
    ``throttling`` (the real-time budget, the cgroup's ``nr_throttled``/``throttled_us`` over the
    span and its file, the CPUs the debug file showed real-time-throttled at either instant, and
    per followed process its ``runqueue_wait_us`` and its fraction of the span)."""
    span_s = max(b.t_s - a.t_s, 1e-9)
    pressure = None
    if a.pressure_us is not None and b.pressure_us is not None:
        some, full = (b.pressure_us[0] - a.pressure_us[0], b.pressure_us[1] - a.pressure_us[1])
        pressure = {"some_stall_us": some, "full_stall_us": full,
                    "some_fraction": round(some / (span_s * 1e6), 4), "full_fraction": round(full / (span_s * 1e6), 4)}
    cgroup = None
    if a.cgroup is not None and b.cgroup is not None and a.cgroup[0] == b.cgroup[0]:
        x, y = a.cgroup[1], b.cgroup[1]
        cgroup = {"file": a.cgroup[0], "nr_throttled": y["nr_throttled"] - x["nr_throttled"],
                  "throttled_us": None if x["throttled_us"] is None or y["throttled_us"] is None
                  else y["throttled_us"] - x["throttled_us"]}
    seen = [n for n in (a.rt_throttled_cpus, b.rt_throttled_cpus) if n is not None]
    waits = {}
    for name in a.wait_ns:
        w0, w1 = a.wait_ns.get(name), b.wait_ns.get(name)
        if w0 is not None and w1 is not None:
            waits[name] = {"runqueue_wait_us": round((w1 - w0) / 1e3, 1),
                           "runqueue_wait_fraction": round((w1 - w0) / (span_s * 1e9), 4)}
    return {"span_s": round(span_s, 3), "cpu_pressure": pressure,
            "throttling": {"sched_rt_runtime_us": _int_file(RT_RUNTIME_FILE),
                           "sched_rt_period_us": _int_file(RT_PERIOD_FILE),
                           "cgroup": cgroup,
                           "rt_throttled_cpus_seen": max(seen) if seen else None,
                           "processes": waits}}

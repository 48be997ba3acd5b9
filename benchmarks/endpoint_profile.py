"""Where an endpoint's CPU goes: summarizes the profiles `endpoint_cpu.py --profile DIR` took
(docs/testbed.md, "What the testbed costs").

    .venv/bin/python benchmarks/endpoint_profile.py DIR [--top 12]

For every side of every run (``<kind>-<flows>-<side>-<pid>.pyspy.txt``, one per process: py-spy
``--native --idle --threads``, raw folded stacks, every thread's stack at 250 Hz whether it runs
or waits; a side's processes summed) it prints the share of
samples waiting (the innermost frame a blocking call: epoll/select/poll, a sleep, a blocking
receive), waiting for the GIL (``take_gil``), and of the rest — on a CPU — the share by what the
innermost frames are (:data:`CATEGORIES`, first match wins) and by the innermost tcpdelay
function. For every ``.perf.data`` (``perf record -g``) it prints the kernel's share of the
samples and the kernel functions and shared objects that took the most (``perf report``).
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

#: Innermost frames of a thread that is not on a CPU.
IDLE = re.compile(r"^(epoll_wait|epoll_pwait|__select|select|poll|__poll|ppoll|clock_nanosleep|__clock_nanosleep|"
                  r"nanosleep|__nanosleep|pthread_cond_wait|__pthread_cond_wait|sem_wait|do_futex_wait|"
                  r"__futex_abstimed_wait_common|futex_wait|__GI___poll|accept|accept4|__libc_accept|"
                  r"read|__libc_read|waitpid|__waitpid|wait4|flock)\b")
FUTEX = re.compile(r"^(0x[0-9a-f]+|pthread_cond_\w+|__pthread_cond_\w+|pthread_mutex_lock|__pthread_mutex_lock|"
                   r"__futex\w*|futex\w*|syscall)$")
LOCK_WAIT = re.compile(r"PyThread_acquire_lock|lock_PyThread_acquire_lock|acquire_timed|rlock_acquire")
GIL = re.compile(r"take_gil|drop_gil|PyCOND_TIMEDWAIT|PyMUTEX_LOCK")
#: What an on-CPU sample is doing, by its frames (:func:`category`).
CATEGORIES = (
    ("records: pyarrow / Parquet parts", re.compile(r"pyarrow|libarrow|libparquet|parquet|records\.py|write_part")),
    ("QUIC: aioquic", re.compile(r"aioquic|_buffer|_crypto|pylsqpack")),
    ("crypto: cryptography / OpenSSL", re.compile(r"cryptography|libcrypto|libssl|_rust\.abi3|openssl")),
    ("asyncio event loop", re.compile(r"asyncio|_asyncio|selector_events|base_events|events\.py")),
    ("socket syscalls (send/recv)", re.compile(r"^(sendto|__libc_sendto|send|__libc_send|sendmsg|__libc_sendmsg|recvfrom|"
                                                r"__libc_recvfrom|recv|__libc_recv|recvmsg|__libc_recvmsg|write|__libc_write|"
                                                r"writev|__writev)\b|sock_send|sock_recv|sock_sendto|sock_recvfrom|sock_sendall|"
                                                r"sock_recv_into")),
    ("TCP_INFO / getsockopt", re.compile(r"getsockopt|tcp_state|TCP_INFO|sampler")),
    ("selectors (select / poll set-up)", re.compile(r"selectors\.py|select_select|select_poll|epoll_poll|pyepoll")),
    ("struct packing", re.compile(r"_struct|s_pack|s_unpack|struct")),
    ("numpy", re.compile(r"numpy|_multiarray|libopenblas")),
    ("clock / time", re.compile(r"clock_gettime|time_monotonic|time_time|pytime|timing\.py|clock\.py")),
    ("threading / locks", re.compile(r"threading\.py|lock_PyThread|PyThread_acquire|acquire_timed")),
    ("logging", re.compile(r"logging")),
    ("memory (malloc/free/GC)", re.compile(r"malloc|free|_int_|gc_collect|PyObject_GC|pymalloc|arena")),
)
FRAME = re.compile(r"^(?P<name>.*?) \((?P<where>[^()]*)\)$")


def frames_of(stack: str) -> list[str]:
    return stack.split(";")


def _name(frame: str) -> str:
    m = FRAME.match(frame)
    return m.group("name") if m else frame


#: Categories that own a sample wherever their frames are in its stack (the work is theirs even
#: when the innermost frame is a memcpy or a malloc); the others go by the innermost frame.
WHOLE_STACK = 3


def category(fr: list[str]) -> str:
    for name, rx in CATEGORIES[:WHOLE_STACK]:
        if any(rx.search(f) for f in fr):
            return name
    for f in reversed(fr):
        for name, rx in CATEGORIES[WHOLE_STACK:]:
            if rx.search(_name(f)) or rx.search(f):
                return name
    return "Python interpreter / other"


def summarize_pyspy(paths: list[Path], top: int) -> dict:
    total = idle = gil = 0
    cats: collections.Counter = collections.Counter()
    funcs: collections.Counter = collections.Counter()
    lines = [line for path in paths for line in path.read_text(errors="replace").splitlines()]
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        fr = frames_of(stack)
        total += n
        leaf = _name(fr[-1])
        if any(GIL.search(f) for f in fr[-4:]):
            gil += n
            continue
        if IDLE.match(leaf):
            idle += n
            continue
        if FUTEX.match(leaf):
            # a futex wait: on a lock of the program's own (a thread's join) it waits; after a
            # call that let the GIL go (epoll, send, open, ...) it waits to take the GIL back
            # (py-spy's native stacks do not show take_gil: it is inlined)
            caller = next((_name(f) for f in reversed(fr) if not FUTEX.match(_name(f))), "")
            if LOCK_WAIT.search(caller):
                idle += n
            else:
                gil += n
            continue
        cats[category(fr)] += n
        own = next((f for f in reversed(fr) if "tcpdelay" in f or re.search(r"\((sender|receiver|grouped_endpoints|"
                                                                               r"response_server|bulk|web_onoff|page_load|"
                                                                               r"transfers|udp_background|framing|records|"
                                                                               r"quic_sender|quic_receiver|tcp_state_sampler)\.py", f)),
                   None)
        funcs[own or "(no tcpdelay frame)"] += n
    busy = total - idle - gil
    return {"files": [p.name for p in paths], "samples": total, "idle_pct": 100 * idle / total if total else 0,
            "gil_wait_pct": 100 * gil / total if total else 0, "on_cpu_samples": busy,
            "on_cpu_by_category_pct": {k: 100 * v / busy for k, v in cats.most_common(top)} if busy else {},
            "on_cpu_by_tcpdelay_function_pct": {k: 100 * v / busy for k, v in funcs.most_common(top)} if busy else {}}


def summarize_perf(path: Path, top: int) -> dict:
    def report(sort: str) -> list[tuple[float, str]]:
        out = subprocess.run(["perf", "report", "-i", str(path), "--stdio", "--no-children", "-g", "none",
                              "--sort", sort, "--percent-limit", "0.5"], capture_output=True, text=True).stdout
        rows = []
        for line in out.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(.*)$", line)
            if m:
                rows.append((float(m.group(1)), m.group(2).strip()))
        return rows
    dsos = report("dso")
    syms = report("sym")
    kernel = sum(p for p, d in dsos if "kernel" in d)
    return {"file": path.name, "kernel_pct": kernel, "by_dso_pct": dsos[:top],
            "kernel_symbols_pct": [(p, s) for p, s in syms if "[k]" in s][:top],
            "user_symbols_pct": [(p, s) for p, s in syms if "[k]" not in s][:top]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    sides: dict[str, list[Path]] = {}
    for p in sorted(args.dir.glob("*.pyspy.txt")):        # <kind>-<flows>-<side>-<pid>: a side's processes together
        sides.setdefault(p.name.rsplit("-", 1)[0], []).append(p)
    for side, paths in sides.items():
        s = summarize_pyspy(paths, args.top)
        print(f"\n== {side} ({len(paths)} processes): {s['samples']} samples; waiting {s['idle_pct']:.0f} %, "
              f"waiting for the GIL {s['gil_wait_pct']:.0f} %, on a CPU {s['on_cpu_samples']} samples:")
        for k, v in s["on_cpu_by_category_pct"].items():
            print(f"   {v:5.1f} %  {k}")
        print("   by innermost tcpdelay frame:")
        for k, v in s["on_cpu_by_tcpdelay_function_pct"].items():
            print(f"   {v:5.1f} %  {k}")
    for p in sorted(args.dir.glob("*.perf.data")):
        s = summarize_perf(p, args.top)
        print(f"\n== {s['file']}: kernel {s['kernel_pct']:.0f} % of the samples")
        for v, k in s["by_dso_pct"]:
            print(f"   {v:5.1f} %  {k}")
        print("   kernel functions:")
        for v, k in s["kernel_symbols_pct"]:
            print(f"   {v:5.1f} %  {k}")
        print("   user functions:")
        for v, k in s["user_symbols_pct"]:
            print(f"   {v:5.1f} %  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

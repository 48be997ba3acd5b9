"""Network-namespace primitives: requirements, ``ip`` commands, entering a namespace, its processes.

Namespaces are the named ones of iproute2 (``/run/netns/NAME``). A thread enters one with
setns(2) (:func:`entered`); a socket created there stays in that namespace for its whole life,
so one process can hold sockets in several hosts. Programs run in a host via ``ip netns exec``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import shutil
import signal
import subprocess
import time
from typing import Iterator

from tcpdelay.errors import EnvironmentNotSupported

NETNS_DIR = "/run/netns"
CLONE_NEWNET = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)


def require_testbed_environment() -> None:
    """Raise :class:`EnvironmentNotSupported` unless we are root with /dev/net/tun and ``ip``."""
    reason = unavailable_reason()
    if reason:
        raise EnvironmentNotSupported(reason)


def unavailable_reason() -> str | None:
    """Why the testbed cannot run here (one line), or ``None`` when it can."""
    missing = []
    if os.geteuid() != 0:
        missing.append("not running as root")
    if not os.path.exists("/dev/net/tun"):
        missing.append("/dev/net/tun does not exist")
    elif os.geteuid() == 0:
        try:
            os.close(os.open("/dev/net/tun", os.O_RDWR))
        except OSError as err:
            missing.append(f"/dev/net/tun cannot be opened ({err.strerror})")
    if shutil.which("ip") is None:
        missing.append("the iproute2 'ip' command is not installed")
    if missing:
        return "the testbed needs root and /dev/net/tun: " + "; ".join(missing)
    return None


class CommandFailed(RuntimeError):
    """An ``ip``/system command failed; the message holds the command and its stderr."""


def ip(*args: str, netns: str | None = None, check: bool = True, json_out: bool = False):
    """Run ``ip [-n NETNS] ARGS``; return stdout (parsed when ``json_out``)."""
    argv = ["ip"] + (["-n", netns] if netns else []) + (["-j"] if json_out else []) + list(args)
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise CommandFailed(f"{' '.join(argv)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    if json_out:
        return json.loads(proc.stdout or "[]")
    return proc.stdout


def ip_batch(lines: list[str], netns: str | None = None) -> None:
    """Run many ``ip`` commands in one process (``ip -batch -``); fail on the first error."""
    if not lines:
        return
    argv = ["ip"] + (["-n", netns] if netns else []) + ["-batch", "-"]
    proc = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True)
    if proc.returncode != 0:
        raise CommandFailed(f"ip batch{f' in {netns}' if netns else ''}: {proc.stderr.strip()}")


def netns_path(name: str) -> str:
    return os.path.join(NETNS_DIR, name)


def list_netns() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def add_netns(name: str) -> None:
    ip("netns", "add", name)
    ip("link", "set", "lo", "up", netns=name)


def delete_netns(name: str) -> None:
    """Delete a named namespace (its devices go with it once no process holds it)."""
    if os.path.exists(netns_path(name)):
        ip("netns", "delete", name, check=False)
    # `ip netns delete` can leave the mount point when it raced with another deleter.
    with contextlib.suppress(OSError):
        os.unlink(netns_path(name))


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """Run the body with the calling thread inside namespace ``name``, then return.

    Only this thread moves; sockets (and /proc/sys/net files) opened in the body belong to
    ``name`` for their whole life.
    """
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(netns_path(name), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        os.close(own)
        raise CommandFailed(f"network namespace {name} does not exist") from None
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(target)
        os.close(own)


def enter_for_good(name: str) -> None:
    """Move the calling thread into ``name`` without coming back (for a forked child)."""
    fd = os.open(netns_path(name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(fd)
    finally:
        os.close(fd)


def netns_inode(name: str) -> int | None:
    try:
        return os.stat(netns_path(name)).st_ino
    except OSError:
        return None


def pids_in_netns(name: str) -> list[int]:
    """Processes whose network namespace is ``name`` (by inode of /proc/PID/ns/net)."""
    ino = netns_inode(name)
    if ino is None:
        return []
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino == ino:
                out.append(int(entry))
        except OSError:
            continue
    return out


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (guards against pid reuse)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU time of ``pid`` in seconds (/proc/PID/stat fields 14 and 15)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _signal_text(signum: int) -> str:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return f"killed by {name}"


def describe_wait_status(status: int | None) -> str:
    """A wait status (``os.waitpid``) or a Popen return code in words: "killed by SIGKILL",
    "exited with status 3"."""
    if status is None:
        return "still running"
    if status < 0:  # Popen.returncode: -N for signal N
        return _signal_text(-status)
    if os.WIFSIGNALED(status):
        return _signal_text(os.WTERMSIG(status))
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


def terminate_pids(pids: list[int], grace_s: float = 1.0) -> None:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL whatever is left; reap our own children."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                live.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 2.0)
        while live and time.monotonic() < deadline:
            for pid in list(live):
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
                if not process_alive(pid):
                    live.remove(pid)
            if live:
                time.sleep(0.01)
        pids = live
        if not pids:
            return


def kill_netns_processes(name: str, grace_s: float = 1.0) -> int:
    """Terminate every process inside namespace ``name``; return how many there were."""
    pids = pids_in_netns(name)
    terminate_pids(pids, grace_s)
    return len(pids)


def read_sysctl(key: str) -> str:
    """``key`` (dotted, e.g. ``net.ipv4.tcp_sack``) in the calling thread's namespace."""
    with open("/proc/sys/" + key.replace(".", "/")) as f:
        return " ".join(f.read().split())


def write_sysctl(key: str, value: str) -> None:
    try:
        with open("/proc/sys/" + key.replace(".", "/"), "w") as f:
            f.write(value)
    except OSError as err:
        if err.errno in (errno.EPERM, errno.EINVAL, errno.ENOENT, errno.EACCES):
            raise CommandFailed(f"sysctl {key}={value}: {err.strerror}") from None
        raise

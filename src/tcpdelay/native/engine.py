"""One ``tcpdelay-endpoint`` process and its channel: commands (one JSON object per
SOCK_SEQPACKET message, media sockets attached with SCM_RIGHTS) and events (JSON lines on its
stdout), dispatched by flow key to the threads that wait for them.

The process dies with the thread that started it (it sets PR_SET_PDEATHSIG itself, and the
kernel sends the signal when the *thread* that forked it exits): start it from a thread that
lives as long as its flows, e.g. a group's main thread. If it dies, every flow waiting on it
gets a :class:`NativeEndpointError` that names it and how it ended.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading

from tcpdelay.errors import EnvironmentNotSupported, TcpdelayError

BINARY = "tcpdelay-endpoint"
BINARY_ENV = "TCPDELAY_ENDPOINT"
#: Extra arguments for every endpoint started (e.g. "--spin-us 0": no busy-waiting).
OPTIONS_ENV = "TCPDELAY_ENDPOINT_OPTIONS"


class NativeEndpointError(TcpdelayError):
    """The native endpoint died, or refused a command."""


def find_binary() -> str:
    """$TCPDELAY_ENDPOINT, else emulator/target/release/tcpdelay-endpoint of this checkout, else
    $PATH (as :func:`tcpdelay.testbed.emulator.find_binary` finds the emulator)."""
    from tcpdelay.testbed.emulator import REPO_ROOT

    env = os.environ.get(BINARY_ENV)
    if env:
        if not os.access(env, os.X_OK):
            raise EnvironmentNotSupported(f"{BINARY_ENV}={env} is not an executable file")
        return env
    built = REPO_ROOT / "emulator" / "target" / "release" / BINARY
    if os.access(built, os.X_OK):
        return str(built)
    found = shutil.which(BINARY)
    if found:
        return found
    raise EnvironmentNotSupported(f"the native endpoint {BINARY} is not built: run `make native` (needs cargo) "
                                  f"or set {BINARY_ENV}")


class Events(queue.Queue):
    """A flow's events, and a descriptor that is readable while there are some (so the flow's
    thread can sleep in ``select`` on its control socket and its events at once)."""

    def __init__(self):
        super().__init__()
        self._r, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def fileno(self) -> int:
        return self._r

    def put(self, item, block=True, timeout=None) -> None:
        super().put(item, block, timeout)
        try:
            os.write(self._w, b"x")
        except OSError:
            pass

    def get_nowait(self):
        try:
            os.read(self._r, 4096)
        except OSError:
            pass
        return super().get_nowait()

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


def _how(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class NativeEngine:
    """A running ``tcpdelay-endpoint``. :meth:`command` sends a command (with sockets);
    :meth:`events` is the queue of a flow's events; :meth:`close` ends it (every flow it still
    serves ends with status "interrupted")."""

    def __init__(self, binary: str | None = None, rt_priority: int = 0):
        self.binary = binary or find_binary()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        args = [self.binary] + (["--rt-priority", str(rt_priority)] if rt_priority else []) \
            + os.environ.get(OPTIONS_ENV, "").split()
        try:
            self.proc = subprocess.Popen(args, stdin=theirs, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         close_fds=True)
        finally:
            theirs.close()
        self.ctl = ours
        self._send_lock = threading.Lock()
        self._queues: dict[str, queue.Queue] = {}
        self._qlock = threading.Lock()
        self.died: str | None = None
        self.realtime = False           # SCHED_RR granted (its ready line says)
        self._interrupted = False
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, name="native-endpoint-events", daemon=True)
        self._reader.start()
        if not self._ready.wait(10.0) or self.died:
            self.close()
            raise NativeEndpointError(f"{self.describe()} did not start: {self.died or 'no ready line in 10 s'}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def describe(self) -> str:
        return f"the native endpoint {BINARY} (pid {self.proc.pid})"

    def events(self, key: str) -> Events:
        with self._qlock:
            q = self._queues.get(key)
            if q is None:
                q = self._queues[key] = Events()
                if self.died:
                    q.put({"event": "died", "error": self.died})
                elif self._interrupted:
                    q.put({"event": "interrupt"})
            return q

    def interrupt(self) -> None:
        """Wake every flow's thread with an "interrupt" event (its run's stop is set: it
        looks at it now instead of at its next poll). Safe in a signal handler of the thread
        that waits on the group's members."""
        self._interrupted = True
        with self._qlock:
            for q in self._queues.values():
                q.put({"event": "interrupt"})

    def forget(self, key: str) -> None:
        """The flow ``key`` is over: its event queue goes."""
        with self._qlock:
            q = self._queues.pop(key, None)
        if q is not None:
            q.close()

    def command(self, msg: dict, fds: list[int] | tuple = ()) -> None:
        if self.died:
            raise NativeEndpointError(self.died)
        data = json.dumps(msg, separators=(",", ":")).encode()
        try:
            with self._send_lock:
                if fds:
                    socket.send_fds(self.ctl, [data], list(fds))
                else:
                    self.ctl.send(data)
        except OSError as err:
            raise NativeEndpointError(f"{self.describe()}: command not delivered ({err}); "
                                      f"{self.died or 'it may have died'}") from None

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") == "ready":
                self.realtime = bool(ev.get("realtime"))
                self._ready.set()
                continue
            key = ev.get("key")
            if isinstance(key, str):
                self.events(key).put(ev)
        code = self.proc.wait()
        err = self.proc.stderr.read().decode(errors="replace").strip()
        self.died = f"{self.describe()} {_how(code)}" + (f": {err.splitlines()[-1]}" if err else "")
        self._ready.set()
        with self._qlock:
            for q in self._queues.values():
                q.put({"event": "died", "error": self.died})

    def close(self, timeout_s: float = 5.0) -> None:
        """Close the command channel (the endpoint ends every flow, flushing their records, and
        exits); kill it if it has not within ``timeout_s``."""
        try:
            self.ctl.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout_s)

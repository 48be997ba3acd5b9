"""One ns-3 worker for many processes, over a Unix socket.

Every process that simulates starts an ns-3 worker of its own (:mod:`tcpdelay.sim.worker`):
importing ns-3's bindings, compiling tcpdelay's C++ parts and a warm-up run, ~10 s of CPU here,
more than the short simulations most of them run. A session of many such processes on one
machine (a test suite's workers, a local Ray cluster's workers, ``tcpdelay`` commands started
by a script) pays it in each. Here one worker serves them all:

- :func:`serve` is the worker's loop on a listening socket (``python -m tcpdelay.sim.worker
  --listen-fd N``). Like the stdin worker it imports ns-3 once, then forks a child per job; it
  runs the jobs of different connections side by side (one at a time per connection), and a
  connection that closes (its process ended or was killed) kills the simulation it was running.
- :class:`OnDemandWorker` binds the socket in the calling process and starts the worker only
  when a first client connects (as systemd's socket activation does): a session that never
  simulates pays nothing. The worker is its child and dies with it (``PR_SET_PDEATHSIG``);
  :meth:`OnDemandWorker.close` ends it and removes the socket.
- :class:`SocketWorker` is the client, with :class:`tcpdelay.sim.worker.Ns3Worker`'s interface.
  :func:`tcpdelay.sim.worker.shared_worker` connects to the socket named by
  :data:`SOCKET_ENV` when it is set (and starts a worker of its own when nothing listens there).

Protocol (one JSON object per line, as the stdin worker's): on connecting, the worker's hello
``{"ready": true, "import_s": ..., "warm_up_s": ..., "shared": true}`` once it has imported ns-3;
the client writes ``{"job": "<path of a job JSON>"}``; the worker answers ``{"started": <job>,
"pid": <the simulation's pid>}`` when it has forked the simulation, then ``{"job": ..., "exit":
<exit status, or -signal>, "wall_s": ..., "stderr": [<its last lines on stderr>]}`` when it
has ended.
"""

from __future__ import annotations

import collections
import json
import os
import selectors
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tcpdelay.sim.worker_child import WORKER_ENV, SimulationError, error_line, read_hello, run_child

#: The environment variable naming the socket of a shared worker (a path).
SOCKET_ENV = "TCPDELAY_NS3_WORKER_SOCKET"
#: Lines of a simulation's stderr kept for its answer.
STDERR_LINES = 20
#: ns-3's own noise on stderr, not an error (the stdin worker's client skips it too).
_NOISE = "Failed to materialize symbols"


# --------------------------------------------------------------------------- the worker


@dataclass
class _Client:
    """A connection's state in the worker: its unread bytes, the simulation it runs."""

    sock: socket.socket
    buf: bytes = b""
    job: str | None = None
    pid: int | None = None
    pidfd: int | None = None
    err: int | None = None             # read end of the simulation's stderr
    started: float = 0.0
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=STDERR_LINES))


def serve(listener: socket.socket, hello: dict) -> None:
    """Serve jobs on ``listener`` for ever (ns-3 already imported, ``hello`` the first line each
    client gets). Single-threaded: a selector over the listener, the connections, each running
    simulation's pidfd and its stderr pipe, so that the process forks with no other thread."""
    sel = selectors.DefaultSelector()
    listener.setblocking(False)
    sel.register(listener, selectors.EVENT_READ, ("accept", None))
    clients: dict[socket.socket, _Client] = {}
    hello = {**hello, "shared": True}

    def send(c: _Client, obj: dict) -> None:
        try:
            c.sock.sendall((json.dumps(obj) + "\n").encode())
        except OSError:
            pass                        # it has gone: its readable EOF closes it

    def read_err(c: _Client, until_eof: bool) -> None:
        """What the simulation wrote on stderr; ``until_eof`` once it has ended (its pipe then
        reaches EOF at once, unless something it started holds it: given up after a second)."""
        while c.err is not None:
            if until_eof and not select.select([c.err], [], [], 1.0)[0]:
                data = b""
            else:
                try:
                    data = os.read(c.err, 65536)
                except BlockingIOError:
                    return
            if not data:
                sel.unregister(c.err)
                os.close(c.err)
                c.err = None
                return
            sys.stderr.write(data.decode(errors="replace"))
            c.tail.extend(l for l in data.decode(errors="replace").splitlines() if l.strip() and _NOISE not in l)

    def end_job(c: _Client, code: int) -> None:
        sel.unregister(c.pidfd)
        os.close(c.pidfd)
        read_err(c, until_eof=True)     # the child has ended: its pipe reaches EOF
        send(c, {"job": c.job, "exit": code, "wall_s": time.monotonic() - c.started, "stderr": list(c.tail)})
        c.job = c.pid = c.pidfd = None
        c.tail.clear()
        next_job(c)

    def next_job(c: _Client) -> None:
        if c.job is not None or b"\n" not in c.buf:
            return
        line, c.buf = c.buf.split(b"\n", 1)
        if not line.strip():
            return next_job(c)
        try:
            job_path = str(json.loads(line)["job"])
        except (ValueError, KeyError, TypeError):
            send(c, {"error": f"not a job line: {line[:200]!r}"})
            return next_job(c)
        r, w = os.pipe()
        c.started = time.monotonic()
        pid = os.fork()
        if pid == 0:                    # the simulation: nothing of the worker's but the job
            sel.close()
            listener.close()
            for other in clients:
                other.close()
            os.close(r)
            os.dup2(w, 1)
            os.dup2(w, 2)
            run_child(job_path)         # never returns
        os.close(w)
        os.set_blocking(r, False)
        c.job, c.pid, c.err = job_path, pid, r
        c.pidfd = os.pidfd_open(pid)
        sel.register(c.pidfd, selectors.EVENT_READ, ("exit", c))
        sel.register(r, selectors.EVENT_READ, ("stderr", c))
        send(c, {"started": job_path, "pid": pid})

    def drop(c: _Client) -> None:
        """The client has gone: kill what it ran, forget it."""
        if c.pid is not None:
            try:
                os.kill(c.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(c.pid, 0)
            sel.unregister(c.pidfd)
            os.close(c.pidfd)
        if c.err is not None:
            sel.unregister(c.err)
            os.close(c.err)
        sel.unregister(c.sock)
        c.sock.close()
        del clients[c.sock]

    while True:
        for key, _ in sel.select():
            what, c = key.data
            if what == "accept":
                try:
                    sock, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                sock.setblocking(True)
                c = clients[sock] = _Client(sock)
                sel.register(sock, selectors.EVENT_READ, ("client", c))
                send(c, hello)
            elif what == "client":
                if c.sock not in clients:
                    continue
                try:
                    data = c.sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    drop(c)
                    continue
                c.buf += data
                next_job(c)
            elif what == "stderr":
                if c.err is not None:
                    read_err(c, until_eof=False)
            elif what == "exit":
                if c.pid is None or c.sock not in clients:
                    continue
                _, status = os.waitpid(c.pid, 0)
                end_job(c, os.waitstatus_to_exitcode(status))


# --------------------------------------------------------------------------- activation


class OnDemandWorker:
    """A socket at ``path`` that starts a shared ns-3 worker when its first client connects.

    The worker's stderr (ns-3's messages, each simulation's) goes to ``log_path`` (default: the
    socket's path with ``.log``). Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: str | os.PathLike, *, log_path: str | os.PathLike | None = None,
                 python: str | None = None):
        self.path = Path(path)
        self.log_path = Path(log_path) if log_path else self.path.with_suffix(".log")
        self.proc: subprocess.Popen | None = None
        self._python = python or sys.executable
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        self._sock.listen(64)
        self._wake_r, self._wake_w = os.pipe()
        self._closed = False
        # The thread that starts the worker lives until close(): PR_SET_PDEATHSIG fires when the
        # thread that forked the child ends, not only the process.
        self._thread = threading.Thread(target=self._activate, name="ns3-worker-activation", daemon=True)
        self._thread.start()

    def _activate(self) -> None:
        ready, _, _ = select.select([self._sock, self._wake_r], [], [])
        if self._sock in ready and not self._closed:
            fd = self._sock.fileno()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [self._python, "-m", "tcpdelay.sim.worker", "--listen-fd", str(fd)], pass_fds=(fd,),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                    env={**os.environ, **WORKER_ENV}, start_new_session=True)
            # until close(); a worker that ends first (it could not import ns-3, or was killed)
            # takes the socket with it: a client waiting for its hello reads the end, and later
            # ones find nothing listening (shared_worker() then starts a worker of its own)
            pidfd = os.pidfd_open(self.proc.pid)
            try:
                ready, _, _ = select.select([self._wake_r, pidfd], [], [])
            finally:
                os.close(pidfd)
            if self._wake_r not in ready:
                self._sock.close()
                self.path.unlink(missing_ok=True)

    @property
    def started(self) -> bool:
        """Whether the worker has been started (a client has connected)."""
        return self.proc is not None

    def close(self) -> None:
        """End the worker and every simulation it runs; remove the socket."""
        if self._closed:
            return
        self._closed = True
        os.write(self._wake_w, b"x")
        self._thread.join(10)
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self._sock.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> "OnDemandWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --------------------------------------------------------------------------- the client


class SocketWorker:
    """A connection to a shared worker (see the module doc): :class:`tcpdelay.sim.worker.Ns3Worker`'s
    interface; :meth:`run` one job at a time, thread-safe. Raises :class:`OSError` when nothing
    listens at ``path``, :class:`SimulationError` when the worker does not say it is ready."""

    def __init__(self, path: str | os.PathLike, *, start_timeout_s: float = 300.0):
        self.path = str(path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(self.path)
        except OSError:
            self._sock.close()
            raise
        self._file = self._sock.makefile("r", encoding="utf-8")
        self._lock = threading.Lock()
        self._closed = False
        self._stderr: list[str] = []
        self.last_pid: int | None = None
        line = self._readline(start_timeout_s)
        hello = read_hello(line)
        if not hello:
            self.stop()
            raise SimulationError(f"the shared ns-3 worker at {self.path} did not start"
                                  f" (its log: {Path(self.path).with_suffix('.log')})")
        self.import_s = float(hello.get("import_s", 0.0))
        self.warm_up_s = float(hello.get("warm_up_s", 0.0))

    def _readline(self, timeout_s: float | None) -> str:
        self._sock.settimeout(timeout_s)
        try:
            return self._file.readline()
        except (socket.timeout, TimeoutError):
            self.stop()                 # closing the connection kills its simulation
            raise SimulationError(f"the shared ns-3 worker did not answer within {timeout_s:g} s") from None
        except OSError:
            return ""

    def alive(self) -> bool:
        return not self._closed

    def last_error(self) -> str:
        """The last line the last simulation printed on stderr that looks like an error."""
        return error_line(self._stderr)

    def run(self, job_path: str | os.PathLike, *, timeout_s: float | None = None) -> dict:
        """Run the job in ``job_path``; returns the worker's answer (``exit`` 0 = done)."""
        with self._lock:
            if self._closed:
                raise SimulationError("the connection to the shared ns-3 worker is closed")
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            try:
                self._sock.sendall((json.dumps({"job": str(job_path)}) + "\n").encode())
            except OSError as err:
                self.stop()
                raise SimulationError(f"the shared ns-3 worker has gone: {err}") from None
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                line = self._readline(left)
                if not line:
                    self.stop()
                    raise SimulationError("the shared ns-3 worker died")
                answer = json.loads(line)
                if "started" in answer:
                    self.last_pid = answer.get("pid")
                    continue
                if "error" in answer:
                    raise SimulationError(f"the shared ns-3 worker: {answer['error']}")
                self._stderr = answer.get("stderr", [])
                return answer

    def stop(self) -> None:
        """Close the connection (the worker kills a simulation it was running for it)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._file.close()
            self._sock.close()
        except OSError:
            pass

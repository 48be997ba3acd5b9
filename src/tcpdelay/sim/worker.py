"""A worker process that imports ns-3 once and runs each simulation in a forked child.

Importing ns-3's Python bindings and compiling tcpdelay's C++ parts takes seconds; a simulation
of a small scenario takes less. The worker (``python -m tcpdelay.sim.worker``) pays the import
once, then for every job it is handed forks a child that runs it
(:func:`tcpdelay.sim.ns3_runtime.simulate`) and exits: a fatal error in ns-3 (which aborts the
process) costs that child only, and every simulation starts from the same clean state.

Protocol (one JSON object per line): the client writes ``{"job": "<path of a job JSON>"}``;
the worker answers ``{"job": ..., "exit": <child's exit status, or -signal>, "wall_s": ...}``
when the child has ended (its records and ``result.json`` are in the job's ``out_dir``; a
failed child leaves ``error.txt`` there when it could). The worker's first line is
``{"ready": true, "import_s": ..., "warm_up_s": ...}`` (after importing ns-3 it runs a one-second
simulation that uses every part, so that the bindings are compiled once, before any fork). Only the protocol goes to the worker's stdout (ns-3's
own messages go to stderr).

:class:`Ns3Worker` is the client; :func:`shared_worker` keeps one per process (a sweep's units
reuse it), stopped at exit, or connects to a worker that many processes share
(:mod:`tcpdelay.sim.worker_socket`).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from tcpdelay.sim.worker_child import WORKER_ENV, SimulationError, die_with_parent, error_line, read_hello, run_child
from tcpdelay.sim.worker_socket import SOCKET_ENV, SocketWorker, serve

# --------------------------------------------------------------------------- the worker


def main(argv: list[str] | None = None) -> int:
    """The worker: on stdin/stdout (the protocol above), or with ``--listen-fd N`` on a listening
    Unix socket inherited as file descriptor N (:func:`tcpdelay.sim.worker_socket.serve`)."""
    argv = sys.argv[1:] if argv is None else argv
    listen_fd = int(argv[argv.index("--listen-fd") + 1]) if "--listen-fd" in argv else None
    die_with_parent()
    proto = os.fdopen(os.dup(1), "w", buffering=1)   # the protocol's own stdout
    os.dup2(2, 1)                                     # anything else printed goes to stderr
    t0 = time.monotonic()
    empty = tempfile.mkdtemp(prefix="tcpdelay-ns3-")
    os.chdir(empty)                                   # ns-3 globs the current directory when imported
    from tcpdelay.sim.ns3_runtime import load, warm_up

    load()
    os.chdir("/")                                     # nothing left behind, even if the worker is killed
    os.rmdir(empty)
    import_s = time.monotonic() - t0
    warm_s = warm_up()      # compiled once here, inherited by every child
    hello = {"ready": True, "import_s": import_s, "warm_up_s": warm_s}
    if listen_fd is not None:
        import socket

        serve(socket.socket(fileno=listen_fd), hello)
        return 0
    proto.write(json.dumps(hello) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        job_path = json.loads(line)["job"]
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            run_child(job_path)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        proto.write(json.dumps({"job": job_path, "exit": code, "wall_s": time.monotonic() - started}) + "\n")
    return 0


# --------------------------------------------------------------------------- the client


class Ns3Worker:
    """A running worker (see the module doc). :meth:`run` one job at a time; thread-safe."""

    def __init__(self, *, python: str | None = None, start_timeout_s: float = 300.0):
        env = {**os.environ, **WORKER_ENV}
        self.proc = subprocess.Popen([python or sys.executable, "-m", "tcpdelay.sim.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     start_new_session=True)
        self._lock = threading.Lock()
        self._stderr: list[str] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        line = self._readline(start_timeout_s)
        hello = read_hello(line)
        if not hello:
            self.stop()
            raise SimulationError(f"the ns-3 worker did not start: {self.last_error() or line.strip() or 'no answer'}")
        self.import_s = float(hello.get("import_s", 0.0))
        self.warm_up_s = float(hello.get("warm_up_s", 0.0))

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            if "Failed to materialize symbols" in line:
                continue
            self._stderr.append(line.rstrip())
            del self._stderr[:-200]

    def last_error(self) -> str:
        """The last line the worker printed on stderr that looks like an error."""
        return error_line(self._stderr)

    def _readline(self, timeout_s: float | None) -> str:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if reader.is_alive():
            self.stop()
            raise SimulationError(f"the ns-3 worker did not answer within {timeout_s:g} s")
        return box[0] if box else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, job_path: str | os.PathLike, *, timeout_s: float | None = None) -> dict:
        """Run the job in ``job_path``; returns the worker's answer (``exit`` 0 = done)."""
        with self._lock:
            if not self.alive():
                raise SimulationError(f"the ns-3 worker has exited: {self.last_error() or 'no message'}")
            self.proc.stdin.write(json.dumps({"job": str(job_path)}) + "\n")
            self.proc.stdin.flush()
            line = self._readline(timeout_s)
            if not line:
                raise SimulationError(f"the ns-3 worker died: {self.last_error() or 'no message'}")
            return json.loads(line)

    def stop(self) -> None:
        """End the worker and any simulation it runs (its whole process group)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


_shared: Ns3Worker | SocketWorker | None = None
_shared_lock = threading.Lock()


def shared_worker():
    """This process's worker, started on first use (and again if it died): a connection to the
    shared worker whose socket :data:`tcpdelay.sim.worker_socket.SOCKET_ENV` names, when it is
    set and something listens there (:class:`tcpdelay.sim.worker_socket.SocketWorker`), else an
    :class:`Ns3Worker` of this process's own."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.alive():
            _shared = None
            if os.environ.get(SOCKET_ENV):
                try:
                    _shared = SocketWorker(os.environ[SOCKET_ENV])
                except OSError:     # nothing listens there (its session has ended): one of our own
                    _shared = None
            if _shared is None:
                _shared = Ns3Worker()
            atexit.register(_shared.stop)
        return _shared


if __name__ == "__main__":
    sys.exit(main())

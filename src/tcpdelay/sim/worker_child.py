"""What an ns-3 worker's processes share, whichever way the worker is reached (its stdin,
:mod:`tcpdelay.sim.worker`; a Unix socket, :mod:`tcpdelay.sim.worker_socket`): the worker's
environment, its error, and the forked child that runs one simulation."""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path

from tcpdelay.errors import TcpdelayError

#: Environment of the worker: one BLAS thread and the system allocator for Arrow, so nothing
#: else runs threads in the process that forks.
WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "ARROW_DEFAULT_MEMORY_POOL": "system"}


class SimulationError(TcpdelayError):
    """The ns-3 worker could not start, or a simulation's child failed."""


def read_hello(line: str) -> dict:
    """The worker's first line, parsed: ``{"ready": true, "import_s", "warm_up_s", ...}``, or
    ``{}`` when it is not that (the worker ended, or printed something else)."""
    try:
        hello = json.loads(line)
    except ValueError:
        return {}
    return hello if isinstance(hello, dict) and hello.get("ready") else {}


def error_line(stderr_lines) -> str:
    """The last of ``stderr_lines`` that looks like an error (not blank, not a ``#`` comment,
    not an indented traceback line)."""
    for line in reversed(stderr_lines):
        if line.strip() and not line.startswith(("#", " ")):
            return line.strip()
    return ""


def die_with_parent() -> None:
    """SIGKILL this process when its parent ends (Linux PR_SET_PDEATHSIG): a worker whose client
    was killed, and a simulation whose worker was, do not live on."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def run_child(job_path: str) -> None:
    """In the forked child: run the job, exit 0 (or 1 after writing error.txt)."""
    die_with_parent()
    from tcpdelay.sim.job import Job
    from tcpdelay.sim.ns3_runtime import simulate

    code = 0
    try:
        job = Job.from_dict(json.loads(Path(job_path).read_text()))
        try:
            simulate(job)
        except BaseException as err:  # noqa: BLE001 - reported to the parent through error.txt
            code = 1
            Path(job.out_dir, "error.txt").write_text(f"{type(err).__name__}: {err}\n{traceback.format_exc()}")
    except BaseException:  # noqa: BLE001
        code = 1
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

"""Fixtures shared by tests in several folders (pytest finds this file for every test below it)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from pathlib import Path

import pytest

from tcpdelay.cli import main
from tcpdelay.records import RecordWriter, write_run_metadata


def write_run_by_hand(run_dir, delays, *, lost=(), flow_name="voip", status="complete"):
    """One run directory written by hand: 174-byte packets every 20 ms with the given delays
    (seq i gets ``delays[i]``, in seconds); seqs in ``lost`` never arrive. ``status``:
    ``complete`` (a complete.json marker), ``failed`` (failed.json) or anything else (no marker)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_dir.mkdir(parents=True)
    with RecordWriter(run_dir, "sent", writer_id="s") as ws, RecordWriter(run_dir, "received", writer_id="r") as wr:
        for seq, d in enumerate(delays):
            t = 100.0 + seq * 0.02
            ws.append(flow_id=0, connection=0, seq=seq, size_bytes=174, send_time_s=t,
                      frame_id=-1, frame_type="", frame_last=True, dropped=False)
            if seq not in lost:
                wr.append(flow_id=0, connection=0, seq=seq, size_bytes=174, send_time_s=t, recv_time_s=t + d)
    write_run_metadata(run_dir, {"clock": "shared-monotonic", "duration_s": len(delays) * 0.02})
    pq.write_table(pa.table({"flow_id": pa.array([0], pa.int32()), "name": [flow_name], "kind": ["media"]}),
                   run_dir / "flows.parquet")
    if status == "complete":
        (run_dir / "complete.json").write_text(json.dumps({"seed": 1, "wall_s": 1.5, "summary": {}}))
    elif status == "failed":
        (run_dir / "failed.json").write_text(json.dumps({"error": "RuntimeError: boom"}))


def exit_code(args) -> int:
    """The exit status of ``tcpdelay ARGS`` run in this process."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


@pytest.fixture
def make_run():
    """:func:`write_run_by_hand`: a run directory of records with known delays."""
    return write_run_by_hand


@pytest.fixture
def cli_exit():
    """:func:`exit_code`: run the command line in-process, return its exit status."""
    return exit_code


@pytest.fixture(scope="session", autouse=True)
def _video_cache(tmp_path_factory, worker_id):
    """The videos tests make (traffic/video_file.py) go to a cache of the test session's own, not
    the user's ~/.cache/tcpdelay. Under pytest-xdist its workers share one (the session's base
    temporary directory is per worker, its parent the run's): a video is made once, not once per
    worker, and a file appears there whole (made under a temporary name, then renamed)."""
    import os

    old = os.environ.get("TCPDELAY_CACHE_DIR")
    if worker_id == "master":
        cache = tmp_path_factory.mktemp("cache")
    else:
        cache = tmp_path_factory.getbasetemp().parent / "cache"
        cache.mkdir(exist_ok=True)
    os.environ["TCPDELAY_CACHE_DIR"] = str(cache)
    yield
    if old is None:
        os.environ.pop("TCPDELAY_CACHE_DIR", None)
    else:
        os.environ["TCPDELAY_CACHE_DIR"] = old


class Tmpfs:
    """Small tmpfs mounts (root only): a real disk that fills up, for the tests of writes on a
    full disk. Each mount is unmounted when its ``with`` ends."""

    @staticmethod
    @contextlib.contextmanager
    def mounted(where: Path, size: str = "4m"):
        where.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
        try:
            yield where
        finally:
            subprocess.run(["umount", "-l", str(where)], check=False)

    @staticmethod
    def fill(disk: Path) -> None:
        """Take every free byte of ``disk``."""
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
        finally:
            os.close(fd)


@pytest.fixture
def tmpfs() -> type[Tmpfs]:
    """:class:`Tmpfs`: ``with tmpfs.mounted(path, "64k") as disk: tmpfs.fill(disk)``."""
    return Tmpfs


@pytest.fixture(scope="session")
def worker_id(request) -> str:
    """pytest-xdist's name of this worker (``gw0``, ...), ``master`` when the tests run in one
    process (pytest-xdist's own fixture of that name, also when it is not loaded)."""
    return getattr(request.config, "workerinput", {}).get("workerid", "master")


@pytest.hookimpl(tryfirst=True)   # before pytest-xdist's, which reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    """Tests that use a module-scoped fixture (a Ray cluster, a reference-kernel guest, a simulation
    done once for the file) run in one pytest-xdist worker, so that it is made once
    (``--dist loadgroup``; a test's own ``xdist_group`` marker wins).

    The tests that simulate in ns-3 are not grouped: they share the session's one ns-3 worker
    (:class:`_SharedNs3Worker`), whichever pytest-xdist worker runs them. The Ray tests keep their
    own group (the module's marker), so that one long group does not take the others' place."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        defs = getattr(item, "_fixtureinfo", None)
        if defs is None:
            continue
        if any(fd[-1].scope == "module" for fd in defs.name2fixturedefs.values() if fd):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    _longest_first(items)


#: Each test's seconds (setup, call and teardown) in a fresh clone's make test (tests of at
#: least 0.5 s; written by ``TCPDELAY_WRITE_DURATIONS=1 make test``, below).
DURATIONS_FILE = Path(__file__).with_name("durations.json")


def _base_id(nodeid: str) -> str:
    return nodeid.split("@")[0]    # pytest-xdist appends "@group" to a grouped test's id


def _longest_first(items) -> None:
    """Order the tests longest first, as :data:`DURATIONS_FILE` has them (a test it lacks counts
    0 s): pytest-xdist hands tests out in this order, and a long test handed out last held one
    worker for two minutes after the others had finished (the classic longest-processing-time
    rule for spreading jobs over machines). The tests of one ``xdist_group`` stay together, in
    their order, at the place of their sum; a module's tests keep their relative order
    otherwise (the sort is stable)."""
    try:
        known = json.loads(DURATIONS_FILE.read_text())
    except (OSError, ValueError):
        return
    group_s: dict[str, float] = {}
    first: dict[str, int] = {}
    keys = []
    for i, item in enumerate(items):
        mark = item.get_closest_marker("xdist_group")
        group = (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark is not None else None
        seconds = known.get(_base_id(item.nodeid), 0.0)
        if group is not None:
            group_s[group] = group_s.get(group, 0.0) + seconds
            first.setdefault(group, i)
        keys.append((group, seconds, i))
    order = {id(item): (-(group_s[g] if g is not None else s), first[g] if g is not None else i, i)
             for item, (g, s, i) in zip(items, keys)}
    items.sort(key=lambda item: order[id(item)])


class _Durations:
    """With ``TCPDELAY_WRITE_DURATIONS=1``: each test's seconds, merged into :data:`DURATIONS_FILE`
    when the session ends (in the process that reports, pytest-xdist's controller)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        key = _base_id(report.nodeid)
        self.seconds[key] = self.seconds.get(key, 0.0) + report.duration

    def pytest_sessionfinish(self, session) -> None:
        if hasattr(session.config, "workerinput"):
            return      # a pytest-xdist worker: its controller writes
        try:
            known = json.loads(DURATIONS_FILE.read_text())
        except (OSError, ValueError):
            known = {}
        for key, seconds in self.seconds.items():
            if seconds >= 0.5:
                known[key] = round(seconds, 1)
            else:
                known.pop(key, None)
        DURATIONS_FILE.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")


class _SharedNs3Worker:
    """One ns-3 worker for the whole session (:class:`tcpdelay.sim.worker_socket.OnDemandWorker`):
    made by the process that runs the session (pytest-xdist's controller, or pytest alone), its
    socket named in the environment every process below it inherits (pytest-xdist's workers, the
    Ray clusters they start, the ``tcpdelay`` commands they run), started when the first of them
    simulates. Each process that simulated started an ns-3 worker of its own, ~10 s of CPU: ten
    of them in a fresh clone's first pass (docs/testing.md)."""

    def __init__(self) -> None:
        import tempfile

        from tcpdelay.sim.worker_socket import SOCKET_ENV, OnDemandWorker

        self.dir = Path(tempfile.mkdtemp(prefix="tcpdelay-ns3-shared-"))
        self.worker = OnDemandWorker(self.dir / "worker.sock")
        self.env = SOCKET_ENV
        self.before = os.environ.get(SOCKET_ENV)
        os.environ[SOCKET_ENV] = str(self.worker.path)

    def close(self) -> None:
        import shutil

        self.worker.close()
        if self.before is None:
            os.environ.pop(self.env, None)
        else:
            os.environ[self.env] = self.before
        shutil.rmtree(self.dir, ignore_errors=True)


def pytest_configure(config):
    if os.environ.get("TCPDELAY_WRITE_DURATIONS") == "1" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Durations(), "tcpdelay-durations")
    if not hasattr(config, "workerinput"):
        config.add_cleanup(_SharedNs3Worker().close)

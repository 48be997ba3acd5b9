"""Sweeps on Ray (``tcpdelay sweep --engine ray``): each unit is a Ray task, its run directory
shipped back to the driver as files.

Ray (an optional extra, ``pip install 'tcpdelay[cluster]'``) places the tasks; this module only
says what each unit needs and puts what comes back where a local sweep would have written it:

- **Resources.** A testbed unit needs one ``testbed`` resource (and one CPU): a node advertises
  ``testbed`` when it can run the namespace testbed (root, /dev/net/tun, the emulator built),
  ``ray start --resources '{"testbed": 1}'`` for a whole node's worth — emulation is real time,
  so by default one testbed run at a time per node — or more where the node can take more. ns-3
  and model units need one CPU each and pack one per CPU.
- **Results as files.** A task runs :func:`~tcpdelay.experiments.unit.run_unit` into a
  temporary directory on its node and returns the directory as a tar archive (no shared file
  system is assumed); the driver unpacks it beside the unit's run directory and renames it into
  place, so ``complete.json`` appears only with everything else — same layout, markers and cell
  ids as a local run, and ``report``, resume and ``validate`` work unchanged.
- **Failures.** A run that fails on its own comes back with its ``failed.json`` and is recorded,
  as locally. A worker or node lost mid-unit is retried by Ray on any node, at most
  :data:`RETRIES` times; the testbed task first removes the leftovers of runs whose owner died
  on its node (a killed attempt's namespaces). What other units measured is kept either way.
- **Progress.** Each task tells a small actor when it starts and where; the driver's bar shows
  units done, running (per node) and failed, and says when a unit is retried.

Without ``--address`` the sweep starts a Ray instance on this machine (a ``testbed`` resource of
``--jobs`` when the testbed can run here) and stops it at the end; with one, it joins that
cluster (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``), where every node needs the same
tcpdelay installed. See docs/scale-out.md.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Callable

from tcpdelay.errors import EnvironmentNotSupported, ParameterError, TcpdelayError

#: How often Ray runs a unit again after its worker or node was lost (not after the run itself
#: failed: that is a result, as on a local sweep).
RETRIES = 2
#: Seconds to wait for a cluster at ``--address`` before saying it cannot be reached.
CONNECT_TIMEOUT_S = 20.0

_ADDRESS = re.compile(r"^(auto|(ray://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5})$")


def import_ray():
    """The ``ray`` module, or one line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise EnvironmentNotSupported("the ray engine needs Ray: pip install 'tcpdelay[cluster]' "
                                      "(make test installs it)") from None
    return ray


def check_address(address: str | None) -> None:
    """``None``, ``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``; anything else is one line."""
    if address is not None and not _ADDRESS.match(address):
        raise ParameterError(f"address: {address!r} is not a Ray cluster address "
                             "(auto, HOST:PORT or ray://HOST:PORT)")


def _reachable(address: str, timeout_s: float) -> bool:
    """Whether something listens at ``HOST:PORT`` (Ray itself waits minutes before it gives up)."""
    if address == "auto":
        return True
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


class Connection:
    """Joins the cluster at ``address`` (or starts a local instance with ``testbed_slots``
    testbed slots) and leaves what it started; with ``testbed``, refuses a cluster where no node
    advertises the ``testbed`` resource. A caller's own ``ray.init`` (tests, notebooks) is used
    as it is."""

    def __init__(self, address: str | None, testbed_slots: int, testbed: bool):
        check_address(address)
        self.address, self.testbed_slots, self.testbed = address, testbed_slots, testbed
        self.started = False

    def __enter__(self):
        ray = import_ray()
        if not ray.is_initialized():
            self._join(ray)
        if self.testbed and not ray.cluster_resources().get("testbed"):
            self.__exit__()
            raise EnvironmentNotSupported(
                "no node of the Ray cluster advertises a 'testbed' resource: start testbed nodes with "
                "ray start --resources '{\"testbed\": 1}' (root, /dev/net/tun, the emulator built)")
        return self

    def _join(self, ray) -> None:
        if self.address is not None:
            if not _reachable(self.address, CONNECT_TIMEOUT_S):
                raise ParameterError(f"address: no Ray cluster answers at {self.address} "
                                     "(start one with `ray start --head`, or leave --address out)")
            try:
                ray.init(address=self.address, log_to_driver=False, configure_logging=False)
            except Exception as err:  # ConnectionError, RuntimeError, version mismatch ...
                raise ParameterError(f"address: cannot join the Ray cluster at {self.address}: "
                                     f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
        else:
            resources = {"testbed": float(self.testbed_slots)} if self.testbed_slots else {}
            ray.init(address="local", resources=resources, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        self.started = True

    def __exit__(self, *exc):
        if self.started:
            import_ray().shutdown()


def pack_dir(path: Path) -> bytes:
    """``path``'s files as an uncompressed tar archive (Parquet is compressed already)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(path.rglob("*")):
            tar.add(p, arcname=str(p.relative_to(path)), recursive=False)
    return buf.getvalue()


def unpack_into(data: bytes, run_dir: Path) -> None:
    """Unpack an archive of :func:`pack_dir` as ``run_dir``: into a hidden sibling first, then
    renamed into place, so the run's markers appear only with all its files."""
    incoming = run_dir.parent / f".{run_dir.name}.incoming"
    shutil.rmtree(incoming, ignore_errors=True)
    incoming.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(incoming, filter="data")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    os.rename(incoming, run_dir)


#: A unit's temporary directory on its node: ``<tmp>/tcpdelay-ray-<worker pid>-<random>``.
WORK_PREFIX = "tcpdelay-ray-"


def _remove_stale_work_dirs() -> None:
    """Remove the temporary directories of units whose worker died (killed mid-unit): their pid
    is in the name and no longer runs."""
    for d in Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}*-*"):
        pid = d.name[len(WORK_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(d, ignore_errors=True)


def _node_name() -> str:
    return socket.gethostname()


def _unit_task(runner, scenario, seed: int, cell_id: str, key: str, progress, testbed: bool) -> dict:
    """One unit on a Ray worker: run it into a temporary directory, return the directory's files."""
    from tcpdelay.experiments.unit import run_unit

    import ray

    ray.get(progress.started.remote(key, _node_name(), os.getpid()))   # heard before anything can fail
    if testbed:      # leftovers of a killed attempt (its owner is dead) on this node
        from tcpdelay.testbed import runs

        runs.clean()
    _remove_stale_work_dirs()
    tmp = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))
    try:
        run_dir = tmp / "run"
        error = None
        try:
            run_unit(runner, scenario, seed, str(run_dir), cell_id)
        except EnvironmentNotSupported:
            raise                               # every unit would fail: the sweep stops
        except Exception as err:                # a result: run_unit wrote failed.json
            notes = "".join(f" ({n})" for n in getattr(err, "__notes__", ()))
            error = f"{type(err).__name__}: {err}{notes}"
        return {"node": _node_name(), "files": pack_dir(run_dir), "error": error}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _Progress:
    """Where each unit runs: ``started(key, node, pid)`` by the tasks (every attempt), read by the
    driver as the events since the last it saw, and the latest attempt of each unit."""

    def __init__(self):
        self.events: list[tuple[str, str, int, int]] = []        # (key, node, pid, attempt)
        self.running: dict[str, tuple[str, int, int]] = {}       # key -> (node, pid, attempt)

    def started(self, key: str, node: str, pid: int) -> None:
        attempt = self.running[key][2] + 1 if key in self.running else 1
        self.running[key] = (node, pid, attempt)
        self.events.append((key, node, pid, attempt))

    def since(self, n: int) -> tuple[list[tuple[str, str, int, int]], dict[str, tuple[str, int, int]]]:
        return self.events[n:], dict(self.running)


class RemoteFailure(TcpdelayError):
    """A unit that failed on its node (its message is the run's own error), or whose worker or
    node was lost more often than :data:`RETRIES`."""


def run_on_ray(todo: list, runner: Callable, *, testbed: bool, bar, task,
               done: Callable[[Any, BaseException | None], None],
               on_started: Callable[[Any, str, int], None] | None = None) -> None:
    """Run the units ``todo`` (:class:`~tcpdelay.experiments.sweep.Unit`) as Ray tasks (within a
    :class:`Connection`) and put each one's files in its run directory; ``done(unit, error)`` as
    each ends. ``on_started(unit, node, pid)`` is called when the driver learns that a unit (or
    its retry) started."""
    ray = import_ray()
    progress = ray.remote(num_cpus=0)(_Progress).remote()
    options: dict[str, Any] = {"num_cpus": 1, "max_retries": RETRIES, "retry_exceptions": False}
    if testbed:
        options["resources"] = {"testbed": 1}
    remote = ray.remote(_unit_task).options(**options)
    by_key = {str(k): u for k, u in enumerate(todo)}
    refs = {remote.remote(runner, u.cell.scenario, u.seed, u.cell.id, key, progress, testbed): (key, u)
            for key, u in by_key.items()}
    seen = 0
    counts = {"done": 0, "failed": 0}
    try:
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            events, running = ray.get(progress.since.remote(seen))
            seen += len(events)
            for key, node, pid, attempt in events:
                unit = by_key[key]
                if attempt > 1:
                    bar.console.print(f"[yellow]retry[/yellow] {unit.label}: attempt {attempt} on {node}")
                if on_started is not None:
                    on_started(unit, node, pid)
            for ref in ready:
                key, unit = refs.pop(ref)
                err = _collect(ray, ref, unit)
                counts["failed" if err else "done"] += 1
                done(unit, err)
            active = {k for k, _u in refs.values()}
            nodes: dict[str, int] = {}
            for key, (node, _pid, _a) in running.items():
                if key in active:
                    nodes[node] = nodes.get(node, 0) + 1
            where = ", ".join(f"{n}: {c}" for n, c in sorted(nodes.items())) or "-"
            bar.update(task, description=f"ray: {counts['done']} done, {sum(nodes.values())} running "
                                         f"({where}), {counts['failed']} failed")
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise


def _collect(ray, ref, unit) -> BaseException | None:
    """A finished task's files into the unit's run directory; the error to record, or None."""
    from tcpdelay.results import markers

    try:
        out = ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, EnvironmentNotSupported):
            raise cause from None
        return _failed_here(markers, unit, RemoteFailure(str(cause or err).splitlines()[0]))
    except (ray.exceptions.RayError, OSError) as err:   # worker or node lost RETRIES + 1 times
        return _failed_here(markers, unit, RemoteFailure(f"lost after {RETRIES + 1} attempts: "
                                                         f"{type(err).__name__}: {str(err).splitlines()[0]}"))
    unpack_into(out["files"], unit.run_dir)
    return RemoteFailure(f"on {out['node']}: {out['error']}") if out["error"] else None


def _failed_here(markers, unit, err: BaseException) -> BaseException:
    """Mark a unit that brought no files back as failed, as a local run's would be."""
    shutil.rmtree(unit.run_dir, ignore_errors=True)
    unit.run_dir.mkdir(parents=True)
    markers.write_failed(unit.run_dir, {"cell_id": unit.cell.id, "seed": unit.seed, "error": str(err),
                                        "traceback": ""})
    return err

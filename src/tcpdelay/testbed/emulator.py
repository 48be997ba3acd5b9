"""Starting, querying and stopping the link emulator ``tcpdelay-link`` (crate ``emulator/``).

The interface is the contract of docs/emulator.md: a JSON configuration naming the two
namespaces and their (already created) TUN devices, a ``ready_file`` that appears once both
TUNs are open and the loop runs, counters as JSON at exit and on SIGUSR1.

One process serves every link of a testbed: the bottleneck alone is a single-link file
(:func:`emulator_config`); with access links, :func:`testbed_config` names them all in one
file (``links``: the bottleneck ``BOTTLENECK`` and ``access-<host>`` per host) and
:func:`link_view` cuts each link's counters out of the process's, in the single-link shape.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tcpdelay.errors import EnvironmentNotSupported, ParameterError
from tcpdelay.testbed import netns as nsutil
from tcpdelay.testbed.spec import TestbedSpec

BINARY = "tcpdelay-link"
REPO_ROOT = Path(__file__).resolve().parents[3]


def find_binary() -> str:
    """$TCPDELAY_LINK, else emulator/target/release/tcpdelay-link of this checkout, else $PATH."""
    env = os.environ.get("TCPDELAY_LINK")
    if env:
        if not os.access(env, os.X_OK):
            raise EnvironmentNotSupported(f"TCPDELAY_LINK={env} is not an executable file")
        return env
    built = REPO_ROOT / "emulator" / "target" / "release" / BINARY
    if os.access(built, os.X_OK):
        return str(built)
    found = shutil.which(BINARY)
    if found:
        return found
    raise EnvironmentNotSupported(
        f"the link emulator {BINARY} is not built: run `make native` (needs cargo) or set TCPDELAY_LINK")


#: The bottleneck's name among the links of one emulator.
BOTTLENECK = "bottleneck"
#: What one process's counters hold besides its links' directions (single-link shape).
PROCESS_COUNTERS = ("elapsed_s", "realtime", "timing", "pool_slots_allocated")


def access_link_name(host: str) -> str:
    """The name of ``host``'s access link in the emulator's ``links`` and counters."""
    return f"access-{host}"


def link_view(counters: dict, name: str = BOTTLENECK) -> dict | None:
    """Link ``name``'s counters in the single-link shape (``a_to_b``, ``b_to_a``, ``seed`` and
    the process's ``elapsed_s``, ``timing`` ...), from a process's counters: those of a
    single-link file are the bottleneck's as they are; a ``links`` file's are cut out by name.
    ``None`` when the process has no link of that name."""
    if "links" not in counters:
        return counters if name == BOTTLENECK else None
    own = counters["links"].get(name)
    if own is None:
        return None
    return {**own, **{k: counters[k] for k in PROCESS_COUNTERS if k in counters}}


def _check_options(spec: TestbedSpec) -> None:
    reserved = {"a", "b", "ready_file", "counters_file", "a_to_b", "b_to_a", "seed", "realtime", "events_file", "mtu",
                "queue_file", "queue_sample_s", "links"}
    clash = reserved & set(spec.emulator_options)
    if clash:
        raise ParameterError(f"emulator_options may not set {', '.join(sorted(clash))}: "
                             "the testbed sets them (from TestbedSpec.link, seed, realtime, events_file, queue_file, "
                             "queue_sample_s, mtu_bytes)")


def emulator_config(spec: TestbedSpec, a: tuple[str, str], b: tuple[str, str], state_dir: str) -> dict:
    """The emulator's JSON configuration for ``spec``'s bottleneck alone; ``a``/``b`` are (netns, tun) pairs."""
    _check_options(spec)
    queue = {"queue_file": spec.queue_file, "queue_sample_s": spec.queue_sample_s} if spec.queue_file else {}
    return _config(spec, spec.link, a, b, spec.seed, os.path.join(state_dir, "link.ready"),
                   os.path.join(state_dir, "counters.json"), spec.events_file, queue, spec.emulator_options)


def _config(spec: TestbedSpec, link, a: tuple[str, str], b: tuple[str, str], seed: int, ready_file: str,
            counters_file: str, events_file: str | None, queue: dict, options: dict) -> dict:
    """One emulator process's configuration (docs/emulator.md), in the file's key order."""
    return {
        **options,
        "a": {"netns": a[0], "tun": a[1]},
        "b": {"netns": b[0], "tun": b[1]},
        "seed": seed,
        "realtime": spec.realtime,
        "ready_file": ready_file,
        "counters_file": counters_file,
        "events_file": events_file,
        **queue,
        "mtu": spec.mtu_bytes,
        "a_to_b": link.a_to_b.settings(),
        "b_to_a": link.b_to_a.settings(),
    }


def read_queue_trace(path: str):
    """The emulator's queue-length trace (``queue_file``) as ``link_queue`` record columns
    (direction, time_s on the link's clock, packets, bytes); empty columns when it is missing."""
    import numpy as np

    try:
        rows = np.genfromtxt(path, delimiter=",", skip_header=1, dtype=None, encoding="ascii",
                             names=("time_s", "direction", "packets", "bytes"), ndmin=1)
    except (OSError, ValueError):
        rows = None
    if rows is None or rows.size == 0:
        return {"direction": [], "time_s": [], "packets": [], "bytes": []}
    return {"direction": [str(d) for d in rows["direction"]], "time_s": rows["time_s"].astype(float),
            "packets": rows["packets"].astype(np.int64), "bytes": rows["bytes"].astype(np.int64)}


def access_seed(spec: TestbedSpec, index: int) -> int:
    """The seed of the ``index``-th host's access link: its own, else one of the run's."""
    hs = spec.hosts[index]
    return hs.access_seed if hs.access_seed is not None else (spec.seed + 1 + index) % 2**63


def testbed_config(spec: TestbedSpec, a: tuple[str, str], b: tuple[str, str],
                   access: dict[str, tuple[tuple[str, str], tuple[str, str]]], state_dir: str) -> dict:
    """The configuration of the one emulator of a testbed: ``spec``'s bottleneck between ``a``
    and ``b`` ((netns, tun) pairs) and, by host name, each access link between the host's end
    and its router's (``spec.hosts[i].access``; ``a`` = the host). Without access links it is
    :func:`emulator_config`'s single-link file; with them a ``links`` file, the bottleneck first
    (named ``BOTTLENECK``: its events, its queue trace), then ``access-<host>`` in host order,
    each with its own seed (:func:`access_seed`)."""
    single = emulator_config(spec, a, b, state_dir)
    if not access:
        return single
    bottleneck = {"name": BOTTLENECK, "a": single["a"], "b": single["b"], "seed": single["seed"],
                  "events_file": single["events_file"], "a_to_b": single["a_to_b"], "b_to_a": single["b_to_a"]}
    if spec.queue_file:
        bottleneck["queue_file"] = spec.queue_file
    links = [bottleneck]
    for index, hs in enumerate(spec.hosts):
        if hs.name not in access:
            continue
        host, router = access[hs.name]
        links.append({"name": access_link_name(hs.name), "a": {"netns": host[0], "tun": host[1]},
                      "b": {"netns": router[0], "tun": router[1]}, "seed": access_seed(spec, index),
                      "a_to_b": hs.access.a_to_b.settings(), "b_to_a": hs.access.b_to_a.settings()})
    process = {k: v for k, v in single.items() if k not in ("a", "b", "events_file", "queue_file", "a_to_b", "b_to_a")}
    return {**process, "links": links}


class LinkProcess:
    """A running ``tcpdelay-link``; :meth:`stop` ends it and returns its final counters."""

    def __init__(self, config: dict, state_dir: str, binary: str | None = None, ready_timeout_s: float = 15.0,
                 *, name: str = "link", wait: bool = True):
        self.config = config
        self.binary = binary or find_binary()
        self.config_path = os.path.join(state_dir, f"{name}.json")
        self.log_path = os.path.join(state_dir, f"{name}.log")
        self.counters_path = config["counters_file"]
        with open(self.config_path, "w") as f:
            json.dump(config, f, indent=2)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [self.binary, "--config", self.config_path],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C reaches us; we stop the emulator ourselves
        )
        self.pid = self.proc.pid
        self.final_counters: dict | None = None
        self._stopping = False
        self.ready_timeout_s = ready_timeout_s
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Return once the emulator runs (its ready file exists); stop it and raise if it died or
        took longer than ``ready_timeout_s`` (several started at once are waited for in turn)."""
        try:
            self._wait_ready(self.config["ready_file"], self.ready_timeout_s)
        except BaseException:
            self.stop()
            raise

    def log_tail(self, lines: int = 8) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return " | ".join(x.strip() for x in f.read().splitlines()[-lines:] if x.strip())
        except OSError:
            return ""

    def _wait_ready(self, ready_file: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(ready_file):
            code = self.proc.poll()
            if code is not None:
                raise nsutil.CommandFailed(f"{BINARY} exited with status {code} before it was ready: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise nsutil.CommandFailed(f"{BINARY} was not ready after {timeout_s:g} s: {self.log_tail()}")
            time.sleep(0.005)

    def counters(self, timeout_s: float = 2.0) -> dict:
        """Ask for the counters now (SIGUSR1) and return them once the file is rewritten."""
        if self.proc.poll() is not None:
            if self.final_counters is None:
                self.final_counters = self._read_counters()
            return self.final_counters or {}
        before = _content(self.counters_path)
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if _content(self.counters_path) != before:  # counters carry elapsed_s: always new
                got = self._read_counters()
                if got is not None:
                    return got
            time.sleep(0.002)
        raise nsutil.CommandFailed(f"{BINARY} did not write {self.counters_path} within {timeout_s:g} s")

    def _read_counters(self) -> dict | None:
        try:
            with open(self.counters_path) as f:
                return json.load(f)
        except (OSError, json.JSONDecodeError):
            return None

    def died(self) -> str | None:
        """How the emulator ended ("killed by SIGKILL", "exited with status 1") if it ended
        before :meth:`stop`; ``None`` while it runs or once stopped by us."""
        if self._stopping:
            return None
        code = self.proc.poll()
        return None if code is None else nsutil.describe_wait_status(code)

    def cpu_s(self) -> float | None:
        """User + system CPU seconds the emulator has used so far."""
        return nsutil.process_cpu_s(self.pid)

    def stop(self, timeout_s: float = 5.0) -> dict | None:
        """SIGTERM (the emulator flushes its files and writes its counters), SIGKILL after ``timeout_s``."""
        self._stopping = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self.final_counters is None:
            self.final_counters = self._read_counters()
        return self.final_counters


def _content(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None

"""Run identity, run state on disk, and removal of what a run left behind.

Every testbed run has a random 6-hex-digit run id. Its namespaces are named
``td-<id>-<host>``, its interfaces ``td<id>...`` (at most 15 characters), its files live in
``/run/tcpdelay/<id>/`` with a ``state.json`` naming the owner process (pid and start time, so
a recycled pid is not mistaken for it) and every process the run started (pid and start time).
:func:`clean` finds runs by these names and removes the ones whose owner is gone: the processes
the run recorded and those inside its namespaces, the emulator, the namespaces (and with them
every device), stray root-namespace links, and the state directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field

from tcpdelay.testbed import netns as nsutil

STATE_ROOT = "/run/tcpdelay"
NETNS_PREFIX = "td-"
RUN_ID_RE = re.compile(r"^[0-9a-f]{6}$")
NETNS_RE = re.compile(r"^td-([0-9a-f]{6})-([a-z0-9]+)$")
LINK_RE = re.compile(r"^td([0-9a-f]{6})")


def new_run_id() -> str:
    """A fresh run id not used by any namespace or state directory on this machine."""
    taken = set(find_runs())
    while True:
        rid = secrets.token_hex(3)
        if rid not in taken:
            return rid


def state_dir(run_id: str) -> str:
    return os.path.join(STATE_ROOT, run_id)


#: The testbed spec a run was built from, beside its state.json (written once).
SPEC_FILE = "spec.json"


def write_state(run_id: str, state: dict) -> None:
    """Write ``state.json`` atomically (a reader never sees half a file)."""
    write_state_file(run_id, "state.json", state)


def write_state_file(run_id: str, name: str, doc: dict) -> None:
    """Write ``name`` (JSON) in the run's state directory atomically."""
    d = state_dir(run_id)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{name}.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, os.path.join(d, name))


def read_state(run_id: str) -> dict | None:
    try:
        with open(os.path.join(state_dir(run_id), "state.json")) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def owner_record(pid: int | None = None) -> dict:
    pid = os.getpid() if pid is None else pid
    return {"owner_pid": pid, "owner_start_ticks": nsutil.process_start_ticks(pid)}


def process_record(pid: int) -> dict:
    """A process a run started, as state.json keeps it (pid and start time)."""
    return {"pid": pid, "start_ticks": nsutil.process_start_ticks(pid)}


def recorded_processes(state: dict | None) -> list[int]:
    """The processes state.json records that still run (same pid and same start time)."""
    out = []
    for rec in (state or {}).get("processes", []):
        pid = int(rec.get("pid") or 0)
        if pid > 0 and nsutil.process_alive(pid) and nsutil.process_start_ticks(pid) == rec.get("start_ticks"):
            out.append(pid)
    return out


def owner_alive(state: dict | None) -> bool:
    """Whether the process that owns a run still runs (same pid and same start time)."""
    if not state or not state.get("owner_pid"):
        return False
    pid = int(state["owner_pid"])
    return nsutil.process_alive(pid) and nsutil.process_start_ticks(pid) == state.get("owner_start_ticks")


@dataclass
class RunInfo:
    run_id: str
    namespaces: list[str] = field(default_factory=list)
    state: dict | None = None

    @property
    def alive(self) -> bool:
        return owner_alive(self.state)

    def summary(self) -> dict:
        s = self.state or {}
        return {
            "run_id": self.run_id,
            "owner_pid": s.get("owner_pid"),
            "owner_alive": self.alive,
            "created_unix": s.get("created_unix"),
            "topology": s.get("topology"),
            "emulator_pid": s.get("emulator_pid"),
            "namespaces": self.namespaces,
            "hosts": s.get("hosts", {}),
            "state_dir": state_dir(self.run_id),
        }


def find_runs() -> dict[str, RunInfo]:
    """Every run that has a namespace or a state directory on this machine."""
    runs: dict[str, RunInfo] = {}
    for ns in nsutil.list_netns():
        m = NETNS_RE.match(ns)
        if m:
            runs.setdefault(m.group(1), RunInfo(m.group(1))).namespaces.append(ns)
    with contextlib.suppress(FileNotFoundError):
        for entry in os.listdir(STATE_ROOT):
            if RUN_ID_RE.match(entry):
                runs.setdefault(entry, RunInfo(entry))
    for rid, info in runs.items():
        info.state = read_state(rid)
    return dict(sorted(runs.items()))


def _pids_mentioning(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (e.g. a run's state directory)."""
    me, out = os.getpid(), []
    needle = text.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if needle in f.read():
                    out.append(int(entry))
        except OSError:
            continue
    return out


def _root_links(run_id: str) -> list[str]:
    try:
        links = nsutil.ip("link", "show", json_out=True)
    except (nsutil.CommandFailed, json.JSONDecodeError):
        return []
    return [link["ifname"] for link in links if link.get("ifname", "").startswith(f"td{run_id}")]


def remove_run(run_id: str, namespaces: list[str] | None = None, exclude_pids: set[int] = frozenset()) -> dict:
    """Remove everything run ``run_id`` created; return what was removed (counts)."""
    if namespaces is None:
        namespaces = [ns for ns in nsutil.list_netns() if ns.startswith(f"{NETNS_PREFIX}{run_id}-")]
    sdir = state_dir(run_id)
    spared = set(exclude_pids) | {os.getpid()}
    # The emulator (its --config lives in the state directory), every process the run recorded
    # (it may have left the namespaces), then whatever is inside them -- again until none is
    # left, as a process can start another while the first ones are being ended.
    pids = set(_pids_mentioning(sdir + "/")) | set(recorded_processes(read_state(run_id)))
    ended: set[int] = set()
    for _ in range(5):
        for ns in namespaces:
            pids.update(nsutil.pids_in_netns(ns))
        pids = {p for p in pids - spared if nsutil.process_alive(p)}
        if not pids:
            break
        nsutil.terminate_pids(sorted(pids), grace_s=1.0)
        ended |= pids
        pids = set()
    pids = ended
    removed_ns = 0
    for ns in namespaces:
        nsutil.delete_netns(ns)
        removed_ns += not os.path.exists(nsutil.netns_path(ns))
    links = _root_links(run_id)
    for name in links:
        nsutil.ip("link", "delete", name, check=False)
    shutil.rmtree(sdir, ignore_errors=True)
    return {"run_id": run_id, "processes": len(pids), "namespaces": removed_ns, "links": len(links)}


def clean(*, include_live: bool = False, run_ids: list[str] | None = None) -> dict:
    """Remove leftovers of every run whose owner is gone (all runs with ``include_live``).

    Returns ``{"removed": [per-run counts], "kept_live": [run ids], "congestion_controls":
    [names of our BPF congestion controls left registered by nothing, now unregistered]}``.
    """
    removed, kept = [], []
    runs = find_runs()
    for rid, info in runs.items():
        if run_ids is not None and rid not in run_ids:
            continue
        if info.alive and not include_live:
            kept.append(rid)
            continue
        removed.append(remove_run(rid, info.namespaces))
    return {"removed": removed, "kept_live": kept, "congestion_controls": _clean_congestion_controls()}


def _clean_congestion_controls() -> list[str]:
    """Our BPF congestion controls that nothing holds any more (a legacy registration), unregistered."""
    import shutil

    if shutil.which("bpftool") is None:
        return []
    from tcpdelay.testbed.bpf_cc import clean_leftovers

    return clean_leftovers()


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while nsutil.process_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True

"""Loading tcpdelay's BPF congestion controls into the kernel, and removing what is left of them.

Each algorithm instance is held by one ``tcpdelay-cc-load`` process (``bpf/loader/``): it
registers the program through a BPF link, so the kernel unregisters it when that process
exits, however it exits. The process is our child, its stdin a pipe only we hold, and it has
``PR_SET_PDEATHSIG``: when we exit or are killed, it goes, and the algorithm with it.
Registrations made another way (``bpftool struct_ops register``, which outlives its process)
are *leftovers*: :func:`clean_leftovers` removes those whose name starts with :data:`PREFIX`
(``tcpdelay testbed clean`` calls it). docs/congestion-control.md, "Loading and clean-up".
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Mapping

from tcpdelay.testbed.congestion import PREFIX
from tcpdelay.testbed.emulator import REPO_ROOT
from tcpdelay.errors import TestbedError

LOADER = "tcpdelay-cc-load"

__all__ = ["LOADER", "PREFIX", "LoadedCC", "Loader", "bpf_dir", "clean_leftovers", "kernel_algorithms",
           "leftovers", "load", "object_path"]


def bpf_dir() -> Path:
    """Where the built programs and the loader are: ``$TCPDELAY_BPF_DIR``, else this checkout's
    ``bpf/build``."""
    env = os.environ.get("TCPDELAY_BPF_DIR")
    return Path(env) if env else REPO_ROOT / "bpf" / "build"


def object_path(variant: str) -> Path:
    """The built program ``bpf/build/<variant>.bpf.o``; TestbedError when it is not built."""
    path = bpf_dir() / f"{variant}.bpf.o"
    if not path.is_file():
        raise TestbedError(f"the BPF congestion control {variant!r} is not built ({path}): run `make`")
    return path


def kernel_algorithms() -> list[str]:
    """The congestion controls registered now (``tcp_available_congestion_control``)."""
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


class LoadedCC:
    """One instance registered for as long as this object is open (:meth:`close`)."""

    def __init__(self, variant: str, kernel_name: str, values: dict[str, int], proc: subprocess.Popen, info: dict):
        self.variant = variant
        self.kernel_name = kernel_name
        self.values = values
        self.map_id: int = info["map_id"]
        self.link_id: int = info["link_id"]
        self.state_map_id: int | None = info.get("state_map_id")
        self._proc = proc

    @property
    def pid(self) -> int:
        return self._proc.pid

    def close(self, timeout_s: float = 5.0) -> None:
        """Let go: the loader exits and the kernel unregisters the algorithm."""
        proc = self._proc
        if proc.poll() is None:
            try:
                proc.stdin.close()
                proc.wait(timeout_s)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()

    def __enter__(self) -> "LoadedCC":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load(variant: str, kernel_name: str, values: Mapping[str, int] | None = None, *,
         timeout_s: float = 10.0) -> LoadedCC:
    """Register ``bpf/build/<variant>.bpf.o`` as ``kernel_name`` with its ``param_*`` globals set
    to ``values``; TestbedError (the loader's one line) when it cannot."""
    obj = object_path(variant)
    loader = bpf_dir() / LOADER
    if not os.access(loader, os.X_OK):
        raise TestbedError(f"the BPF loader is not built ({loader}): run `make`")
    vals = {k: int(v) for k, v in (values or {}).items()}
    cmd = [str(loader), str(obj), kernel_name, *(f"{k}={v}" for k, v in vals.items())]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else b""
    if not line:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        err = proc.stderr.read().decode(errors="replace").strip().splitlines()
        raise TestbedError(err[-1] if err else f"{LOADER} gave no answer for {kernel_name!r} in {timeout_s:g} s")
    proc.stdout.close()
    return LoadedCC(variant, kernel_name, vals, proc, json.loads(line))


class Loader:
    """Several instances for the life of a ``with`` block (closed on exit, on errors too)."""

    def __init__(self) -> None:
        self.loaded: list[LoadedCC] = []

    def load(self, variant: str, kernel_name: str, values: Mapping[str, int] | None = None, *,
             timeout_s: float = 10.0) -> LoadedCC:
        cc = load(variant, kernel_name, values, timeout_s=timeout_s)
        self.loaded.append(cc)
        return cc

    def close(self) -> None:
        while self.loaded:
            self.loaded.pop().close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _bpftool(*args: str, as_json: bool = True):
    tool = shutil.which("bpftool")
    if tool is None:
        raise TestbedError("bpftool is not installed (Debian: apt-get install bpftool)")
    out = subprocess.run([tool, *(["-j"] if as_json else []), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise TestbedError(f"bpftool {' '.join(args)}: {out.stderr.strip() or out.stdout.strip()}")
    return json.loads(out.stdout or "[]") if as_json else out.stdout


def _live_loader_names() -> set[str]:
    """Kernel names held by a running tcpdelay-cc-load (its second argument)."""
    names = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) > 2 and argv[0].endswith(LOADER.encode()):
            names.add(argv[2].decode(errors="replace"))
    return names


def _registered_name(map_id: int) -> str | None:
    """The kernel name of a tcp_congestion_ops struct_ops map (its ops' ``name`` field)."""
    text = _bpftool("struct_ops", "dump", "id", str(map_id), as_json=False)
    # the map's info comes first (its own "name"), the ops' data last
    names = re.findall(r'"name":\s*"([^"]*)"', text)
    return names[-1] if len(names) > 1 else None


def leftovers() -> list[dict]:
    """Our congestion controls registered but held by no running loader (e.g. a legacy
    ``bpftool struct_ops register``, which outlives its process): ``[{"id", "name"}]`` of the
    registered tcp_congestion_ops whose kernel name starts with :data:`PREFIX` (an unregistered
    map still listed until the kernel frees it is not one)."""
    live = _live_loader_names()
    registered = {n for n in kernel_algorithms() if n.startswith(PREFIX)} - live
    out = []
    if not registered:
        return out
    for m in _bpftool("struct_ops", "show"):
        if m.get("kernel_struct_ops") != "tcp_congestion_ops":
            continue
        try:
            name = _registered_name(m["id"])
        except TestbedError:  # gone meanwhile (an unregistered map lingers until freed)
            continue
        if name in registered:
            out.append({"id": m["id"], "name": name})
    return out


def clean_leftovers() -> list[str]:
    """Unregister every leftover (by id); returns their names."""
    gone = []
    for m in leftovers():
        subprocess.run(["bpftool", "struct_ops", "unregister", "id", str(m["id"])], capture_output=True)
        deadline = time.monotonic() + 2.0
        while m["name"] in kernel_algorithms() and time.monotonic() < deadline:
            time.sleep(0.02)
        gone.append(m["name"])
    return gone

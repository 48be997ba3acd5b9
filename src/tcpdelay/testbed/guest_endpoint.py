"""A media flow's sender or receiver run on a reference-kernel guest (:mod:`tcpdelay.testbed.guest`).

On a namespace host a flow end is a forked process (:meth:`Host.spawn`); on a guest it is the
same function — :func:`tcpdelay.testbed.grouped_endpoints.media_sender` or ``media_receiver``,
so the same records and the same result — run by this machine's Python on the guest's kernel
(``chroot /host``: :meth:`Guest.exec_host`). The two sides talk through files in the run
directory, which the guest mounts writable at its own path (``attach_guest(rw_dir=...)``):

- ``<base>.job`` (this machine writes it): what to run, pickled;
- ``<base>.ready`` (the guest): its pid, once Python and the flow's modules are loaded (~11 s under
  TCG: a run's start instant is set only after every guest end is ready);
- ``<base>.go`` (this machine, senders only): the start instant on the guest's clock;
- ``<base>.result`` (the guest): the function's result or its error, pickled;
- ``<base>.log``: the guest program's output.

The guest's program is started in the background (the command server answers at once) and
stopped with SIGINT through the command server, as Ctrl-C stops a process of its own. Every
time it records is on the guest's CLOCK_MONOTONIC: the run moves them onto this machine's
(:func:`tcpdelay.testbed.guest_clock.GuestClock`).
"""

from __future__ import annotations

import json
import os
import pickle
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tcpdelay.errors import TestbedError
from tcpdelay.testbed.testbed import RemoteError

#: How often each side looks for the other's file (s).
POLL_S = 0.02
#: How often the run asks a guest whether its end still runs (s).
ALIVE_EVERY_S = 5.0
#: How long a guest end may take to load (s): ~11 s idle under TCG, more on a busy machine.
READY_TIMEOUT_S = 180.0


class GuestEndpoint:
    """One flow end running on a guest, shaped as a :class:`~tcpdelay.testbed.testbed.CallHandle`
    for the run path (``result``, ``died``), plus :meth:`interrupt` and, for a sender,
    :meth:`go`."""

    def __init__(self, guest, base: Path, what: str):
        self.guest, self.base, self.what = guest, base, what
        self.pid: int | None = None          # in the guest, once ready
        self._done, self._value, self._error = False, None, None
        self._next_look = 0.0
        self._died: str | None = None        # once found, kept (the run asks again)

    def _file(self, suffix: str) -> Path:
        return self.base.with_name(self.base.name + suffix)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._file(".ready").exists():
            if self._file(".result").exists():
                self.result(0.0)      # it failed while loading: its error
            if time.monotonic() > deadline:
                raise TestbedError(f"{self.what} on the guest of {self.guest.host.name} was not ready in "
                                   f"{timeout_s:g} s: {_tail(self._file('.log'))}")
            time.sleep(POLL_S)
        self.pid = int(json.loads(self._file(".ready").read_text())["pid"])

    def go(self, start_at_guest_s: float) -> None:
        """Let a sender start: its first packet at ``start_at_guest_s`` (the guest's clock)."""
        _write_atomic(self._file(".go"), json.dumps({"start_at": start_at_guest_s}).encode())

    def result(self, timeout_s: float | None = None) -> Any:
        if not self._done:
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            path = self._file(".result")
            while not path.exists():
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"{self.what} did not finish within {timeout_s:g} s")
                time.sleep(POLL_S)
            ok, payload = pickle.loads(path.read_bytes())
            self._done = True
            if ok:
                self._value = payload
            else:
                self._error = RemoteError(f"{self.what} raised: {payload}")
        if self._error is not None:
            raise self._error
        return self._value

    def died(self) -> str | None:
        """How the program ended without a result (its guest gone, or it exited), else None."""
        if self._died is not None:
            return self._died
        if self._done or self._file(".result").exists():
            return None
        if self.guest.proc.poll() is not None:
            self._died = "lost its guest (QEMU exited)"
            return self._died
        if self.pid is None or time.monotonic() < self._next_look:
            return None
        # asked of the guest at most every ALIVE_EVERY_S: each look runs a shell on the guest's one
        # emulated CPU, beside the sender it is measuring
        self._next_look = time.monotonic() + ALIVE_EVERY_S
        # (a zombie counts as gone: the guest's init, a shell, reaps its orphans only now and then)
        alive = self.guest.exec(f"[ -e /proc/{self.pid} ] && ! grep -q '^State:[[:space:]]*Z' /proc/{self.pid}/status",
                                check=False).returncode == 0
        if alive or self._file(".result").exists():
            return None
        self._died = f"exited on the guest without a result: {_tail(self._file('.log'))}"
        return self._died

    def interrupt(self) -> None:
        """SIGINT, as Ctrl-C: the program writes its last records and its result."""
        if self.pid is not None and self.guest.proc.poll() is None:
            try:
                self.guest.exec(f"kill -INT {self.pid}", check=False, timeout_s=10.0)
            except TestbedError:
                pass


def start(guest, base: Path, kind: str, what: str, *args) -> GuestEndpoint:
    """Start ``kind`` (``sender``: ``config, source, realtime``; ``receiver``: ``config,
    realtime``) on ``guest``, its files at ``base`` (inside the guest's writable directory)."""
    if guest.rw_dir is None or not str(base).startswith(guest.rw_dir.rstrip("/") + "/"):
        raise TestbedError(f"{what}: {base} is outside the directory the guest of {guest.host.name} may write")
    if kind not in ("sender", "receiver"):
        raise ValueError(f"kind {kind!r}: sender or receiver")
    base.parent.mkdir(parents=True, exist_ok=True)
    for suffix in (".ready", ".go", ".result"):
        base.with_name(base.name + suffix).unlink(missing_ok=True)
    _write_atomic(base.with_name(base.name + ".job"), pickle.dumps((kind, args)))
    log = shlex.quote(str(base) + ".log")
    cmd = f"{shlex.quote(sys.executable)} -m tcpdelay.testbed.guest_endpoint {shlex.quote(str(base))}"
    guest.exec_host(f"{cmd} >{log} 2>&1 &", timeout_s=30.0)
    return GuestEndpoint(guest, base, what)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _tail(path: Path, n: int = 300) -> str:
    try:
        return " ".join(path.read_text(errors="replace")[-n:].split())
    except OSError:
        return "(no output)"


def main(argv: list[str]) -> int:
    """The guest's side: run the job at ``argv[1]`` (see the module doc)."""
    # a program started with `&` by a non-interactive shell ignores SIGINT: take it back
    signal.signal(signal.SIGINT, signal.default_int_handler)
    base = Path(argv[1])
    f = lambda suffix: base.with_name(base.name + suffix)  # noqa: E731
    try:
        kind, args = pickle.loads(f(".job").read_bytes())
        from tcpdelay.testbed.grouped_endpoints import media_receiver, media_sender

        _write_atomic(f(".ready"), json.dumps({"pid": os.getpid()}).encode())
        if kind == "sender":
            config, source, realtime = args
            while not f(".go").exists():
                time.sleep(POLL_S)
            start_at = float(json.loads(f(".go").read_text())["start_at"])
            out = (True, media_sender(config, source, start_at, realtime))
        else:
            config, realtime = args
            out = (True, media_receiver(config, realtime))
    except BaseException as err:  # noqa: BLE001 - everything goes back to the run
        import traceback

        out = (False, f"{type(err).__name__}: {err}\n{traceback.format_exc()}")
    try:
        data = pickle.dumps(out)
    except Exception as err:  # noqa: BLE001
        data = pickle.dumps((False, f"result is not picklable: {err}"))
    _write_atomic(f(".result"), data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The process that holds a testbed started by ``tcpdelay testbed up`` until ``down``.

Run as ``python -m tcpdelay.testbed.supervisor`` with a :class:`TestbedSpec` as JSON on stdin.
It builds the testbed, prints one JSON line on stdout (``{"ok": true, "testbed": {...}}`` or
``{"ok": false, "error": "..."}``), closes stdout and waits; SIGTERM or SIGINT tears the testbed
down. It owns the run (``state.json``), so ``tcpdelay testbed clean`` leaves it alone while it
lives, and the emulator (which dies with its parent) lives exactly as long.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from tcpdelay.errors import TcpdelayError
from tcpdelay.testbed.spec import parse_spec
from tcpdelay.testbed.testbed import Testbed


def _reply(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)


def main() -> int:
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        data = json.loads(sys.stdin.read())
        # Reference-kernel guests (`testbed up --host-kernel`): tcpdelay.testbed.guest.
        guests = data.pop("guests", None) if isinstance(data, dict) else None
        spec = parse_spec(data)
        tb = Testbed(spec).open()
        if guests:
            from tcpdelay.testbed.guest import attach_guests

            try:
                attach_guests(tb, guests)
            except BaseException:
                tb.close()
                raise
    except TcpdelayError as err:
        _reply({"ok": False, "error": str(err)})
        return 2
    except Exception as err:  # noqa: BLE001 - reported as one line to `up`
        _reply({"ok": False, "error": f"{type(err).__name__}: {err}"})
        return 1
    try:
        described = tb.describe()
        if getattr(tb, "guests", None):
            described["guests"] = {name: g.describe() for name, g in tb.guests.items()}
        _reply({"ok": True, "testbed": described})
        while not stop["now"]:
            signal.pause()
    finally:
        tb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

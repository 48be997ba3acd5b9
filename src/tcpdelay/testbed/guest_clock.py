"""The clock offset between a reference-kernel guest and this machine, and its error.

A guest (:mod:`tcpdelay.testbed.guest`) boots its own kernel, so its CLOCK_MONOTONIC — the clock
tcpdelay stamps packets with (:mod:`tcpdelay.transport.clock`) — starts at its own boot and runs
on an emulated timer: a one-way delay between a guest and a namespace is only as good as an
estimate of the offset between the two clocks. The guest runs ``tdclock`` (``guest_clock.c``,
built statically here and put in its initramfs), which answers a UDP probe with its clock's
readings; :func:`measure_offset` sends probes from the host's namespace (one forwarding hop, no
emulated link) and keeps the exchange with the shortest round trip, as NTP's clock filter does
(RFC 5905 §8 and §10):

- ``t1``, ``t4``: this machine's CLOCK_MONOTONIC when a probe is sent and when its answer reached
  the socket layer (the kernel's receive timestamp, SO_TIMESTAMPNS, moved from CLOCK_REALTIME to
  CLOCK_MONOTONIC);
- ``t2``, ``t3``: the guest's CLOCK_MONOTONIC when the probe reached its socket layer and when it
  answered;
- offset (guest minus host) ``((t2 - t1) + (t3 - t4)) / 2``, delay ``(t4 - t1) - (t3 - t2)``; the
  offset is within ``± delay / 2`` of the truth whatever the split of the delay between the two
  ways (each way takes at least 0 s), so that is its stated error.

A host time ``t`` is guest time ``t + offset_s``. The guest's timer is emulated (TCG), so the
offset drifts: measure it when it is used (``drift_ppm`` of two measurements says how fast).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
import struct
import subprocess
import time
from importlib import resources

from tcpdelay.errors import EnvironmentNotSupported, ParameterError, TestbedError
from tcpdelay.testbed import netns as nsutil

#: UDP port of the guest's ``tdclock``.
CLOCK_PORT = 7071
#: The error above which a guest's clock must not be used for one-way delays (seconds): a tenth
#: of the smallest delay the papers' paths have (10 ms), and twice the emulator's p99 timing error.
MAX_ERROR_S = 1e-3

_SOURCE = "guest_clock.c"
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_SCM_TIMESTAMPNS = _SO_TIMESTAMPNS


def source_text() -> str:
    return resources.files("tcpdelay.testbed").joinpath(_SOURCE).read_text()


def build_tdclock(cache_dir: str) -> str:
    """``tdclock`` compiled statically (``cc -static``) into ``cache_dir`` once per source; its path."""
    src = source_text()
    path = os.path.join(cache_dir, f"tdclock-{hashlib.sha256(src.encode()).hexdigest()[:12]}")
    if os.path.exists(path):
        return path
    os.makedirs(cache_dir, exist_ok=True)
    c_file = path + ".c"
    with open(c_file, "w") as f:
        f.write(src)
    tmp = path + f".tmp{os.getpid()}"
    try:
        proc = subprocess.run(["cc", "-static", "-O2", "-Wall", "-o", tmp, c_file], capture_output=True, text=True)
    except FileNotFoundError:
        raise EnvironmentNotSupported("reference-kernel guests need a C compiler (cc) for their clock server") from None
    if proc.returncode != 0:
        raise EnvironmentNotSupported(f"cc -static {c_file}: {proc.stderr.strip()[-300:]} "
                                      "(a static C library is needed: Debian's libc6-dev)")
    os.rename(tmp, path)
    return path


@dataclasses.dataclass(frozen=True)
class ClockOffset:
    """A guest's CLOCK_MONOTONIC minus this machine's, measured by :func:`measure_offset`."""

    offset_s: float          #: guest time = host time + offset_s
    error_s: float           #: the offset is within ± error_s (half the best exchange's delay)
    delay_s: float           #: the best exchange's round trip, the guest's turnaround taken out
    probes: int              #: probes sent
    answered: int            #: answers received
    measured_at_s: float     #: this machine's CLOCK_MONOTONIC at the best exchange

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def usable_for_delays(self, max_error_s: float = MAX_ERROR_S) -> bool:
        return self.error_s <= max_error_s


def drift_ppm(a: ClockOffset, b: ClockOffset) -> float:
    """How fast the offset moved between two measurements, in parts per million."""
    span = b.measured_at_s - a.measured_at_s
    if span <= 0:
        raise ParameterError("drift_ppm: the second measurement must be later than the first")
    return (b.offset_s - a.offset_s) / span * 1e6


@dataclasses.dataclass(frozen=True)
class GuestClock:
    """A guest's clock over a run: the offset measured at its start and at its end, taken as
    drifting linearly between them (the drift of an emulated timer is steady over a minute:
    ``benchmarks/guest_clock.py``). What moves guest times onto this machine's clock and says
    whether one-way delays across the guest boundary may be reported."""

    start: ClockOffset
    end: ClockOffset

    @property
    def error_s(self) -> float:
        """The larger of the two measurements' errors: a time moved is within it."""
        return max(self.start.error_s, self.end.error_s)

    def usable_for_delays(self, max_error_s: float = MAX_ERROR_S) -> bool:
        return self.error_s <= max_error_s

    def offset_at(self, host_s):
        """The offset (guest minus host, s) at this machine's instants ``host_s`` (array)."""
        import numpy as np

        a, b = self.start, self.end
        span = b.measured_at_s - a.measured_at_s
        slope = (b.offset_s - a.offset_s) / span if span > 0 else 0.0
        return a.offset_s + slope * (np.asarray(host_s, dtype=float) - a.measured_at_s)

    def to_host(self, guest_s):
        """This machine's instants of the guest's instants ``guest_s`` (array; NaN stays NaN)."""
        import numpy as np

        g = np.asarray(guest_s, dtype=float)
        first = g - self.start.offset_s            # the offset moves microseconds a minute:
        return g - self.offset_at(first)            # one step of the fixed point is exact enough

    def to_dict(self) -> dict:
        return {"start": self.start.to_dict(), "end": self.end.to_dict(), "error_s": self.error_s,
                "max_error_s": MAX_ERROR_S, "usable_for_delays": self.usable_for_delays(),
                "drift_ppm": drift_ppm(self.start, self.end) if self.end.measured_at_s > self.start.measured_at_s else 0.0}


def _receive_time_ns(sock: socket.socket) -> tuple[bytes, int]:
    """A datagram and when it reached the socket layer, on CLOCK_MONOTONIC (ns)."""
    data, ancdata, _, _ = sock.recvmsg(256, socket.CMSG_SPACE(16))
    r0, m, r1 = time.clock_gettime_ns(time.CLOCK_REALTIME), time.monotonic_ns(), time.clock_gettime_ns(time.CLOCK_REALTIME)
    t4 = m
    for level, kind, value in ancdata:
        if level == socket.SOL_SOCKET and kind == _SCM_TIMESTAMPNS and len(value) >= 16:
            sec, nsec = struct.unpack("qq", value[:16])
            t4 = sec * 1_000_000_000 + nsec - ((r0 + (r1 - r0) // 2) - m)
    return data, t4


def measure_offset(netns: str, address: str, *, probes: int = 64, gap_s: float = 0.005,
                   timeout_s: float = 0.5) -> ClockOffset:
    """Probe the guest at ``address`` (its ``tdclock``) from namespace ``netns``: ``probes``
    exchanges ``gap_s`` apart, each waiting up to ``timeout_s``; the best one gives the offset."""
    if probes < 1:
        raise ParameterError(f"probes: {probes!r} must be at least 1")
    with nsutil.entered(netns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    best = None
    answered = 0
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        sock.connect((address, CLOCK_PORT))
        for seq in range(probes):
            sock.settimeout(timeout_s)
            t1 = time.monotonic_ns()
            sock.send(struct.pack("<Q", seq))
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    data, t4 = _receive_time_ns(sock)
                except (socket.timeout, ConnectionRefusedError):
                    break
                if len(data) == 32 and struct.unpack("<Q", data[:8])[0] == seq:
                    t2, t3, _ = struct.unpack("<qqq", data[8:])
                    answered += 1
                    delay = (t4 - t1) - (t3 - t2)
                    if best is None or delay < best[0]:
                        best = (delay, ((t2 - t1) + (t3 - t4)) / 2, (t1 + t4) / 2)
                    break
                sock.settimeout(max(0.001, deadline - time.monotonic()))  # a late answer to an earlier probe
            time.sleep(gap_s)
    except OSError as err:
        raise TestbedError(f"guest {address}: its clock server did not answer ({err.strerror or err})") from None
    finally:
        sock.close()
    if best is None:
        raise TestbedError(f"guest {address}: its clock server answered none of {probes} probes on UDP port {CLOCK_PORT}")
    delay, offset, at = best
    return ClockOffset(offset_s=offset / 1e9, error_s=max(0, delay) / 2e9, delay_s=delay / 1e9, probes=probes,
                       answered=answered, measured_at_s=at / 1e9)

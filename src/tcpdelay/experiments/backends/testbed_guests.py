"""The testbed backend's reference-kernel hosts: a scenario's ``[host_kernel]``
(:mod:`tcpdelay.experiments.scenario.host_kernel`) makes the hosts of a side QEMU guests
(:mod:`tcpdelay.testbed.guest`), and the media flows' ends on them run on the guest's kernel
(:mod:`tcpdelay.testbed.guest_endpoint`).

A run with guests

1. boots one guest per host of the side once the testbed is up, each mounting the run directory
   writable at its own path, and records them in ``environment.json`` (``guests``: kernel,
   release, accelerator, the clock at boot);
2. starts the guests' ends first and waits until each has loaded (~11 s under TCG), then measures
   every guest's clock offset (:func:`tcpdelay.testbed.guest_clock.measure_offset`) and sets the
   run's start instant as for any run; a guest's sender is told its start on its own clock;
3. after the run measures the offsets again and moves every time a guest recorded onto this
   machine's clock (:class:`~tcpdelay.testbed.guest_clock.GuestClock`: linear between the two):
   ``sent.send_time_s`` and the ``received.send_time_s`` its packets carried, its senders'
   ``tcp_state``/``quic_state`` times, a guest receiver's ``received.recv_time_s``.

The run's clock is then ``offset-corrected`` (run.json ``clock_offset`` per guest: both offsets,
the error, the drift). When an offset's error exceeds :data:`~tcpdelay.testbed.guest_clock.MAX_ERROR_S`
the run's clock is ``unsynchronized`` instead: the metrics refuse one-way delays and report them
relative to the run's smallest (``delay_relative``), and ``clock_offset`` says why.

Cross traffic, pulled streams and a timed link (outages, a trace: timed from the emulator's
start, before the guests boot) are not run on guests: :func:`unsupported` names them.
"""

from __future__ import annotations

from pathlib import Path

from tcpdelay.experiments.backends.base import Unsupported
from tcpdelay.experiments.plan import RunPlan

#: run.json ``clock`` of a run whose guest times were moved onto this machine's clock.
OFFSET_CORRECTED = "offset-corrected"


def guest_host_names(plan: RunPlan) -> set[str]:
    """The plan's hosts that run as guests (none without ``host_kernel``)."""
    if not plan.host_kernel:
        return set()
    from tcpdelay.testbed.guest import guest_hosts

    return set(guest_hosts([(h["name"], h["side"]) for h in plan.hosts], plan.host_kernel.get("side", "left")))


def unsupported(plan: RunPlan) -> list[Unsupported]:
    """What of ``plan`` cannot run with its guests (nothing without ``host_kernel``)."""
    if not plan.host_kernel:
        return []
    from tcpdelay.testbed.guest import unavailable_reason

    out = []
    reason = unavailable_reason(plan.host_kernel["kernel"])
    if reason:
        out.append(Unsupported(f"host_kernel: {reason}", "hosts"))
    on_guest = guest_host_names(plan)
    out += [Unsupported("cross traffic on a reference-kernel host (only media flows' ends run on guests)",
                        f"cross {c.name!r}") for c in plan.cross if {c.client, c.server} & on_guest]
    out += [Unsupported("a pulled stream on a reference-kernel host (only media flows' ends run on guests)",
                        f"stream {s.name!r}") for s in plan.streams
            if {s.client, s.server} & on_guest]
    if plan.timed_link:
        out.append(Unsupported("a timed link (outages, a trace) with reference-kernel hosts: its schedule "
                               "starts before the guests boot", "link"))
    return out


def attach(tb, plan: RunPlan, rd: Path) -> dict:
    """Boot the plan's guests on open testbed ``tb``, each writing to run directory ``rd``."""
    if not plan.host_kernel:
        return {}
    from tcpdelay.testbed.guest import attach_guests

    return attach_guests(tb, plan.host_kernel, rw_dir=str(Path(rd).resolve()))


def start(tb, plan: RunPlan, rd: Path, guests: dict, handles: dict, sources: dict,
          sender_config, receiver_config) -> dict:
    """Start every media flow end on a guest (into ``handles`` by part key); returns them by key."""
    if not guests:
        return {}
    from tcpdelay.testbed import guest_endpoint

    started = {}
    rd = Path(rd).resolve()     # the guest's programs start in its / (a relative path would be there)
    base = rd / "guest"
    for m in plan.media:
        if m.receiver in guests:
            key = f"rx:{m.flow_id}"
            started[key] = guest_endpoint.start(guests[m.receiver], base / f"rx{m.flow_id}", "receiver",
                                                f"media receiver of flow {m.flow_id}",
                                                receiver_config(tb, plan, m, rd), tb.spec.realtime)
        if m.sender in guests:
            key = f"tx:{m.flow_id}"
            started[key] = guest_endpoint.start(guests[m.sender], base / f"tx{m.flow_id}", "sender",
                                                f"media sender of flow {m.flow_id}",
                                                sender_config(tb, plan, m, rd, on_guest=True),
                                                sources[m.flow_id], tb.spec.realtime)
    handles.update(started)
    return started


def wait_ready(on_guest: dict, guests: dict) -> dict:
    """Wait until every end on a guest has loaded, then measure each guest's clock offset;
    returns the offsets by host name."""
    for h in on_guest.values():
        h.wait_ready()
    return {name: g.measure_clock() for name, g in guests.items()}


#: What a guest's sender needs between being told its start and its first packet (s): reading
#: the start, connecting and offering its run (two round trips) on an emulated CPU. Without it
#: the first VoIP packet left 107 ms after the run's start under TCG.
START_MARGIN_S = 1.0


def start_margin_s(on_guest: dict) -> float:
    """The run's start margin for its guest ends (0 without guest senders)."""
    return START_MARGIN_S if any(k.startswith("tx:") for k in on_guest) else 0.0


def go(plan: RunPlan, on_guest: dict, clocks: dict, t0: float) -> None:
    """Tell each guest sender its start: ``t0`` plus its flow's offset, on its guest's clock."""
    for m in plan.media:
        h = on_guest.get(f"tx:{m.flow_id}")
        if h is not None:
            h.go(t0 + m.start_s + clocks[m.sender].offset_s)


def to_this_clock(plan: RunPlan, rd: Path, guests: dict, clocks: dict) -> tuple[str, dict] | None:
    """Move every time the guests recorded onto this machine's clock (see the module doc);
    returns the run's clock and its ``clock_offset`` (:func:`run_clock`), or None without guests."""
    if not guests:
        return None
    from tcpdelay.records import move_times
    from tcpdelay.testbed.guest_clock import GuestClock

    by_guest, moved = {}, {}
    for name, g in guests.items():
        gc = by_guest[name] = GuestClock(clocks[name], g.measure_clock())
        sent_by = [m.flow_id for m in plan.media if m.sender == name]
        received_by = [m.flow_id for m in plan.media if m.receiver == name]
        moves = [("sent", "send_time_s", sent_by), ("received", "send_time_s", sent_by),
                 ("tcp_state", "time_s", sent_by), ("quic_state", "time_s", sent_by),
                 ("received", "recv_time_s", received_by)]
        moved[name] = {f"{kind}.{col}": move_times(rd, kind, col, ids, gc.to_host) for kind, col, ids in moves if ids}
    clock, detail = run_clock(by_guest)
    for name, rows in moved.items():
        detail["guests"][name]["rows_moved"] = rows
    # a flow's own run.json says what its receiver saw (two kernels: "unsynchronized"); its
    # times are now on the run's clock
    from tcpdelay.records import read_run_metadata, write_run_metadata

    for m in plan.media:
        fd = Path(rd) / "flows" / str(m.flow_id)
        if (m.sender in guests or m.receiver in guests) and (fd / "run.json").is_file():
            write_run_metadata(fd, {**read_run_metadata(fd), "clock": clock, "clock_moved_by_run": True})
    return clock, detail


def run_clock(by_guest: dict) -> tuple[str, dict]:
    """The run's clock given each guest's :class:`~tcpdelay.testbed.guest_clock.GuestClock`:
    ``offset-corrected`` when every offset is known within ``MAX_ERROR_S``, else
    ``unsynchronized`` (one-way delays refused: the metrics report them relative to the run's
    smallest) with ``refused`` saying why; and run.json's ``clock_offset``."""
    from tcpdelay.testbed.guest_clock import MAX_ERROR_S

    detail: dict = {"guests": {name: gc.to_dict() for name, gc in by_guest.items()}, "max_error_s": MAX_ERROR_S}
    bad = {name: gc.error_s for name, gc in by_guest.items() if not gc.usable_for_delays()}
    if not bad:
        return OFFSET_CORRECTED, detail
    detail["refused"] = ("one-way delays across the guest boundary refused: the clock offset of "
                         + ", ".join(f"{n} is known only within {e * 1e3:.2f} ms" for n, e in sorted(bad.items()))
                         + f", past the {MAX_ERROR_S * 1e3:g} ms bound; delays are relative to the run's smallest")
    return "unsynchronized", detail

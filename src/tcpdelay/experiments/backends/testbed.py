"""The testbed backend: a run's plan on real Linux TCP in network namespaces, through the link
emulator (:class:`tcpdelay.testbed.Testbed`; root and /dev/net/tun).

It

1. builds the testbed from the plan's hosts and link, with the run's seed for the emulator's
   loss processes, and hands the environment (kernel, TCP settings read back from every host,
   the testbed's layout) to the record;
2. starts the media receivers, then the cross-traffic servers and sinks, then — each waiting
   for its own start offset after the run's start instant ``t0`` — the media senders
   (:func:`tcpdelay.transport.run_sender`) and the cross-traffic clients (one starter per kind,
   :data:`CROSS_STARTERS`); every flow's sender and receiver write their records into
   ``flows/<flow_id>/``, moved into the run's dataset every second and at the end;
3. waits, looking at the processes every :data:`WATCH_EVERY_S`: the emulator ending on its own,
   a process killed or raising, a media receiver without a summary, a media sender or receiver
   that did not run its course are lost parts (what still runs is interrupted: SIGINT, then a
   grace to write its last records). A sender's drain timeout is a measurement.

Timing: the emulator's clock starts when the testbed comes up. When the link's behaviour
depends on that clock (outages, a delivery trace), ``t0`` is the plan's ``lead_s`` later
(:data:`~tcpdelay.experiments.plan.LEAD_S`, longer for runs with many programs to start:
:meth:`TestbedBackend.lead_s`; measured with the emulator's own ``elapsed_s`` counter; the plan
shifted the outages by the same lead). Otherwise ``t0`` is fixed once every program is ready
(:mod:`tcpdelay.start_gate`: each media sender once its connections are open, each cross client
in its function, then :data:`READY_MARGIN_S` and a little per program; ends on a guest and HTTP
streams keep a margin fixed in advance). All hosts share CLOCK_MONOTONIC, so one-way delays are
exact.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.backends import testbed_guests as guest_ends, testbed_streams
from tcpdelay.experiments.backends.base import Backend, BackendJob, BackendOutcome, Unsupported, part_name
from tcpdelay.experiments.plan import CROSS_TCP_PORT, LEAD_S, CrossPlan, RunPlan
from tcpdelay.experiments.record import RecordMover, consolidate, machine_environment, receiver_summary
from tcpdelay.results import testbed_error
from tcpdelay.testbed import machine_load
from tcpdelay.start_gate import Instant, StartAt, StartGate, process_ended
from tcpdelay.traffic.source import PreparedSource
from tcpdelay.native.rawrecords import convert_leftovers

#: Seconds a media sender waits for its queues to drain after its last packet.
DRAIN_S = 5.0
#: CPU niceness of every cross-traffic endpoint (clients, servers, sinks). The hosts share this
#: machine's cores: cross traffic only loads the network, so it yields the CPU to the other
#: programs of the normal class (the run's own process; the media programs where they cannot
#: become real-time, docs/testbed.md).
CROSS_NICENESS = 10
#: Seconds between two looks at the run's processes while waiting (a lost part is noticed within this).
WATCH_EVERY_S = 0.5
#: Sender endings that mean the flow did not run its course (a drain timeout is a measurement:
#: the path could not deliver the queue in DRAIN_S).
_SENDER_LOST = ("interrupted", "receiver-disconnected", "connection-lost")


#: The most :func:`busy_factor` stretches a run's start margin.
MAX_BUSY_FACTOR = 5.0
#: Where the kernel keeps the CPU's pressure stall information (Linux 4.20+, PSI).
CPU_PRESSURE_FILE = "/proc/pressure/cpu"
#: The share of the last 10 s (percent) in which some task waited for a CPU from which the load
#: average counts in full in :func:`busy_factor`; below it, in proportion.
BUSY_PRESSURE_PCT = 25.0


def cpu_pressure_pct() -> float | None:
    """The share of the last 10 s, in percent, in which at least one runnable task waited for a
    CPU (PSI's ``some avg10``); None where the kernel does not say."""
    try:
        with open(CPU_PRESSURE_FILE) as f:
            for line in f:
                if line.startswith("some "):
                    return float(line.split("avg10=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        pass
    return None


def busy_factor() -> float:
    """How much longer than on an idle machine starting a run's programs may take now: the
    1-minute load average per CPU, between 1 and :data:`MAX_BUSY_FACTOR`, counted in full when
    tasks have been waiting for a CPU for :data:`BUSY_PRESSURE_PCT` of the last 10 s or more
    (:func:`cpu_pressure_pct`), in proportion below that. Every program must be up before the
    run's start instant ``t0`` (a sender that starts late sends its first packets late and in a
    burst), and on a machine with more runnable work than CPUs each start takes about that much
    longer (measured: four test workers and two busy loops on two cores, load 7-9, took runs
    0.5-3.4 s to start against margins of 0.5-2.6 s). The load average alone lags by a minute:
    the first runs after a busy spell (make test's second pass, one test at a time after four
    workers) waited up to five times too long; the pressure of the last 10 s says whether the
    machine is still busy. A later start costs a run only its wait, never a measurement."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 1.0
    factor = min(MAX_BUSY_FACTOR, max(1.0, load))
    pressure = cpu_pressure_pct()
    if pressure is None:
        return factor
    return 1.0 + (factor - 1.0) * min(1.0, pressure / BUSY_PRESSURE_PCT)


class TestbedBackend(Backend):
    """Runs a plan on the namespace testbed (see the module doc)."""

    __test__ = False   # not a pytest class, whatever its name
    name = "testbed"

    def check(self) -> None:
        from tcpdelay.testbed import require_testbed_environment
        from tcpdelay.testbed.emulator import find_binary

        require_testbed_environment()
        find_binary()
        from tcpdelay.testbed.grouped_endpoints import endpoints_mode

        if endpoints_mode(0) == "native":  # a bad TCPDELAY_MEDIA_ENDPOINTS: one line before any run
            from tcpdelay.native.engine import find_binary as endpoint_binary

            endpoint_binary()             # not built: one line before any run

    #: Start-up time per program a run starts (a media flow's sender and receiver, a cross flow's
    #: two ends): 80 flows took 11.2 s from the emulator's start to their last sender's start on
    #: this 2-core machine (papers/004 §4.2 on the testbed), past a fixed lead of 2 s.
    LEAD_PER_PROGRAM_S = 0.08

    def programs_lead_s(self, plan: RunPlan) -> float:
        """The lead an idle machine needs: :data:`LEAD_S`, or :attr:`LEAD_PER_PROGRAM_S` for each
        program the run starts when it starts many."""
        return max(LEAD_S, self.LEAD_PER_PROGRAM_S * 2 * (len(plan.media) + len(plan.cross)))

    def lead_s(self, plan: RunPlan) -> float:
        """A timed link's outage schedule starts with the emulator, before the hosts' programs:
        the flows start :meth:`programs_lead_s` after it, times :func:`busy_factor` on a busy
        machine (the schedule is fixed when the emulator starts, so the lead cannot stretch
        later)."""
        return self.programs_lead_s(plan) * busy_factor()

    def unsupported(self, plan: RunPlan) -> list[Unsupported]:
        """What of ``plan`` the testbed cannot set up: its hosts and link as a testbed (the
        spec's checks) and cross-traffic kinds without a starter; all of them."""
        out = []
        try:
            plan.testbed_spec(plan.seed)
        except ParameterError as err:
            out.append(Unsupported(str(err)))
        out += [Unsupported(f"kind {c.kind!r} has no starter on the testbed (one of "
                            f"{', '.join(sorted(CROSS_STARTERS))})", f"cross {c.name!r}")
                for c in plan.cross if c.kind not in CROSS_STARTERS]
        return out + guest_ends.unsupported(plan)

    def run(self, job: BackendJob) -> BackendOutcome:
        from tcpdelay.testbed import Testbed

        plan, rd = job.plan, job.run_dir
        spec = plan.testbed_spec(plan.seed)
        # the bottleneck's queue over time, as the link_queue records (read after the emulator ends)
        queue_csv = Path(rd).resolve() / "link_queue.csv"
        spec = spec.model_copy(update={"queue_file": str(queue_csv),
                                       "queue_sample_s": plan.tcp_state_period_s or 0.01})
        mover = RecordMover(rd)
        handles: dict[str, Any] = {}
        results: dict[str, Any] = {}
        started = time.time()
        prepared = testbed_streams.prepare(plan)     # the videos are made before the clock starts
        servers: list = []
        try:
            return self._run(job, spec, mover, handles, results, started, prepared, servers)
        finally:
            prepared.cleanup()

    def _run(self, job, spec, mover, handles, results, started, prepared, servers) -> BackendOutcome:
        from tcpdelay.testbed import Testbed

        plan, rd = job.plan, job.run_dir
        # Every media source's schedule, computed before the testbed starts (a source computes it
        # when first asked: the MPEG-4 TES source imports SciPy then; twenty senders doing that
        # at their start instant began seconds late, before it in the set-up, made it miss t0).
        sources = {m.flow_id: PreparedSource(m.source, m.stop_s - m.start_s, m.seed) for m in plan.media}
        with Testbed(spec) as tb:
            t_emu = _emulator_start(tb)
            guests = guest_ends.attach(tb, plan, rd)      # none without [host_kernel]
            job.on_environment(environment(tb, plan, guests))
            mover.start()
            try:
                # a guest's ends load for seconds (TCG): started first, the run's start waits for them
                on_guest = guest_ends.start(tb, plan, rd, guests, handles, sources,
                                            _sender_config, _receiver_config)
                clocks = guest_ends.wait_ready(on_guest, guests)
                t_recv = time.monotonic()
                _start_receivers(tb, plan, rd, handles)
                servers += testbed_streams.start_servers(tb, plan, rd, prepared)
                if starts_when_ready(plan, on_guest):
                    gate = StartGate()
                    _start_all(tb, plan, rd, _gate_instants(gate), handles, sources)
                    t0 = _open_when_ready(gate, plan, handles, t_emu)
                else:
                    if plan.timed_link:
                        t0 = t_emu + plan.lead_s  # the outage schedule / trace was set relative to this
                    else:
                        # Starting the senders is the same kind of work as starting the receivers was, so
                        # the time that took measures this machine now: a busy machine gets a later start
                        # rather than a failed run.
                        now = time.monotonic()
                        t0 = now + busy_factor() * (max(0.3 + 0.02 * (len(plan.media) + 2 * len(plan.cross)),
                                                        2 * (now - t_recv)) + guest_ends.start_margin_s(on_guest))
                    _start_all(tb, plan, rd, _fixed_instants(t0), handles, sources)
                    guest_ends.go(plan, on_guest, clocks, t0)
                    testbed_streams.start_clients(tb, plan, rd, t0, handles, prepared, servers)
                    if time.monotonic() > t0:
                        raise ParameterError(f"setting up the run took {time.monotonic() - t_emu:.2f} s, past its "
                                             f"start {t0 - t_emu:.2f} s after the emulator's; too many flows for this machine?")
                failures: dict[str, str] = {}
                load0 = machine_load.sample({"emulator": tb.emulator_pid})
                if _wait_all(handles, results, t0, plan.duration_s, job.on_progress,
                             watch=lambda: _dead_parts(tb, plan, handles, results), failures=failures):
                    # A part was lost: name it, stop what still runs (its records are kept), fail.
                    lost = _dead_parts(tb, plan, handles, results)
                    lost += [f"{part_name(k, plan)} failed: {e}" for k, e in failures.items()]
                    results.update(_interrupt({k: h for k, h in handles.items() if k not in results}))
                else:
                    lost = _lost_parts(tb, plan, results, failures)
                load = machine_load.between(load0, machine_load.sample({"emulator": tb.emulator_pid}))
                _merge_transfers(plan, results)
                for flow_id, served in testbed_streams.stop(servers).items():
                    results[f"httpd:{flow_id}"] = served
                try:
                    counters = tb.link_counters()
                    access = tb.access_counters()        # each host's access link, by host
                    if access:
                        counters = {**counters, "access": access}
                except Exception:  # noqa: BLE001 - the emulator is gone: the run failed already
                    if not lost:
                        raise
                    counters = None
            except BaseException:
                _interrupt({k: h for k, h in handles.items() if k not in results})
                testbed_streams.stop(servers)
                raise
            finally:
                mover.stop.set()
                mover.join()
                convert_leftovers(rd)   # raw records of a native endpoint whose group was killed
                consolidate(rd)
            clock = guest_ends.to_this_clock(plan, rd, guests, clocks)   # (None without guests)
        _queue_records(Path(spec.queue_file), rd)
        outcome = BackendOutcome(results=results, counters=counters, t0_monotonic_s=t0,
                                 link_start_monotonic_s=t_emu, started_unix_s=started, lost=lost,
                                 testbed_error=testbed_error.section(
                                     counters, {m.flow_id: (results.get(f"tx:{m.flow_id}"),
                                                            receiver_summary(results, m.flow_id)) for m in plan.media},
                                     load))
        if clock is not None:
            outcome.clock, outcome.clock_detail = clock
        return outcome


# --------------------------------------------------------------------------- the start instant

#: Seconds from the moment every program of a run is ready to its start instant ``t0``, and per
#: program: the programs wait on the gate and must each wake and go back to sleep until their
#: own start before ``t0`` (times :func:`busy_factor`).
READY_MARGIN_S = 0.1
READY_MARGIN_PER_PROGRAM_S = 0.005
#: The longest a run waits for its programs to be ready (times :func:`busy_factor`); past it the
#: run fails, naming how many were not.
READY_TIMEOUT_S = 30.0


def starts_when_ready(plan: RunPlan, on_guest: dict) -> bool:
    """Whether a run's start instant is fixed once its programs are ready
    (:mod:`tcpdelay.start_gate`) rather than by a margin fixed in advance: every run but those
    whose start is tied to something else — a timed link (its schedule starts with the
    emulator), ends on a guest (told their start through their share, with its own margin) and
    HTTP streams (the player starts through nginx's host)."""
    return not plan.timed_link and not on_guest and not plan.streams


def _fixed_instants(t0: float) -> Callable[..., float]:
    """Programs' start instants when ``t0`` is fixed in advance: ``t0 + offset_s``."""
    return lambda offset_s, waits=True: t0 + offset_s


def _gate_instants(gate: StartGate) -> Callable[..., StartAt]:
    """Programs' start instants fixed by ``gate``: the run waits for those that ``waits``."""
    return lambda offset_s, waits=True: gate.at(offset_s) if waits else gate.later(offset_s)


def _open_when_ready(gate: StartGate, plan: RunPlan, handles: dict, t_emu: float) -> float:
    """Wait for every program given a start instant by ``gate`` to be ready, then open the gate
    at ``t0`` (returned) a short margin later. A program that ended before it was ready stops
    the wait (the run then names it lost); one not ready after :data:`READY_TIMEOUT_S` fails
    the run."""
    factor = busy_factor()
    pids = [h.pid for h in handles.values() if hasattr(h, "pid")]
    ready = gate.wait_ready(READY_TIMEOUT_S * factor, gone=lambda: any(process_ended(p) for p in pids))
    if not ready and not any(process_ended(p) for p in pids):
        raise ParameterError(f"{gate.expected - gate.ready} of the run's {gate.expected} programs were not "
                             f"ready {time.monotonic() - t_emu:.1f} s after the emulator's start; too many "
                             f"flows for this machine?")
    t0 = time.monotonic() + factor * (READY_MARGIN_S + READY_MARGIN_PER_PROGRAM_S * gate.expected)
    gate.open(t0)
    return t0


def _queue_records(csv: Path, rd) -> None:
    """The emulator's queue trace (written until it stopped) as the run's ``link_queue`` records
    (time on the link's clock, as ns-3's); the CSV goes once they are written."""
    from tcpdelay.records import write_part
    from tcpdelay.testbed.emulator import read_queue_trace

    if csv.exists():
        write_part(rd, "link_queue", read_queue_trace(str(csv)), writer_id="emulator")
        csv.unlink()


# --------------------------------------------------------------------------- in the hosts


def _media_sender(config, source, start_at: Instant, realtime: bool):
    from tcpdelay.testbed.grouped_endpoints import media_sender

    return media_sender(config, source, start_at, realtime)


def _media_receiver(config, realtime: bool):
    from tcpdelay.testbed.grouped_endpoints import media_receiver

    return media_receiver(config, realtime)


# --------------------------------------------------------------------------- setting up


def _emulator_start(tb) -> float:
    """The monotonic instant the emulator's clock started (its ``elapsed_s`` counter)."""
    try:
        before = time.monotonic()
        counters = tb.link_counters()
        after = time.monotonic()
        return (before + after) / 2 - float(counters["elapsed_s"])
    except Exception:  # noqa: BLE001 - no counters: the testbed just came up
        return time.monotonic()


def environment(tb, plan: RunPlan, guests: dict | None = None) -> dict:
    """The machine and the settings as read back from every host."""
    def read(path: str) -> str | None:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return None

    from tcpdelay.testbed.emulator import find_binary

    return {
        **machine_environment(),
        "tcp_available_congestion_control": read("/proc/sys/net/ipv4/tcp_available_congestion_control"),
        "tcp_allowed_congestion_control": read("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
        "tcp_congestion_control_default": read("/proc/sys/net/ipv4/tcp_congestion_control"),
        "emulator": find_binary(),
        "testbed": tb.describe(),
        "link": json.loads(tb.spec.link.model_dump_json()),
        "hosts_requested": plan.hosts,
        # a process per media flow end, or grouped (tcpdelay.testbed.grouped_endpoints), or
        # native (tcpdelay.native; the flows it does not serve yet, and why, beside it)
        **_media_endpoints(plan),
        # reference-kernel hosts: kernel, release, accelerator (kvm or tcg), clock at boot
        **({"guests": {name: g.describe() for name, g in guests.items()}} if guests else {}),
    }


def _grouped_media(plan: RunPlan) -> set[int]:
    """The media flows whose ends run grouped (one process for the senders, one for the
    receivers: :mod:`tcpdelay.testbed.grouped_endpoints`); QUIC flows keep a process each."""
    from tcpdelay.testbed.grouped_endpoints import endpoints_mode

    on_guest = guest_ends.guest_host_names(plan)
    ids = {m.flow_id for m in plan.media if m.flow.transport in ("tcp", "udp")
           and m.sender not in on_guest and m.receiver not in on_guest}
    return ids if ids and endpoints_mode(len(ids)) in ("grouped", "native") else set()


def _native_media(plan: RunPlan) -> dict[int, str | None]:
    """With ``TCPDELAY_MEDIA_ENDPOINTS=native``: every grouped media flow and None if the native
    endpoint serves it, else why not (it then runs grouped on the Python endpoints)."""
    from tcpdelay.native import supports
    from tcpdelay.testbed.grouped_endpoints import endpoints_mode

    grouped = _grouped_media(plan)
    if not grouped or endpoints_mode(len(grouped)) != "native":
        return {}
    return {m.flow_id: supports(m.flow.transport, m.flow.heuristics.connections, m.flow.heuristics.scheduler,
                                m.flow.heuristics.proactive_drop_s)
            for m in plan.media if m.flow_id in grouped}


def _media_endpoints(plan: RunPlan) -> dict:
    native = _native_media(plan)
    if not native:
        return {"media_endpoints": "grouped" if _grouped_media(plan) else "per-flow"}
    from tcpdelay.native.engine import find_binary as endpoint_binary

    python = {str(f): why for f, why in native.items() if why is not None}
    return {"media_endpoints": "native", "native_endpoint": endpoint_binary(),
            **({"media_endpoints_python": python} if python else {})}


def _start_receivers(tb, plan: RunPlan, rd, handles: dict) -> None:
    from tcpdelay.testbed.grouped_endpoints import Member, start_group
    from tcpdelay.transport import ReceiverConfig, TcpOptions

    grouped, native, members = _grouped_media(plan), _native_media(plan), []
    for m in plan.media:
        if f"rx:{m.flow_id}" in handles:      # on a guest: started already
            continue
        cfg = _receiver_config(tb, plan, m, rd)
        if m.flow_id in grouped:
            members.append(Member(f"rx:{m.flow_id}", tb.hosts[m.receiver].netns, cfg,
                                  native=m.flow_id in native and native[m.flow_id] is None))
        else:
            handles[f"rx:{m.flow_id}"] = tb.hosts[m.receiver].spawn(_media_receiver, cfg, tb.spec.realtime)
    if members:
        handles.update(start_group(tb.hosts[plan.media[0].receiver], members, tb.spec.realtime, "media receivers"))


def _receiver_config(tb, plan: RunPlan, m, rd):
    """A media flow's receiver: its records in ``flows/<flow_id>/``."""
    from tcpdelay.transport import ReceiverConfig, TcpOptions

    fd = rd / "flows" / str(m.flow_id)
    fd.mkdir(parents=True, exist_ok=True)
    # (a sender offers its run as soon as it is started, up to the run's lead before its first
    # packet: the silence before that first packet counts as idle, hence the 60 s)
    # The bounds a receiver listening on a network keeps (docs/transport.md "Security") are the
    # plan's here: its peer is the run's own sender, its duration the plan's, and a full disk
    # fails the run with its reason (failed.json) rather than being refused below a 1-GiB floor
    # that a small output disk never reaches.
    from tcpdelay.transport.config import MAX_DURATION_S

    return ReceiverConfig(listen_host=tb.hosts[m.receiver].address, listen_port=m.port, out_dir=str(fd),
                          runs=1, idle_timeout_s=max(10.0, 2 * plan.duration_s) + 60.0,
                          tcp=TcpOptions(rcvbuf_bytes=m.flow.tcp.rcvbuf_bytes),
                          handshake_timeout_s=10.0, udp_linger_s=1.0,
                          max_run_duration_s=min(MAX_DURATION_S, max(3600.0, plan.duration_s + 60.0)),
                          min_free_disk_bytes=0)


# Cross-traffic starters, one per kind: (testbed, the flow's plan, its start instant, its
# duration in seconds) -> the handle of its sending or requesting process.


def _cc_state_map_id(tb, tcp) -> int | None:
    """The state map of a media flow's BPF congestion control (its own values over time)."""
    from tcpdelay.experiments.scenario import congestion_choice

    if tcp.congestion_control is None:
        return None
    name, params = congestion_choice(tcp.congestion_control)
    return tb.state_map_id(name, params or None)


def _congestion_control(tb, c: CrossPlan) -> str | None:
    """The kernel name (TCP_CONGESTION) of a cross-traffic flow's congestion control, if it names one."""
    from tcpdelay.experiments.scenario import congestion_choice

    tcp = getattr(c.cross, "tcp", None)
    if tcp is None or tcp.congestion_control is None:
        return None
    name, params = congestion_choice(tcp.congestion_control)
    return tb.kernel_name(name, params or None)


def _start_bulk(tb, c: CrossPlan, start_at: Instant, dur: float):
    from tcpdelay.traffic import bulk

    x = c.cross
    return tb.hosts[c.client].spawn(bulk.client, tb.hosts[c.server].address, c.port, duration_s=dur,
                                    niceness=CROSS_NICENESS,
                                    size_bytes=x.size_bytes, congestion_control=_congestion_control(tb, c),
                                    start_at=start_at, drain_s=2.0)


def _start_web_onoff(tb, c: CrossPlan, start_at: Instant, dur: float):
    from tcpdelay.traffic import web_onoff

    x = c.cross
    return tb.hosts[c.client].spawn(web_onoff.client, tb.hosts[c.server].address, c.port, duration_s=dur,
                                    niceness=CROSS_NICENESS,
                                    on_mean_s=x.on_mean_s, off_mean_s=x.off_mean_s,
                                    packet_size_bytes=x.packet_size_bytes, seed=c.seed,
                                    congestion_control=_congestion_control(tb, c), start_at=start_at,
                                    mode=x.mode, gap_mean_s=x.gap_mean_s)


def _start_page_load(tb, c: CrossPlan, start_at: Instant, dur: float):
    from tcpdelay.traffic import page_load

    x = c.cross
    return tb.hosts[c.client].spawn(page_load.client, tb.hosts[c.server].address, c.port,
                                    niceness=CROSS_NICENESS,
                                    connections=x.connections, total_bytes=x.total_bytes, duration_s=dur,
                                    congestion_control=_congestion_control(tb, c), start_at=start_at)


def _start_transfers(tb, c: CrossPlan, start_at: Instant, dur: float):
    from tcpdelay.traffic import transfers

    x = c.cross
    return tb.hosts[c.client].spawn(transfers.client, tb.hosts[c.server].address, c.port, size_bytes=x.size_bytes,
                                    niceness=CROSS_NICENESS,
                                    transfers=x.transfers, gap_s=x.gap_s, timeout_s=x.timeout_s,
                                    duration_s=dur, start_at=start_at,
                                    congestion_control=_congestion_control(tb, c),
                                    mss_bytes=x.tcp.mss_bytes, window_clamp_bytes=x.tcp.window_clamp_bytes)


def _start_udp(tb, c: CrossPlan, start_at: Instant, dur: float):
    from tcpdelay.traffic import udp_background

    x = c.cross
    return tb.hosts[c.server].spawn(udp_background.send, tb.hosts[c.client].address, c.port,
                                    niceness=CROSS_NICENESS,
                                    rate_bps=x.rate_bps, duration_s=dur, packet_size_bytes=x.packet_size_bytes,
                                    start_at=start_at)


#: Cross-traffic kind (the scenario's ``kind``) -> what starts its flow on the testbed.
CROSS_STARTERS: dict[str, Callable[..., Any]] = {
    "bulk": _start_bulk,
    "web_onoff": _start_web_onoff,
    "page_load": _start_page_load,
    "transfers": _start_transfers,
    "udp": _start_udp,
}


def cross_starter(kind: str) -> Callable[..., Any]:
    """The testbed's starter of cross-traffic ``kind``; an unknown kind is a
    :class:`ParameterError` naming the known ones."""
    try:
        return CROSS_STARTERS[kind]
    except KeyError:
        raise ParameterError(f"cross kind: {kind!r} has no starter on the testbed "
                             f"(one of {', '.join(sorted(CROSS_STARTERS))})") from None


def _sender_config(tb, plan: RunPlan, m, rd, *, on_guest: bool = False):
    """A media flow's sender: its records in ``flows/<flow_id>/``. On a guest it has no BPF
    state map (the guest's congestion control is its kernel's own)."""
    from tcpdelay.transport import RunParams, SenderConfig, TcpOptions
    from tcpdelay.transport.quic_config import QuicOptions

    f = m.flow
    h = f.heuristics
    tcp = f.tcp
    return SenderConfig(
        to_host=tb.hosts[m.receiver].address, to_port=m.port,
        run=RunParams(transport=f.transport, connections=h.connections, split=h.split,
                      duration_s=m.stop_s - m.start_s, flow_id=m.flow_id, source=m.name[:64]),
        scheduler=h.scheduler,
        tcp=TcpOptions(nodelay=True if tcp.nodelay is None else tcp.nodelay,
                       notsent_lowat_bytes=tcp.notsent_lowat_bytes,
                       sndbuf_bytes=tcp.sndbuf_bytes, rcvbuf_bytes=tcp.rcvbuf_bytes),
        proactive_drop_delay_s=h.proactive_drop_s, keepalive=h.keepalive,
        seed=m.seed, out_dir=str(rd / "flows" / str(m.flow_id)), run_id=f"flow{m.flow_id}",
        connect_timeout_s=10.0, drain_timeout_s=DRAIN_S, tcp_state_period_s=plan.tcp_state_period_s,
        cc_state_map_id=None if on_guest else _cc_state_map_id(tb, tcp),
        quic=QuicOptions(congestion=f.quic.congestion_control, deadline_s=f.quic.deadline_s,
                         streams_per=f.quic.streams_per,
                         max_datagram_bytes=f.quic.max_datagram_bytes))


def _start_all(tb, plan: RunPlan, rd, at: Callable[..., Any], handles: dict, sources: dict) -> None:
    """Start the run's servers, sinks, media senders and cross-traffic clients; ``at(offset_s,
    waits=True)`` is the start instant ``t0 + offset_s`` each is given (:func:`_fixed_instants`,
    :func:`_gate_instants`; ``waits=False`` for the servers and sinks, which only need to know
    when the run ends)."""
    from tcpdelay.traffic import response_server, transfers, udp_background
    from tcpdelay.testbed.grouped_endpoints import Member, start_group

    grouped, native, members = _grouped_media(plan), _native_media(plan), []
    starters = {c.kind: cross_starter(c.kind) for c in plan.cross}   # an unknown kind: before any start
    # Servers and sinks first (clients retry connecting until they are up).
    servers = sorted({c.server for c in plan.cross if c.transport != "udp" and c.kind != "transfers"})
    for c in plan.cross:
        if c.kind == "transfers":    # a server of its own: it times each transfer
            # it ends when its client's sequence is done, so a run of transfers alone ends then
            handles[f"server:{c.server}/transfers{c.flow_id}"] = tb.hosts[c.server].spawn(
                transfers.serve, c.port, niceness=CROSS_NICENESS, duration_s=plan.duration_s + 1.0,
                start_at=at(0.0, waits=False),
                mss_bytes=c.cross.tcp.mss_bytes, expect=c.cross.transfers,
                # the sender's TCP state over time in the run's own tcp_state records, as ns-3's
                tcp_state_dir=str(rd), tcp_state_period_s=plan.tcp_state_period_s, flow_id=c.flow_id)
    for host in servers:
        # TCP state over time of the cross flows this host sends, under flows/server-<host>/;
        # a record names its flow by the client's address (-1 when several flows share one).
        clients: dict[str, list[int]] = {}
        for c in plan.cross:
            if c.transport != "udp" and c.server == host:
                clients.setdefault(tb.hosts[c.client].address, []).append(c.flow_id)
        state_dir = rd / "flows" / f"server-{host}"
        state_dir.mkdir(parents=True, exist_ok=True)
        handles[f"server:{host}"] = tb.hosts[host].spawn(
            response_server.serve, CROSS_TCP_PORT, niceness=CROSS_NICENESS,
            duration_s=plan.duration_s + 1.0, start_at=at(0.0, waits=False),
            tcp_state_dir=str(state_dir), tcp_state_period_s=plan.tcp_state_period_s,
            flow_ids={a: ids[0] for a, ids in clients.items() if len(ids) == 1})
    for c in plan.cross:
        if c.transport == "udp":
            handles[f"sink:{c.flow_id}"] = tb.hosts[c.client].spawn(
                udp_background.sink, c.port, niceness=CROSS_NICENESS, duration_s=plan.duration_s + 1.0,
                start_at=at(0.0, waits=False))
    # Then every sending end, each waiting for its own start instant.
    for m in plan.media:
        if f"tx:{m.flow_id}" in handles:      # on a guest: started already, told its start by go()
            continue
        cfg = _sender_config(tb, plan, m, rd)
        if m.flow_id in grouped:
            members.append(Member(f"tx:{m.flow_id}", tb.hosts[m.sender].netns, cfg, sources[m.flow_id], at(m.start_s),
                                  native=m.flow_id in native and native[m.flow_id] is None))
            continue
        handles[f"tx:{m.flow_id}"] = tb.hosts[m.sender].spawn(_media_sender, cfg, sources[m.flow_id], at(m.start_s),
                                                               tb.spec.realtime)
    if members:
        handles.update(start_group(tb.hosts[plan.media[0].sender], members, tb.spec.realtime, "media senders"))
    for c in plan.cross:
        handles[f"cross:{c.flow_id}"] = starters[c.kind](tb, c, at(c.start_s), c.stop_s - c.start_s)


def _merge_transfers(plan: RunPlan, results: dict) -> None:
    """A ``transfers`` flow's rows, client (handshake) and server (transfer timer, counters)
    joined, into its ``cross:<id>`` result (what the ns-3 backend writes there directly)."""
    from tcpdelay.traffic.transfers import merge

    for c in plan.cross:
        cli = results.get(f"cross:{c.flow_id}")
        srv = results.get(f"server:{c.server}/transfers{c.flow_id}")
        if c.kind != "transfers" or not isinstance(cli, dict) or "transfers" not in cli:
            continue
        rows = merge(cli["transfers"], srv.get("transfers", []) if isinstance(srv, dict) else [])
        cli.update(transfers=rows, kind="transfers", complete=bool(rows) and all(r["complete"] for r in rows))


# --------------------------------------------------------------------------- waiting


def _one_line(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text}"


def _interrupt(handles: dict, grace_s: float = 2.0) -> dict:
    """Ask every process of the run still running (``handles`` not yet collected, so their pids
    are still ours) to stop — SIGINT, as Ctrl-C would — and give them ``grace_s`` to write what
    they hold (the last record parts) before the testbed kills what is left. Returns what they
    answered (or their error) by handle key."""
    for h in handles.values():
        if hasattr(h, "interrupt"):       # an end on a guest: SIGINT there
            h.interrupt()
            continue
        with contextlib.suppress(ProcessLookupError, OSError):
            os.kill(h.pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    out: dict[str, Any] = {}
    for key, h in handles.items():
        try:
            out[key] = h.result(timeout_s=max(0.01, deadline - time.monotonic()))
        except Exception as err:  # noqa: BLE001 - what is left is killed with the testbed
            out[key] = {"error": _one_line(err)}
    return out


def _wait_all(handles: dict, results: dict, t0: float, duration_s: float,
              on_progress: Callable[[float, float], None] | None, *,
              watch: Callable[[], list[str]] | None = None, failures: dict | None = None) -> bool:
    """Collect every process's result into ``results``. Every :data:`WATCH_EVERY_S` ``watch()``
    names the parts lost so far (a process killed, the emulator gone); as soon as it names one,
    or a process fails (raises, dies, or outlives the run's end: its error goes into
    ``failures`` by key), waiting stops and True is returned (with ``watch``; without it every
    process is waited for). False: every process answered."""
    total = duration_s + DRAIN_S
    stop = threading.Event()
    failures = {} if failures is None else failures

    def tick() -> None:
        while not stop.wait(1.0):
            on_progress(min(max(0.0, time.monotonic() - t0), total), total)

    ticker = threading.Thread(target=tick, daemon=True) if on_progress else None
    if ticker:
        ticker.start()
    try:
        # Senders first (they end with their flows), then receivers, clients, servers, sinks.
        order = sorted(handles, key=lambda k: ("tx", "play", "cross", "rx", "sink", "server", "state").index(k.split(":")[0]))
        end = t0 + duration_s + DRAIN_S + 15.0
        for key in order:
            deadline = max(end, time.monotonic() + 1.0)
            while True:
                try:
                    results[key] = handles[key].result(
                        timeout_s=max(0.01, min(WATCH_EVERY_S, deadline - time.monotonic())))
                    break
                except TimeoutError as err:
                    if time.monotonic() < deadline:
                        if watch is not None and watch():
                            return True
                        continue
                    failures[key] = _one_line(err)
                except Exception as err:  # noqa: BLE001 - recorded; the run fails
                    failures[key] = _one_line(err)
                results[key] = {"error": failures[key]}
                break
            if key in failures and watch is not None:
                return True
        return False
    finally:
        stop.set()
        if on_progress:
            on_progress(total, total)


def _emulator_reason(tb) -> str | None:
    how = tb.emulator_died()
    return f"the link emulator tcpdelay-link (pid {tb.emulator_pid}) {how} during the run" if how else None


def _dead_parts(tb, plan: RunPlan, handles: dict, results: dict) -> list[str]:
    """The parts lost while the run goes on: the emulator ended, or a process ended abnormally
    (killed by a signal: it never sends its result)."""
    lost = []
    emu = _emulator_reason(tb)
    if emu:
        lost.append(emu)
    for key, h in handles.items():
        if key in results:
            continue
        how = h.died()
        if how:
            lost.append(f"{part_name(key, plan)} {how}")
    return lost


def _lost_parts(tb, plan: RunPlan, results: dict, failures: dict) -> list[str]:
    """After every process answered: what makes the run not a measurement of the scenario."""
    lost = []
    emu = _emulator_reason(tb)
    if emu:
        lost.append(emu)
    for key, err in failures.items():
        lost.append(f"{part_name(key, plan)} failed: {err}")
    for m in plan.media:
        tx, rx = results.get(f"tx:{m.flow_id}"), results.get(f"rx:{m.flow_id}")
        if isinstance(tx, dict) and tx.get("status") in _SENDER_LOST:
            lost.append(f"{part_name(f'tx:{m.flow_id}', plan)} ended with status {tx['status']}"
                        + (f" ({tx['error']})" if tx.get("error") else ""))
        elif isinstance(tx, dict) and tx.get("status") == "completed" and not tx.get("receiver"):
            # (after a drain timeout the receiver may still be reading: no summary is expected)
            lost.append(f"{part_name(f'tx:{m.flow_id}', plan)} got no summary from the receiver"
                        + (f" ({tx['error']})" if tx.get("error") else ""))
        if f"rx:{m.flow_id}" in failures:
            continue
        if not rx:
            lost.append(f"{part_name(f'rx:{m.flow_id}', plan)} sent no summary (no run of the flow reached it)")
            continue
        rx = rx[0] if isinstance(rx, list) else rx
        tx_status = tx.get("status") if isinstance(tx, dict) else None
        ok = rx.get("status") == "completed" or (rx.get("status") == "sender-disconnected"
                                                 and tx_status == "drain-timeout")
        if not ok:
            lost.append(f"{part_name(f'rx:{m.flow_id}', plan)} ended with status {rx.get('status')}")
    return lost

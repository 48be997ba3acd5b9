//! The single-threaded event loop, serving every link of the configuration.
//!
//! Each link has two directions, each with its own pipeline (`Link`), delay line, counters,
//! pcap, and the link's own event stream and queue trace; they share the packet pool and the
//! loop. One epoll set holds every TUN descriptor (the token is the index of the direction
//! that reads it) and a signalfd. Each wake-up:
//! deliver every packet whose due time has come; read each readable TUN until
//! `EAGAIN` (at most `READ_BATCH` per turn, re-checking due packets after every
//! read so a burst of arrivals does not delay deliveries); then sleep until
//! the earliest due time with `epoll_pwait2`'s nanosecond timeout, and
//! busy-wait the last `spin_us` (a wake-up from a timer is some tens of µs
//! late on a VM) within a budget of `spin_percent` % of the time. Timestamps are CLOCK_MONOTONIC ns since
//! the loop started.

use crate::aqm::{packet, Queued};
use crate::config::Config;
use crate::counters::DirCounters;
use crate::delay::{DelayLine, InFlight};
use crate::events::{Event, EventWriter};
use crate::gso::{self, MAX_SUPER_PACKET_BYTES, VNET_HDR_BYTES};
use crate::link::{DropReason, Link, Verdict};
use crate::pcap::PcapWriter;
use crate::pool::PacketPool;
use crate::sys;
use crate::wait::{Plan, Waiter};
use serde_json::{json, Value};
use std::fs::File;
use crate::writer::BackgroundWriter;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};

const READ_BATCH: usize = 64;
/// Busy-waiting may use at most `spin_percent` % of each window of this length.
const SPIN_WINDOW_NS: u64 = 10_000_000;
const TOKEN_SIGNAL: u64 = u64::MAX;
/// Readiness reports taken per wait (more ready TUNs are reported by the next wait).
const EPOLL_BATCH: usize = 64;
/// Marks a slot of the super-packet pool (`Emulator::big`) in `InFlight::slot`.
const BIG: u32 = 1 << 31;

/// What one link writes besides its directions' pcaps: its name and seed (for the counters),
/// its event stream and its queue-length trace.
pub struct LinkOutputs {
    pub name: String,
    pub seed: u64,
    pub events: Option<EventWriter<BackgroundWriter>>,
    /// The queue-length trace (`queue_file`), sampled every `queue_sample_ns`: written lazily,
    /// when the loop next runs past a sample time, from the queue's known schedule (a queue
    /// changes only at an arrival, before which every due sample is written, and at
    /// transmission starts it already knows), so sampling adds no wake-ups.
    pub queue_out: Option<BackgroundWriter>,
}

/// One direction: where packets come from and go to, and what happens between.
pub struct Direction {
    /// `a_to_b` or `b_to_a` (the `dir` of its events and queue samples).
    pub name: &'static str,
    /// Index of its link in `Emulator::links`.
    pub owner: usize,
    pub link: Link,
    pub line: DelayLine,
    pub counters: DirCounters,
    pub pcap: Option<PcapWriter<BackgroundWriter>>,
    pub next_id: u64,
    pub src: RawFd,
    pub dst: RawFd,
    /// Whether its link passes GSO super-packets whole (`crate::gso`): every read and write
    /// carries a vnet header, and one packet may stand for many segments.
    pub whole: bool,
    /// The segments beyond the first of the super-packets in its delay line (so the counters'
    /// in-flight count is in segments).
    pub whole_extra_in_flight: u64,
}

pub struct Emulator {
    /// Directions 2i (`a_to_b`) and 2i + 1 (`b_to_a`) belong to link i.
    pub dirs: Vec<Direction>,
    pub links: Vec<LinkOutputs>,
    /// Whether the configuration named its links (counters keyed by link name).
    pub multi: bool,
    pub pool: PacketPool,
    /// Slots for super-packets (links that pass them whole); as many bytes at most as `pool`.
    pub big: PacketPool,
    queue_sample_ns: u64,
    next_sample_ns: u64,
    /// A lower bound of every direction's next due time (exact after each delivery sweep),
    /// so that checking for due packets costs O(1) however many links there are.
    earliest_due_ns: u64,
    pub mtu: u32,
    pub counters_file: Option<String>,
    pub realtime_active: bool,
    /// This process's timer slack after asking for 1 ns (`sys::timer_slack_ns`).
    pub timer_slack_ns: u64,
    /// The kernel's timer resolution (`sys::clock_resolution_ns`).
    pub clock_resolution_ns: u64,
    /// Whether sleeps had nanosecond timeouts (`epoll_pwait2`) or whole milliseconds.
    nanosecond_timeouts: bool,
    t0_mono: u64,
    t0_real: u64,
    stop: bool,
    waiter: Waiter,
    /// Set when reading or writing a TUN failed for good.
    pub fatal: Option<String>,
}

impl Emulator {
    pub fn new(dirs: Vec<Direction>, links: Vec<LinkOutputs>, cfg: &Config, realtime_active: bool) -> Emulator {
        assert_eq!(dirs.len(), 2 * links.len(), "two directions per link");
        let slot = cfg.mtu as usize + 64;
        Emulator {
            dirs,
            links,
            multi: cfg.multi,
            pool: PacketPool::new(slot, cfg.max_packets as usize),
            big: PacketPool::new(
                MAX_SUPER_PACKET_BYTES,
                (cfg.max_packets as usize * slot / MAX_SUPER_PACKET_BYTES).max(16),
            ),
            queue_sample_ns: cfg.queue_sample_ns.max(1),
            next_sample_ns: 0,
            earliest_due_ns: u64::MAX,
            mtu: cfg.mtu,
            counters_file: cfg.counters_file.clone(),
            realtime_active,
            timer_slack_ns: 0,
            clock_resolution_ns: 0,
            nanosecond_timeouts: true,
            t0_mono: 0,
            t0_real: 0,
            stop: false,
            waiter: Waiter::new(cfg.spin_us as u64 * 1000, SPIN_WINDOW_NS, SPIN_WINDOW_NS * cfg.spin_percent as u64 / 100),
            fatal: None,
        }
    }

    /// Whether any link writes a queue trace.
    fn sampling(&self) -> bool {
        self.links.iter().any(|l| l.queue_out.is_some())
    }

    #[inline]
    fn now(&self) -> u64 {
        sys::mono_ns() - self.t0_mono
    }

    /// Runs until SIGTERM/SIGINT/SIGHUP (or a fatal I/O error). `on_ready` is called
    /// once the loop is about to start (the ready file).
    pub fn run(&mut self, sigfd: RawFd, on_ready: impl FnOnce()) -> std::io::Result<()> {
        let mut ep = sys::Epoll::new()?;
        for (d, dir) in self.dirs.iter().enumerate() {
            ep.add(dir.src, d as u64)?;
        }
        ep.add(sigfd, TOKEN_SIGNAL)?;
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; EPOLL_BATCH];
        self.t0_mono = sys::mono_ns();
        self.t0_real = sys::realtime_ns();
        on_ready();
        while !self.stop && self.fatal.is_none() {
            let now = self.now();
            self.deliver_all(now);
            self.sample_queues(now);
            let next = (self.earliest_due_ns != u64::MAX).then_some(self.earliest_due_ns);
            let timeout = match self.waiter.plan(self.now(), next) {
                Plan::Deliver => continue,
                Plan::Spin { until_ns } => {
                    // Busy-wait, leaving early to read if a TUN has packets (or a signal came).
                    let mut n = 0;
                    while self.now() < until_ns {
                        n = ep.wait(&mut evs, Some(0))?;
                        if n > 0 {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                    self.handle_ready(&evs[..n], sigfd);
                    continue;
                }
                Plan::Sleep { timeout_ns } => timeout_ns,
            };
            let n = ep.wait(&mut evs, timeout)?;
            self.nanosecond_timeouts = ep.pwait2;
            self.handle_ready(&evs[..n], sigfd);
        }
        self.finish();
        Ok(())
    }

    /// Reads from every direction whose TUN is readable; handles signals.
    fn handle_ready(&mut self, evs: &[libc::epoll_event], sigfd: RawFd) {
        for ev in evs {
            if self.fatal.is_some() {
                return;
            }
            let token = ev.u64;
            match token {
                TOKEN_SIGNAL => self.handle_signals(sigfd),
                d if self.dirs[d as usize].whole => self.read_batch_whole(d as usize),
                d => self.read_batch(d as usize),
            }
        }
    }

    /// The direction's name in messages: `a_to_b`, or `LINK a_to_b` when links are named.
    fn label(&self, d: usize) -> String {
        let dir = &self.dirs[d];
        if self.multi {
            format!("{} {}", self.links[dir.owner].name, dir.name)
        } else {
            dir.name.to_string()
        }
    }

    fn handle_signals(&mut self, sigfd: RawFd) {
        while let Some(sig) = sys::read_signal(sigfd) {
            match sig {
                libc::SIGUSR1 => {
                    self.flush_files();
                    self.write_counters();
                }
                _ => self.stop = true,
            }
        }
    }

    /// Reads up to READ_BATCH packets from direction `d`'s source.
    fn read_batch(&mut self, d: usize) {
        for _ in 0..READ_BATCH {
            let slot = match self.pool.take() {
                Some(s) => s,
                None => {
                    // Pool exhausted: read into a scratch buffer and drop.
                    let mut scratch = [0u8; 65536];
                    let n = unsafe { libc::read(self.dirs[d].src, scratch.as_mut_ptr() as *mut _, scratch.len()) };
                    if n <= 0 {
                        return;
                    }
                    let now = self.now();
                    self.count_drop(d, now, n as u32, DropReason::Memory);
                    continue;
                }
            };
            let cap = self.pool.slot_bytes();
            let n = unsafe { libc::read(self.dirs[d].src, self.pool.buf_mut(slot).as_mut_ptr() as *mut _, cap) };
            if n < 0 {
                self.pool.give(slot);
                let e = sys::last_err();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                    _ => self.fatal = Some(format!("reading {}: {e}", self.label(d))),
                }
                return;
            }
            let now = self.now();
            let size = n as u32;
            if size > self.mtu {
                self.pool.give(slot);
                self.count_drop(d, now, size, DropReason::Oversize);
                continue;
            }
            self.arrive(d, now, slot, size);
            self.deliver_all(now);
        }
    }

    #[inline]
    fn give_slot(&mut self, slot: u32) {
        if slot & BIG != 0 { self.big.give(slot & !BIG) } else { self.pool.give(slot) }
    }

    /// Reads up to READ_BATCH packets from direction `d` of a link passing super-packets whole
    /// (`crate::gso`): each read into a super-packet slot; one that fits an MTU slot is copied
    /// there (the large slot serves the next read), so small packets (ACKs) hold small slots.
    fn read_batch_whole(&mut self, d: usize) {
        for _ in 0..READ_BATCH {
            let Some(big) = self.big.take() else {
                let mut scratch = vec![0u8; MAX_SUPER_PACKET_BYTES];
                let n = unsafe { libc::read(self.dirs[d].src, scratch.as_mut_ptr() as *mut _, scratch.len()) };
                if n < VNET_HDR_BYTES as isize {
                    return;
                }
                let (segs, wire) = gso::shape(&scratch[..VNET_HDR_BYTES], &scratch[VNET_HDR_BYTES..n as usize]);
                self.count_drops_whole(d, segs, wire, DropReason::Memory);
                continue;
            };
            let cap = self.big.slot_bytes();
            let n = unsafe { libc::read(self.dirs[d].src, self.big.buf_mut(big).as_mut_ptr() as *mut _, cap) };
            if n < 0 {
                self.big.give(big);
                let e = sys::last_err();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                    _ => self.fatal = Some(format!("reading {}: {e}", self.label(d))),
                }
                return;
            }
            let now = self.now();
            let n = n as usize;
            if n <= VNET_HDR_BYTES || n > cap {
                self.big.give(big);
                let size = n.saturating_sub(VNET_HDR_BYTES) as u64;
                self.count_drops_whole(d, 1, size, DropReason::Oversize);
                continue;
            }
            let buf = &self.big.buf(big)[..n];
            let (segs, wire) = gso::shape(&buf[..VNET_HDR_BYTES], &buf[VNET_HDR_BYTES..]);
            if segs == 1 && (n - VNET_HDR_BYTES) as u32 > self.mtu {
                self.big.give(big);
                self.count_drops_whole(d, 1, wire, DropReason::Oversize);
                continue;
            }
            let slot = if n <= self.pool.slot_bytes() {
                let Some(small) = self.pool.take() else {
                    self.big.give(big);
                    self.count_drops_whole(d, segs, wire, DropReason::Memory);
                    continue;
                };
                let (pool, big_pool) = (&mut self.pool, &self.big);
                pool.buf_mut(small)[..n].copy_from_slice(&big_pool.buf(big)[..n]);
                self.big.give(big);
                small
            } else {
                big | BIG
            };
            self.arrive_whole(d, now, slot, n as u32, segs, wire);
            self.deliver_all(now);
        }
    }

    /// An arrival on a link passing super-packets whole: every segment is accepted (the link
    /// only delays; `gso::link_passes_whole`) and all leave at the same due time.
    #[inline]
    fn arrive_whole(&mut self, d: usize, now: u64, slot: u32, len: u32, segs: u32, wire: u64) {
        self.sample_queues(now);
        let dir = &mut self.dirs[d];
        let id = dir.next_id;
        dir.next_id += segs as u64;
        dir.counters.packets_in += segs as u64;
        dir.counters.bytes_in += wire;
        for _ in 0..segs {
            dir.link.sojourn.record(0);
        }
        let due_ns = dir.link.delay.due(now);
        dir.whole_extra_in_flight += segs as u64 - 1;
        dir.line.push(InFlight { due_ns, id, slot, len });
        self.earliest_due_ns = self.earliest_due_ns.min(due_ns);
    }

    /// Writes a (super-)packet with its vnet header; the counters count its segments.
    #[inline]
    fn deliver_whole(&mut self, d: usize, p: InFlight) {
        let now = self.now();
        let data = if p.slot & BIG != 0 { self.big.buf(p.slot & !BIG) } else { self.pool.buf(p.slot) };
        let data = &data[..p.len as usize];
        let (segs, wire) = gso::shape(&data[..VNET_HDR_BYTES], &data[VNET_HDR_BYTES..]);
        let dir = &mut self.dirs[d];
        let n = unsafe { libc::write(dir.dst, data.as_ptr() as *const _, data.len()) };
        dir.whole_extra_in_flight -= segs as u64 - 1;
        if n < 0 {
            for _ in 0..segs {
                dir.counters.drop(DropReason::WriteError);
            }
        } else {
            let late = now.saturating_sub(p.due_ns);
            dir.counters.packets_out += segs as u64;
            dir.counters.bytes_out += wire;
            for _ in 0..segs {
                dir.counters.lateness.record(late);
            }
        }
        self.give_slot(p.slot);
    }

    /// Counts `segs` segments (`wire` bytes) dropped on arrival at a link passing
    /// super-packets whole (such a link writes no event stream).
    fn count_drops_whole(&mut self, d: usize, segs: u32, wire: u64, r: DropReason) {
        let dir = &mut self.dirs[d];
        dir.next_id += segs as u64;
        dir.counters.packets_in += segs as u64;
        dir.counters.bytes_in += wire;
        for _ in 0..segs {
            dir.counters.drop(r);
        }
    }

    fn count_drop(&mut self, d: usize, now: u64, size: u32, r: DropReason) {
        let dir = &mut self.dirs[d];
        let id = dir.next_id;
        dir.next_id += 1;
        dir.counters.packets_in += 1;
        dir.counters.bytes_in += size as u64;
        dir.counters.drop(r);
        if let Some(ev) = self.links[dir.owner].events.as_mut() {
            let _ = ev.write(now, dir.name, id, Event::Arrival { size });
            let (qp, qb) = dir.link.queue_len();
            let _ = ev.write(now, dir.name, id, Event::Drop { size, queue_packets: qp, queue_bytes: qb, reason: r.as_str() });
        }
    }

    /// Writes every queue sample due by `now` (each direction's length at the sample's time,
    /// into its link's trace).
    #[inline]
    fn sample_queues(&mut self, now: u64) {
        if self.next_sample_ns > now {
            return;
        }
        if !self.sampling() {
            self.next_sample_ns = u64::MAX;
            return;
        }
        while self.next_sample_ns <= now {
            let t = self.next_sample_ns;
            for dir in self.dirs.iter() {
                if let Some(w) = self.links[dir.owner].queue_out.as_mut() {
                    let (p, b) = dir.link.queue_len_at(t);
                    let _ = writeln!(w, "{:.6},{},{},{}", t as f64 / 1e9, dir.name, p, b);
                }
            }
            self.next_sample_ns += self.queue_sample_ns;
        }
    }

    #[inline]
    fn arrive(&mut self, d: usize, now: u64, slot: u32, size: u32) {
        self.sample_queues(now); // before this arrival changes the queue
        if self.dirs[d].link.aqm.is_some() {
            return self.arrive_aqm(d, now, slot, size);
        }
        let dir = &mut self.dirs[d];
        let id = dir.next_id;
        dir.next_id += 1;
        dir.counters.packets_in += 1;
        dir.counters.bytes_in += size as u64;
        let verdict = dir.link.admit(now, size);
        let events = &mut self.links[dir.owner].events;
        if let Some(ev) = events.as_mut() {
            let _ = ev.write(now, dir.name, id, Event::Arrival { size });
        }
        match verdict {
            Verdict::Deliver { due_ns, .. } => {
                dir.line.push(InFlight { due_ns, id, slot, len: size });
                self.earliest_due_ns = self.earliest_due_ns.min(due_ns);
                if let Some(ev) = events.as_mut() {
                    let (qp, qb) = dir.link.queue_len();
                    let _ = ev.write(now, dir.name, id, Event::Enqueue { size, queue_packets: qp, queue_bytes: qb, due_ns: Some(due_ns) });
                }
            }
            Verdict::Drop(r) => {
                dir.counters.drop(r);
                self.pool.give(slot);
                if let Some(ev) = events.as_mut() {
                    let (qp, qb) = dir.link.queue_len();
                    let _ = ev.write(now, dir.name, id, Event::Drop { size, queue_packets: qp, queue_bytes: qb, reason: r.as_str() });
                }
            }
        }
    }

    /// An arrival on a direction with an AQM: outage and loss first, then into the queue
    /// (which may give up the arrival or, FQ-CoDel, another flow's packet), then the
    /// bottleneck takes what it can by now.
    fn arrive_aqm(&mut self, d: usize, now: u64, slot: u32, size: u32) {
        self.serve_due(d, now);
        let seed = self.links[self.dirs[d].owner].seed;
        let dir = &mut self.dirs[d];
        let id = dir.next_id;
        dir.next_id += 1;
        dir.counters.packets_in += 1;
        dir.counters.bytes_in += size as u64;
        let events = &mut self.links[dir.owner].events;
        if let Some(ev) = events.as_mut() {
            let _ = ev.write(now, dir.name, id, Event::Arrival { size });
        }
        if let Some(r) = dir.link.pre_queue(now) {
            dir.counters.drop(r);
            self.pool.give(slot);
            if let Some(ev) = events.as_mut() {
                let (qp, qb) = dir.link.queue_len();
                let _ = ev.write(now, dir.name, id, Event::Drop { size, queue_packets: qp, queue_bytes: qb, reason: r.as_str() });
            }
            return;
        }
        let buf = &self.pool.buf(slot)[..size as usize];
        let q = Queued { slot, id, size, enqueued_ns: now, flow_hash: packet::flow_hash(buf, seed), ect: packet::is_ect(buf), mark_ce: false };
        let given_up = dir.link.enqueue(now, q);
        let (qp, qb) = dir.link.queue_len();
        if !given_up.iter().any(|(v, _)| v.id == id) {
            if let Some(ev) = events.as_mut() {
                let _ = ev.write(now, dir.name, id, Event::Enqueue { size, queue_packets: qp, queue_bytes: qb, due_ns: None });
            }
        }
        for (v, r) in given_up {
            dir.counters.drop(r);
            self.pool.give(v.slot);
            if let Some(ev) = events.as_mut() {
                let _ = ev.write(now, dir.name, v.id, Event::Drop { size: v.size, queue_packets: qp, queue_bytes: qb, reason: r.as_str() });
            }
        }
        self.serve_due(d, now);
        if let Some(t) = self.dirs[d].link.next_service_ns() {
            self.earliest_due_ns = self.earliest_due_ns.min(t);
        }
    }

    /// Takes packets off direction `d`'s AQM queue each time its bottleneck became free up
    /// to `now` (at that time, so sojourns and CoDel's clock are exact): the AQM's drops are
    /// counted, a packet it marks gets CE, the one sent goes into the delay line.
    fn serve_due(&mut self, d: usize, now: u64) {
        loop {
            let dir = &mut self.dirs[d];
            let t = match dir.link.next_service_ns() {
                Some(t) if t <= now => t,
                _ => return,
            };
            let (deq, due_ns) = dir.link.serve_head(t);
            let (qp, qb) = dir.link.queue_len();
            let events = &mut self.links[dir.owner].events;
            for v in deq.dropped {
                dir.counters.drop(DropReason::Aqm);
                self.pool.give(v.slot);
                if let Some(ev) = events.as_mut() {
                    let _ = ev.write(t, dir.name, v.id, Event::Drop { size: v.size, queue_packets: qp, queue_bytes: qb, reason: "aqm" });
                }
            }
            if let Some(p) = deq.packet {
                let marked = deq.mark_ce && packet::set_ce(&mut self.pool.buf_mut(p.slot)[..p.size as usize]);
                if marked {
                    dir.counters.ce_marks += 1;
                }
                dir.line.push(InFlight { due_ns, id: p.id, slot: p.slot, len: p.size });
                self.earliest_due_ns = self.earliest_due_ns.min(due_ns);
                if let Some(ev) = events.as_mut() {
                    let sojourn_ns = t.saturating_sub(p.enqueued_ns);
                    let _ = ev.write(t, dir.name, p.id, Event::Dequeue { size: p.size, queue_packets: qp, queue_bytes: qb, due_ns, sojourn_ns, ce: marked });
                }
            }
        }
    }

    /// Delivers every packet due by `now`, direction by direction; O(1) when none is due.
    #[inline]
    fn deliver_all(&mut self, now: u64) {
        if now < self.earliest_due_ns {
            return;
        }
        let mut earliest = u64::MAX;
        for d in 0..self.dirs.len() {
            self.serve_due(d, now);
            while let Some(p) = self.dirs[d].line.pop_due(now) {
                self.deliver(d, p);
            }
            if let Some(t) = self.dirs[d].line.next_due() {
                earliest = earliest.min(t);
            }
            if let Some(t) = self.dirs[d].link.next_service_ns() {
                earliest = earliest.min(t);
            }
        }
        self.earliest_due_ns = earliest;
    }

    #[inline]
    fn deliver(&mut self, d: usize, p: InFlight) {
        if self.dirs[d].whole {
            return self.deliver_whole(d, p);
        }
        let now = self.now();
        let dir = &mut self.dirs[d];
        let data = &self.pool.buf(p.slot)[..p.len as usize];
        let n = unsafe { libc::write(dir.dst, data.as_ptr() as *const _, data.len()) };
        let events = &mut self.links[dir.owner].events;
        if n < 0 {
            dir.counters.drop(DropReason::WriteError);
            if let Some(ev) = events.as_mut() {
                let _ = ev.write(now, dir.name, p.id, Event::Drop { size: p.len, queue_packets: 0, queue_bytes: 0, reason: "write_error" });
            }
        } else {
            let late = now.saturating_sub(p.due_ns);
            dir.counters.packets_out += 1;
            dir.counters.bytes_out += p.len as u64;
            dir.counters.lateness.record(late);
            if let Some(pc) = dir.pcap.as_mut() {
                let _ = pc.write_packet(self.t0_real + now, data);
            }
            if let Some(ev) = events.as_mut() {
                let _ = ev.write(now, dir.name, p.id, Event::Departure { size: p.len, lateness_ns: late });
            }
        }
        self.pool.give(p.slot);
    }

    fn flush_files(&mut self) {
        if self.sampling() {
            let now = self.now();
            self.sample_queues(now);
        }
        for l in self.links.iter_mut() {
            if let Some(ev) = l.events.as_mut() {
                let _ = ev.flush();
            }
            if let Some(w) = l.queue_out.as_mut() {
                let _ = w.flush();
            }
        }
        for d in self.dirs.iter_mut() {
            if let Some(p) = d.pcap.as_mut() {
                let _ = p.flush();
            }
        }
    }

    /// Counters as JSON: a single link's directions at the top (`a_to_b`, `b_to_a`, `seed`);
    /// named links under `links`, by name, each with its `a_to_b`, `b_to_a` and `seed`.
    pub fn counters_json(&self) -> Value {
        let now = self.now();
        let dir = |d: &Direction| {
            let (pp, pb) = d.link.queue_peaks();
            // packets still in the AQM's queue are in flight too
            let in_flight = d.line.len() + d.whole_extra_in_flight as usize + d.link.queue_len().0 as usize * d.link.aqm.is_some() as usize;
            let mut v = d.counters.to_json(pp, pb, d.link.queue_mean_until(now), in_flight);
            let o = v.as_object_mut().unwrap();
            o.insert("queue_discipline".into(), json!(d.link.aqm.as_ref().map_or("drop_tail", |a| a.name())));
            o.insert("sojourn_ms".into(), d.link.sojourn.to_json());
            v
        };
        let mut top = json!({
            "elapsed_s": (now as f64 / 1e9 * 1e6).round() / 1e6,
            "realtime": self.realtime_active,
            // What bounds how punctually packets leave: see docs/emulator.md "Timing".
            "timing": {
                "realtime": self.realtime_active,
                "timer_slack_ns": self.timer_slack_ns,
                "clock_resolution_ns": self.clock_resolution_ns,
                "nanosecond_timeouts": self.nanosecond_timeouts,
            },
            "pool_slots_allocated": self.pool.allocated(),
        });
        let o = top.as_object_mut().unwrap();
        let link = |i: usize| {
            json!({"a_to_b": dir(&self.dirs[2 * i]), "b_to_a": dir(&self.dirs[2 * i + 1]), "seed": self.links[i].seed})
        };
        if self.multi {
            let mut by_name = serde_json::Map::new();
            for (i, l) in self.links.iter().enumerate() {
                by_name.insert(l.name.clone(), link(i));
            }
            o.insert("links".into(), Value::Object(by_name));
        } else if let Value::Object(m) = link(0) {
            o.extend(m);
        }
        top
    }

    /// Writes the counters file (atomically), or prints to stderr when there is none.
    pub fn write_counters(&self) {
        let text = serde_json::to_string_pretty(&self.counters_json()).unwrap() + "\n";
        match &self.counters_file {
            Some(path) => {
                if let Err(e) = sys::write_atomic(path, text.as_bytes()) {
                    eprintln!("tcpdelay-link: counters_file: cannot write {path}: {e}");
                }
            }
            None => {
                let _ = std::io::stderr().write_all(text.as_bytes());
            }
        }
    }

    /// Files are flushed and counters written (packets still in flight are counted
    /// as `in_flight_packets`, so packets_in = packets_out + drops + in flight),
    /// then those packets are discarded.
    fn finish(&mut self) {
        self.flush_files();
        self.write_counters();
        for d in 0..self.dirs.len() {
            for s in self.dirs[d].line.drain_slots() {
                self.give_slot(s);
            }
            if let Some(a) = self.dirs[d].link.aqm.as_mut() {
                for s in a.drain_slots() {
                    self.pool.give(s);
                }
            }
        }
    }
}

/// The raw fd of a file (kept open by the caller for the loop's lifetime).
pub fn raw(f: &File) -> RawFd {
    f.as_raw_fd()
}

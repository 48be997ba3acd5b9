//! The single-threaded event loop.
//!
//! One epoll set holds the two TUN descriptors and a signalfd. Each wake-up:
//! deliver every packet whose due time has come; read each readable TUN until
//! `EAGAIN` (at most `READ_BATCH` per turn, re-checking due packets after every
//! read so a burst of arrivals does not delay deliveries); then sleep until
//! the earliest due time with `epoll_pwait2`'s nanosecond timeout, and
//! busy-wait the last `spin_us` (a wake-up from a timer is some tens of µs
//! late on a VM) within a budget of `spin_percent` % of the time. Timestamps are CLOCK_MONOTONIC ns since
//! the loop started.

use crate::config::Config;
use crate::counters::DirCounters;
use crate::delay::{DelayLine, InFlight};
use crate::events::{Event, EventWriter};
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
const TOKEN_SIGNAL: u64 = 2;

/// One direction: where packets come from and go to, and what happens between.
pub struct Direction {
    pub name: &'static str,
    pub link: Link,
    pub line: DelayLine,
    pub counters: DirCounters,
    pub pcap: Option<PcapWriter<BackgroundWriter>>,
    pub next_id: u64,
    pub src: RawFd,
    pub dst: RawFd,
}

pub struct Emulator {
    pub dirs: [Direction; 2],
    pub pool: PacketPool,
    pub events: Option<EventWriter<BackgroundWriter>>,
    /// The queue-length trace (`queue_file`), sampled every `queue_sample_ns`: written lazily,
    /// when the loop next runs past a sample time, from the queue's known schedule (a queue
    /// changes only at an arrival, before which every due sample is written, and at
    /// transmission starts it already knows), so sampling adds no wake-ups.
    pub queue_out: Option<BackgroundWriter>,
    queue_sample_ns: u64,
    next_sample_ns: u64,
    pub mtu: u32,
    pub counters_file: Option<String>,
    pub realtime_active: bool,
    /// This process's timer slack after asking for 1 ns (`sys::timer_slack_ns`).
    pub timer_slack_ns: u64,
    /// The kernel's timer resolution (`sys::clock_resolution_ns`).
    pub clock_resolution_ns: u64,
    /// Whether sleeps had nanosecond timeouts (`epoll_pwait2`) or whole milliseconds.
    nanosecond_timeouts: bool,
    pub seed: u64,
    t0_mono: u64,
    t0_real: u64,
    stop: bool,
    waiter: Waiter,
    /// Set when reading or writing a TUN failed for good.
    pub fatal: Option<String>,
}

impl Emulator {
    pub fn new(
        dirs: [Direction; 2],
        cfg: &Config,
        events: Option<EventWriter<BackgroundWriter>>,
        realtime_active: bool,
    ) -> Emulator {
        let slot = cfg.mtu as usize + 64;
        Emulator {
            dirs,
            pool: PacketPool::new(slot, cfg.max_packets as usize),
            events,
            queue_out: None,
            queue_sample_ns: cfg.queue_sample_ns.max(1),
            next_sample_ns: 0,
            mtu: cfg.mtu,
            counters_file: cfg.counters_file.clone(),
            realtime_active,
            timer_slack_ns: 0,
            clock_resolution_ns: 0,
            nanosecond_timeouts: true,
            seed: cfg.seed,
            t0_mono: 0,
            t0_real: 0,
            stop: false,
            waiter: Waiter::new(cfg.spin_us as u64 * 1000, SPIN_WINDOW_NS, SPIN_WINDOW_NS * cfg.spin_percent as u64 / 100),
            fatal: None,
        }
    }

    #[inline]
    fn now(&self) -> u64 {
        sys::mono_ns() - self.t0_mono
    }

    /// Runs until SIGTERM/SIGINT/SIGHUP (or a fatal I/O error). `on_ready` is called
    /// once the loop is about to start (the ready file).
    pub fn run(&mut self, sigfd: RawFd, on_ready: impl FnOnce()) -> std::io::Result<()> {
        let mut ep = sys::Epoll::new()?;
        ep.add(self.dirs[0].src, 0)?;
        ep.add(self.dirs[1].src, 1)?;
        ep.add(sigfd, TOKEN_SIGNAL)?;
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
        self.t0_mono = sys::mono_ns();
        self.t0_real = sys::realtime_ns();
        on_ready();
        while !self.stop && self.fatal.is_none() {
            let now = self.now();
            self.deliver_all(now);
            self.sample_queues(now);
            let next = match (self.dirs[0].line.next_due(), self.dirs[1].line.next_due()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let timeout = match self.waiter.plan(self.now(), next) {
                Plan::Deliver => continue,
                Plan::Spin { until_ns } => {
                    // Busy-wait, leaving early to read if a TUN has packets.
                    let mut ready = [false; 2];
                    while self.now() < until_ns {
                        ready = self.readable();
                        if ready[0] || ready[1] {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                    for (d, r) in ready.iter().enumerate() {
                        if *r {
                            self.read_batch(d);
                        }
                    }
                    continue;
                }
                Plan::Sleep { timeout_ns } => timeout_ns,
            };
            let n = ep.wait(&mut evs, timeout)?;
            self.nanosecond_timeouts = ep.pwait2;
            for ev in evs.iter().take(n) {
                match ev.u64 {
                    0 => self.read_batch(0),
                    1 => self.read_batch(1),
                    _ => self.handle_signals(sigfd),
                }
            }
            if self.fatal.is_some() {
                break;
            }
        }
        self.finish();
        Ok(())
    }

    /// Which sources have packets waiting (non-blocking).
    fn readable(&self) -> [bool; 2] {
        let mut fds = [
            libc::pollfd { fd: self.dirs[0].src, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.dirs[1].src, events: libc::POLLIN, revents: 0 },
        ];
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, 0) } <= 0 {
            return [false; 2];
        }
        [fds[0].revents & libc::POLLIN != 0, fds[1].revents & libc::POLLIN != 0]
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
                    _ => self.fatal = Some(format!("reading {}: {e}", self.dirs[d].name)),
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

    fn count_drop(&mut self, d: usize, now: u64, size: u32, r: DropReason) {
        let dir = &mut self.dirs[d];
        let id = dir.next_id;
        dir.next_id += 1;
        dir.counters.packets_in += 1;
        dir.counters.bytes_in += size as u64;
        dir.counters.drop(r);
        if let Some(ev) = self.events.as_mut() {
            let _ = ev.write(now, dir.name, id, Event::Arrival { size });
            let (qp, qb) = (dir.link.queue.len_packets(), dir.link.queue.len_bytes());
            let _ = ev.write(now, dir.name, id, Event::Drop { size, queue_packets: qp, queue_bytes: qb, reason: r.as_str() });
        }
    }

    /// Writes every queue sample due by `now` (each direction's length at the sample's time).
    #[inline]
    fn sample_queues(&mut self, now: u64) {
        if self.next_sample_ns > now {
            return;
        }
        let Some(w) = self.queue_out.as_mut() else { return };
        while self.next_sample_ns <= now {
            let t = self.next_sample_ns;
            for dir in self.dirs.iter() {
                let (p, b) = dir.link.queue.len_at(t);
                let _ = writeln!(w, "{:.6},{},{},{}", t as f64 / 1e9, dir.name, p, b);
            }
            self.next_sample_ns += self.queue_sample_ns;
        }
    }

    #[inline]
    fn arrive(&mut self, d: usize, now: u64, slot: u32, size: u32) {
        self.sample_queues(now); // before this arrival changes the queue
        let dir = &mut self.dirs[d];
        let id = dir.next_id;
        dir.next_id += 1;
        dir.counters.packets_in += 1;
        dir.counters.bytes_in += size as u64;
        let verdict = dir.link.admit(now, size);
        if let Some(ev) = self.events.as_mut() {
            let _ = ev.write(now, dir.name, id, Event::Arrival { size });
        }
        match verdict {
            Verdict::Deliver { due_ns, .. } => {
                dir.line.push(InFlight { due_ns, id, slot, len: size });
                if let Some(ev) = self.events.as_mut() {
                    let (qp, qb) = (dir.link.queue.len_packets(), dir.link.queue.len_bytes());
                    let _ = ev.write(now, dir.name, id, Event::Enqueue { size, queue_packets: qp, queue_bytes: qb, due_ns });
                }
            }
            Verdict::Drop(r) => {
                dir.counters.drop(r);
                self.pool.give(slot);
                if let Some(ev) = self.events.as_mut() {
                    let (qp, qb) = (dir.link.queue.len_packets(), dir.link.queue.len_bytes());
                    let _ = ev.write(now, dir.name, id, Event::Drop { size, queue_packets: qp, queue_bytes: qb, reason: r.as_str() });
                }
            }
        }
    }

    #[inline]
    fn deliver_all(&mut self, now: u64) {
        for d in 0..2 {
            while let Some(p) = self.dirs[d].line.pop_due(now) {
                self.deliver(d, p);
            }
        }
    }

    #[inline]
    fn deliver(&mut self, d: usize, p: InFlight) {
        let now = self.now();
        let dir = &mut self.dirs[d];
        let data = &self.pool.buf(p.slot)[..p.len as usize];
        let n = unsafe { libc::write(dir.dst, data.as_ptr() as *const _, data.len()) };
        if n < 0 {
            dir.counters.drop(DropReason::WriteError);
            if let Some(ev) = self.events.as_mut() {
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
            if let Some(ev) = self.events.as_mut() {
                let _ = ev.write(now, dir.name, p.id, Event::Departure { size: p.len, lateness_ns: late });
            }
        }
        self.pool.give(p.slot);
    }

    fn flush_files(&mut self) {
        if let Some(ev) = self.events.as_mut() {
            let _ = ev.flush();
        }
        if self.queue_out.is_some() {
            let now = self.now();
            self.sample_queues(now);
            let _ = self.queue_out.as_mut().map(|w| w.flush());
        }
        for d in self.dirs.iter_mut() {
            if let Some(p) = d.pcap.as_mut() {
                let _ = p.flush();
            }
        }
    }

    /// Counters of both directions as JSON.
    pub fn counters_json(&self) -> Value {
        let now = self.now();
        let dir = |d: &Direction| {
            let q = &d.link.queue;
            d.counters.to_json(q.peak_packets(), q.peak_bytes(), q.mean_until(now), d.line.len())
        };
        json!({
            "a_to_b": dir(&self.dirs[0]),
            "b_to_a": dir(&self.dirs[1]),
            "elapsed_s": (now as f64 / 1e9 * 1e6).round() / 1e6,
            "realtime": self.realtime_active,
            // What bounds how punctually packets leave: see docs/emulator.md "Timing".
            "timing": {
                "realtime": self.realtime_active,
                "timer_slack_ns": self.timer_slack_ns,
                "clock_resolution_ns": self.clock_resolution_ns,
                "nanosecond_timeouts": self.nanosecond_timeouts,
            },
            "seed": self.seed,
            "pool_slots_allocated": self.pool.allocated(),
        })
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
        for d in 0..2 {
            for s in self.dirs[d].line.drain_slots() {
                self.pool.give(s);
            }
        }
    }
}

/// The raw fd of a file (kept open by the caller for the loop's lifetime).
pub fn raw(f: &File) -> RawFd {
    f.as_raw_fd()
}

//! One direction of the emulated path: the pipeline a packet goes through.
//!
//! ```text
//! arrival -> outage? -> loss? -> drop-tail queue -> bottleneck (rate | trace | none)
//!         -> propagation delay (+ jitter) -> delivery
//! ```
//!
//! The bottleneck's schedule is deterministic given the arrivals, so the whole
//! fate of a packet (dropped, or its due time) is decided when it arrives; the
//! event loop then only has to hold it until its due time. Random loss hits a
//! packet before it enters the queue (as netem does), so lost packets use no
//! capacity.
//!
//! With an AQM discipline (`crate::aqm`: CoDel, FQ-CoDel, PIE) the queue holds the packets
//! themselves and decides at dequeue: `enqueue` takes an arrival, and the event loop calls
//! `serve_head` each time the bottleneck becomes free (`next_service_ns`), which gives the
//! packet to transmit (with its due time) and the packets the AQM dropped.

use crate::aqm::{Aqm, AqmDrop, Dequeued, Queued};
use crate::sojourn::SojournHistogram;
use crate::delay::DelaySampler;
use crate::loss::LossProcess;
use crate::outage::OutageSchedule;
use crate::queue::DropTailQueue;
use crate::rate::RateShaper;
use crate::trace::TraceShaper;

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Random loss (Bernoulli or Gilbert–Elliott).
    Loss,
    /// The queue's limit was exceeded (drop-tail, or an AQM's overflow).
    Queue,
    /// The AQM's decision (CoDel's control law, PIE's drop probability).
    Aqm,
    /// The link was down (scheduled outage).
    Outage,
    /// The emulator's packet pool was exhausted (`max_packets`).
    Memory,
    /// Writing to the destination TUN failed.
    WriteError,
    /// Larger than the configured MTU (truncated by the read).
    Oversize,
}

impl DropReason {
    pub const ALL: [DropReason; 7] = [
        DropReason::Loss,
        DropReason::Queue,
        DropReason::Aqm,
        DropReason::Outage,
        DropReason::Memory,
        DropReason::WriteError,
        DropReason::Oversize,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Loss => "loss",
            DropReason::Queue => "queue",
            DropReason::Aqm => "aqm",
            DropReason::Outage => "outage",
            DropReason::Memory => "memory",
            DropReason::WriteError => "write_error",
            DropReason::Oversize => "oversize",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The bottleneck's service discipline.
#[derive(Clone, Debug)]
pub enum Bottleneck {
    Unlimited,
    Rate(RateShaper),
    Trace(TraceShaper),
}

impl Bottleneck {
    #[inline]
    fn serve(&mut self, ready_ns: u64, size: u32, outages: &OutageSchedule) -> (u64, u64) {
        match self {
            Bottleneck::Unlimited => {
                let t = outages.next_up(ready_ns);
                (t, t)
            }
            Bottleneck::Rate(r) => r.serve(ready_ns, size, outages),
            Bottleneck::Trace(t) => t.serve(ready_ns, size, outages),
        }
    }
}

/// What happens to an arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted: delivered at `due_ns`; `queued` tells whether it waits in the queue.
    Deliver { due_ns: u64, queued: bool },
    Drop(DropReason),
}

/// One direction.
#[derive(Debug)]
pub struct Link {
    pub outages: OutageSchedule,
    pub loss: LossProcess,
    pub queue: DropTailQueue,
    pub bottleneck: Bottleneck,
    pub delay: DelaySampler,
    /// The AQM discipline, if any (None: the drop-tail `queue`).
    pub aqm: Option<Aqm>,
    /// When the bottleneck finishes the packet it is sending (AQM).
    pub busy_until_ns: u64,
    /// When the packet that found the AQM queue empty arrived.
    pub service_floor_ns: u64,
    /// Sojourn times in the queue (arrival to start of transmission).
    pub sojourn: SojournHistogram,
}

impl AqmDrop {
    pub fn reason(self) -> DropReason {
        match self {
            AqmDrop::Overflow => DropReason::Queue,
            AqmDrop::Aqm => DropReason::Aqm,
        }
    }
}

impl Link {
    /// Decides the fate of a packet of `size` bytes arriving at `now_ns`
    /// (nanoseconds since the emulator started).
    #[inline]
    pub fn admit(&mut self, now_ns: u64, size: u32) -> Verdict {
        if self.outages.is_down(now_ns) {
            return Verdict::Drop(DropReason::Outage);
        }
        if self.loss.lose() {
            return Verdict::Drop(DropReason::Loss);
        }
        self.queue.advance(now_ns);
        if !self.queue.fits(size) {
            return Verdict::Drop(DropReason::Queue);
        }
        let (start, finish) = self.bottleneck.serve(now_ns, size, &self.outages);
        let queued = start > now_ns;
        if queued {
            self.queue.push(start, size);
        }
        self.sojourn.record(start - now_ns);
        Verdict::Deliver { due_ns: self.delay.due(finish), queued }
    }

    /// With an AQM: what happens to an arrival before the queue (outage, random loss).
    #[inline]
    pub fn pre_queue(&mut self, now_ns: u64) -> Option<DropReason> {
        if self.outages.is_down(now_ns) {
            return Some(DropReason::Outage);
        }
        if self.loss.lose() {
            return Some(DropReason::Loss);
        }
        None
    }

    /// With an AQM: adds an arrival; returns the packets given up with their reasons.
    pub fn enqueue(&mut self, now_ns: u64, p: Queued) -> Vec<(Queued, DropReason)> {
        let aqm = self.aqm.as_mut().expect("enqueue needs an AQM");
        if aqm.is_empty() {
            self.service_floor_ns = now_ns;
        }
        aqm.enqueue(now_ns, p).into_iter().map(|(q, why)| (q, why.reason())).collect()
    }

    /// With an AQM holding packets: when the next one is taken off the queue.
    #[inline]
    pub fn next_service_ns(&self) -> Option<u64> {
        match &self.aqm {
            Some(a) if !a.is_empty() => Some(self.busy_until_ns.max(self.service_floor_ns)),
            _ => None,
        }
    }

    /// With an AQM: takes the head off the queue at `t_ns` (the bottleneck is free) and
    /// schedules it; the due time comes with the packet to transmit.
    pub fn serve_head(&mut self, t_ns: u64) -> (Dequeued, u64) {
        let aqm = self.aqm.as_mut().expect("serve_head needs an AQM");
        let d = aqm.dequeue(t_ns);
        let mut due = 0;
        if let Some(p) = d.packet {
            let (_, finish) = self.bottleneck.serve(t_ns, p.size, &self.outages);
            self.busy_until_ns = finish;
            self.sojourn.record(t_ns.saturating_sub(p.enqueued_ns));
            due = self.delay.due(finish);
        }
        (d, due)
    }

    /// The queue's length (packets, bytes) now.
    pub fn queue_len(&self) -> (u64, u64) {
        match &self.aqm {
            Some(a) => a.len(),
            None => (self.queue.len_packets(), self.queue.len_bytes()),
        }
    }

    /// The queue's length at `t_ns` (drop-tail: from its schedule; AQM: now's).
    pub fn queue_len_at(&self, t_ns: u64) -> (u64, u64) {
        match &self.aqm {
            Some(a) => a.len(),
            None => self.queue.len_at(t_ns),
        }
    }

    /// Peak length (packets, bytes).
    pub fn queue_peaks(&self) -> (u64, u64) {
        match &self.aqm {
            Some(a) => (a.peak_packets(), a.peak_bytes()),
            None => (self.queue.peak_packets(), self.queue.peak_bytes()),
        }
    }

    /// Time-average length over [0, `t_ns`].
    pub fn queue_mean_until(&self, t_ns: u64) -> (f64, f64) {
        match &self.aqm {
            Some(a) => a.mean_until(t_ns),
            None => self.queue.mean_until(t_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::LossSpec;
    use crate::outage::Window;
    use crate::queue::QueueLimit;
    use crate::rng::Rng;
    use crate::trace::Trace;

    const MS: u64 = 1_000_000;

    fn link(bottleneck: Bottleneck, limit: QueueLimit, delay_ns: u64, outages: Vec<Window>) -> Link {
        Link {
            outages: OutageSchedule::new(outages),
            loss: LossProcess::new(LossSpec::None, Rng::new(1, 1)),
            queue: DropTailQueue::new(limit),
            bottleneck,
            delay: DelaySampler::new(delay_ns, 0, false, Rng::new(1, 3)),
            aqm: None,
            busy_until_ns: 0,
            service_floor_ns: 0,
            sojourn: SojournHistogram::default(),
        }
    }

    #[test]
    fn unlimited_link_only_delays() {
        let mut l = link(Bottleneck::Unlimited, QueueLimit::Packets(1), 50 * MS, vec![]);
        for i in 0..100 {
            assert_eq!(l.admit(i, 1500), Verdict::Deliver { due_ns: i + 50 * MS, queued: false });
        }
    }

    #[test]
    fn rate_plus_delay_and_queue_overflow() {
        // 12 Mb/s: 1 ms per 1500 B packet; queue of 2 packets; 10 ms delay.
        let mut l = link(Bottleneck::Rate(RateShaper::new(12_000_000)), QueueLimit::Packets(2), 10 * MS, vec![]);
        let v: Vec<Verdict> = (0..5).map(|_| l.admit(0, 1500)).collect();
        assert_eq!(v[0], Verdict::Deliver { due_ns: 11 * MS, queued: false });
        assert_eq!(v[1], Verdict::Deliver { due_ns: 12 * MS, queued: true });
        assert_eq!(v[2], Verdict::Deliver { due_ns: 13 * MS, queued: true });
        assert_eq!(v[3], Verdict::Drop(DropReason::Queue));
        assert_eq!(v[4], Verdict::Drop(DropReason::Queue));
        // at 1 ms the second packet starts: room for one more
        assert_eq!(l.admit(MS, 1500), Verdict::Deliver { due_ns: 14 * MS, queued: true });
        assert_eq!(l.admit(MS, 1500), Verdict::Drop(DropReason::Queue));
    }

    #[test]
    fn byte_queue_admits_small_packets_when_big_ones_do_not_fit() {
        let mut l = link(Bottleneck::Rate(RateShaper::new(12_000_000)), QueueLimit::Bytes(2000), 0, vec![]);
        assert!(matches!(l.admit(0, 1500), Verdict::Deliver { queued: false, .. }));
        assert!(matches!(l.admit(0, 1500), Verdict::Deliver { queued: true, .. }));
        assert_eq!(l.admit(0, 1500), Verdict::Drop(DropReason::Queue));
        assert!(matches!(l.admit(0, 500), Verdict::Deliver { queued: true, .. }));
        assert_eq!(l.admit(0, 1), Verdict::Drop(DropReason::Queue));
    }

    #[test]
    fn outage_drops_arrivals_and_holds_the_queue() {
        let out = vec![Window { start_ns: 5 * MS, end_ns: 8 * MS }];
        let mut l = link(Bottleneck::Rate(RateShaper::new(12_000_000)), QueueLimit::Unlimited, 0, out);
        for _ in 0..6 {
            l.admit(0, 1500); // leave at 1,2,3,4,5 ms; the 6th would start at 5 ms: waits to 8
        }
        assert_eq!(l.admit(6 * MS, 1500), Verdict::Drop(DropReason::Outage));
        assert_eq!(l.admit(8 * MS, 1500), Verdict::Deliver { due_ns: 10 * MS, queued: true });
    }

    #[test]
    fn trace_bottleneck_follows_opportunities() {
        let t = Trace::parse("10\n20\n").unwrap();
        let mut l = link(Bottleneck::Trace(TraceShaper::new(t)), QueueLimit::Unlimited, MS, vec![]);
        assert_eq!(l.admit(0, 1500), Verdict::Deliver { due_ns: 11 * MS, queued: true });
        assert_eq!(l.admit(0, 1500), Verdict::Deliver { due_ns: 21 * MS, queued: true });
        assert_eq!(l.admit(0, 1500), Verdict::Deliver { due_ns: 31 * MS, queued: true });
    }

    #[test]
    fn loss_comes_before_the_queue() {
        let mut l = link(Bottleneck::Rate(RateShaper::new(12_000_000)), QueueLimit::Packets(1), 0, vec![]);
        l.loss = LossProcess::new(LossSpec::Bernoulli { p: 1.0 }, Rng::new(1, 1));
        for _ in 0..10 {
            assert_eq!(l.admit(0, 1500), Verdict::Drop(DropReason::Loss));
        }
        assert_eq!(l.queue.peak_packets(), 0);
    }
}

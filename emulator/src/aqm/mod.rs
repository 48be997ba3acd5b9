//! Active queue management at the bottleneck: the queue disciplines a direction can run
//! instead of the plain drop-tail queue (`crate::queue`), each in its own module.
//!
//! * [`codel`]: CoDel, RFC 8289 (Nichols, Jacobson, McGregor, Iyengar), drops at dequeue;
//! * [`fq_codel`]: FQ-CoDel, RFC 8290 (Hoeiland-Joergensen et al.), flows by 5-tuple hash,
//!   deficit round robin over new and old flows, CoDel per flow;
//! * [`pie`]: PIE, RFC 8033 (Pan et al.), drops at enqueue with a probability updated every
//!   `t_update` from the queueing delay;
//! * [`packet`]: what the disciplines read from an IP header (5-tuple, ECN field) and ECN
//!   marking (RFC 3168 §5, with the IPv4 header checksum updated as RFC 1624 eqn 3).
//!
//! Unlike drop-tail, whose whole schedule is known when a packet arrives, these disciplines
//! decide when a packet *leaves* the queue (CoDel's sojourn time is measured then), so a
//! direction with one holds real packets and the event loop dequeues one each time the
//! bottleneck becomes free (`Link::next_service_ns`). Config (`AqmSpec`, typed, from the
//! file) is kept apart from each discipline's mutable state.
//!
//! ECN (`ecn = true`): a packet whose ECN field is ECT(0), ECT(1) or CE that the AQM would
//! drop is marked CE and delivered instead (RFC 3168 §5; RFC 8289 §5.5, RFC 8290 §5.1,
//! RFC 8033 §5.1); a not-ECT packet is dropped as before, and an overflow of the limit always
//! drops.

pub mod codel;
pub mod fq_codel;
pub mod packet;
pub mod pie;

use crate::queue::QueueLimit;
use crate::rng::Rng;
use codel::CodelParams;
use fq_codel::{FqCodel, FqCodelParams};
use pie::{Pie, PieParams};
use std::collections::VecDeque;

/// The queue discipline of one direction, as configured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AqmSpec {
    /// The plain drop-tail queue (`crate::queue`), the default.
    DropTail,
    Codel(CodelParams),
    FqCodel(FqCodelParams),
    Pie(PieParams),
}

impl AqmSpec {
    /// The name as the configuration's `discipline` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            AqmSpec::DropTail => "drop_tail",
            AqmSpec::Codel(_) => "codel",
            AqmSpec::FqCodel(_) => "fq_codel",
            AqmSpec::Pie(_) => "pie",
        }
    }
}

/// A packet waiting in an AQM queue: its pool slot, per-direction id, size, arrival time,
/// flow hash (FQ-CoDel) and whether its ECN field lets it be marked instead of dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    pub slot: u32,
    pub id: u64,
    pub size: u32,
    pub enqueued_ns: u64,
    pub flow_hash: u64,
    /// ECN field ECT(0), ECT(1) or CE (RFC 3168 §5): markable.
    pub ect: bool,
    /// Decided at enqueue (PIE) to be marked CE when it leaves.
    pub mark_ce: bool,
}

/// Why an AQM queue gave a packet up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AqmDrop {
    /// The limit (packets or bytes) was exceeded.
    Overflow,
    /// The AQM's own decision (CoDel's control law, PIE's drop probability).
    Aqm,
}

/// What one dequeue gave: the packet to transmit (if any), whether to mark it CE, and the
/// packets dropped on the way (all for [`AqmDrop::Aqm`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dequeued {
    pub packet: Option<Queued>,
    pub mark_ce: bool,
    pub dropped: Vec<Queued>,
}

/// A FIFO of [`Queued`] packets with its byte count.
#[derive(Clone, Debug, Default)]
pub struct Fifo {
    pub packets: VecDeque<Queued>,
    pub bytes: u64,
}

impl Fifo {
    pub fn push(&mut self, p: Queued) {
        self.bytes += p.size as u64;
        self.packets.push_back(p);
    }

    pub fn pop(&mut self) -> Option<Queued> {
        let p = self.packets.pop_front()?;
        self.bytes -= p.size as u64;
        Some(p)
    }

    pub fn len(&self) -> usize {
        self.packets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
}

/// Whether a queue of `packets`/`bytes` is over `limit`.
pub fn over_limit(limit: QueueLimit, packets: u64, bytes: u64) -> bool {
    match limit {
        QueueLimit::Unlimited => false,
        QueueLimit::Packets(n) => packets > n,
        QueueLimit::Bytes(b) => bytes > b,
    }
}

/// CoDel on one FIFO (RFC 8289), the `codel` discipline.
#[derive(Clone, Debug)]
pub struct CodelQueue {
    pub params: CodelParams,
    pub limit: QueueLimit,
    pub fifo: Fifo,
    pub state: codel::CodelState,
}

impl codel::PacketSource for Fifo {
    fn pop(&mut self) -> Option<Queued> {
        Fifo::pop(self)
    }
    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }
}

/// The running discipline of a direction with AQM: the queue with its state, and the
/// occupancy's peaks and time integral (as `DropTailQueue` keeps them).
#[derive(Debug)]
pub struct Aqm {
    pub kind: AqmKind,
    peak_packets: u64,
    peak_bytes: u64,
    area_packets_ns: u128,
    area_bytes_ns: u128,
    last_ns: u64,
}

#[derive(Debug)]
pub enum AqmKind {
    Codel(CodelQueue),
    FqCodel(FqCodel),
    Pie(Pie),
}

impl Aqm {
    /// The discipline of `spec` (None for drop-tail), limited by `limit`; `mtu` is CoDel's
    /// MAXPACKET (RFC 8289 §4.2), `rng` is PIE's.
    pub fn new(spec: &AqmSpec, limit: QueueLimit, mtu: u32, rng: Rng) -> Option<Aqm> {
        let kind = match *spec {
            AqmSpec::DropTail => return None,
            AqmSpec::Codel(p) => AqmKind::Codel(CodelQueue {
                params: CodelParams { mtu_bytes: mtu, ..p },
                limit,
                fifo: Fifo::default(),
                state: codel::CodelState::default(),
            }),
            AqmSpec::FqCodel(p) => {
                let p = FqCodelParams { codel: CodelParams { mtu_bytes: mtu, ..p.codel }, ..p };
                AqmKind::FqCodel(FqCodel::new(p, limit))
            }
            AqmSpec::Pie(p) => AqmKind::Pie(Pie::new(p, limit, mtu, rng)),
        };
        Some(Aqm { kind, peak_packets: 0, peak_bytes: 0, area_packets_ns: 0, area_bytes_ns: 0, last_ns: 0 })
    }

    pub fn len(&self) -> (u64, u64) {
        match &self.kind {
            AqmKind::Codel(q) => (q.fifo.len() as u64, q.fifo.bytes),
            AqmKind::FqCodel(q) => (q.packets(), q.bytes()),
            AqmKind::Pie(q) => (q.fifo.len() as u64, q.fifo.bytes),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len().0 == 0
    }

    /// The discipline's name as the configuration spells it.
    pub fn name(&self) -> &'static str {
        match &self.kind {
            AqmKind::Codel(_) => "codel",
            AqmKind::FqCodel(_) => "fq_codel",
            AqmKind::Pie(_) => "pie",
        }
    }

    /// Removes every queued packet (at shutdown), returning their pool slots.
    pub fn drain_slots(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        loop {
            let p = match &mut self.kind {
                AqmKind::Codel(q) => q.fifo.pop(),
                AqmKind::FqCodel(q) => q.pop_any(),
                AqmKind::Pie(q) => q.fifo.pop(),
            };
            match p {
                Some(p) => out.push(p.slot),
                None => return out,
            }
        }
    }

    fn integrate(&mut self, t_ns: u64) {
        if t_ns > self.last_ns {
            let (p, b) = self.len();
            let dt = (t_ns - self.last_ns) as u128;
            self.area_packets_ns += p as u128 * dt;
            self.area_bytes_ns += b as u128 * dt;
            self.last_ns = t_ns;
        }
    }

    fn note_peak(&mut self) {
        let (p, b) = self.len();
        self.peak_packets = self.peak_packets.max(p);
        self.peak_bytes = self.peak_bytes.max(b);
    }

    /// Adds a packet arriving at `now_ns`; returns the packets given up: the arrival itself
    /// or (FQ-CoDel) the head of the fattest flow on overflow, or PIE's early drop.
    pub fn enqueue(&mut self, now_ns: u64, p: Queued) -> Vec<(Queued, AqmDrop)> {
        self.integrate(now_ns);
        let out = match &mut self.kind {
            AqmKind::Codel(q) => {
                let (n, b) = (q.fifo.len() as u64 + 1, q.fifo.bytes + p.size as u64);
                if over_limit(q.limit, n, b) {
                    vec![(p, AqmDrop::Overflow)]
                } else {
                    q.fifo.push(p);
                    vec![]
                }
            }
            AqmKind::FqCodel(q) => q.enqueue(p).into_iter().map(|v| (v, AqmDrop::Overflow)).collect(),
            AqmKind::Pie(q) => q.enqueue(now_ns, p).into_iter().collect(),
        };
        self.note_peak();
        out
    }

    /// Takes the next packet to transmit at `now_ns` (the bottleneck is free).
    pub fn dequeue(&mut self, now_ns: u64) -> Dequeued {
        self.integrate(now_ns);
        match &mut self.kind {
            AqmKind::Codel(q) => {
                let mut dropped = Vec::new();
                let r = q.state.dequeue(&q.params, now_ns, &mut q.fifo, &mut dropped);
                let (packet, mark_ce) = match r {
                    Some((p, m)) => (Some(p), m),
                    None => (None, false),
                };
                Dequeued { packet, mark_ce, dropped }
            }
            AqmKind::FqCodel(q) => q.dequeue(now_ns),
            AqmKind::Pie(q) => q.dequeue(now_ns),
        }
    }

    pub fn peak_packets(&self) -> u64 {
        self.peak_packets
    }

    pub fn peak_bytes(&self) -> u64 {
        self.peak_bytes
    }

    /// The time-average length (packets, bytes) over [0, `t_ns`], `t_ns` >= the last change.
    pub fn mean_until(&self, t_ns: u64) -> (f64, f64) {
        if t_ns == 0 {
            return (0.0, 0.0);
        }
        let (p, b) = self.len();
        let dt = t_ns.saturating_sub(self.last_ns) as u128;
        let ap = self.area_packets_ns + p as u128 * dt;
        let ab = self.area_bytes_ns + b as u128 * dt;
        (ap as f64 / t_ns as f64, ab as f64 / t_ns as f64)
    }
}

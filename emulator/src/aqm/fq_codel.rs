//! FQ-CoDel, "The Flow Queue CoDel Packet Scheduler and Active Queue Management Algorithm",
//! RFC 8290 (Hoeiland-Joergensen, McKenney, Taht, Gettys, Dumazet).
//!
//! * §4.1.1: a packet's flow is its 5-tuple hash modulo `flows` (`super::packet::flow_hash`);
//! * §4.1: a flow that was in neither list joins the tail of the new flows with a deficit of
//!   one `quantum`;
//! * §4.1.2: when the limit is exceeded, the head packet of the flow with the largest byte
//!   count is dropped (one packet per overflow, as the RFC words it; Linux drops a batch);
//! * §4.2: the scheduler serves the new flows before the old ones; a flow whose deficit is
//!   spent gets a quantum more and moves to the tail of the old flows; CoDel (RFC 8289,
//!   `super::codel`) runs on each flow's own queue with its own state; an empty new flow moves
//!   to the old list (so it cannot come back as new at once), an empty old flow leaves it.
//!
//! CoDel's MAXPACKET test looks at the whole queue's backlog, as Linux's `fq_codel` does.
//! Units: ns, bytes.

use super::codel::{CodelParams, CodelState, PacketSource};
use super::{over_limit, Dequeued, Fifo, Queued};
use crate::queue::QueueLimit;
use std::collections::VecDeque;

/// FQ-CoDel's configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FqCodelParams {
    /// Per-flow CoDel's target and interval (RFC 8290 §5.2.1: 5 ms, 100 ms).
    pub codel: CodelParams,
    /// DRR quantum, bytes (RFC 8290 §5.2.2: 1514, an Ethernet MTU's frame).
    pub quantum_bytes: u32,
    /// Number of flow queues (RFC 8290 §5.2.3: 1024).
    pub flows: u32,
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams { codel: CodelParams::default(), quantum_bytes: 1514, flows: 1024 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

#[derive(Clone, Debug)]
struct Flow {
    fifo: Fifo,
    deficit: i64,
    codel: CodelState,
    list: List,
}

/// One flow's queue as CoDel sees it: pops keep the discipline's totals right.
struct FlowSource<'a> {
    fifo: &'a mut Fifo,
    total_packets: &'a mut u64,
    total_bytes: &'a mut u64,
}

impl PacketSource for FlowSource<'_> {
    fn pop(&mut self) -> Option<Queued> {
        let p = self.fifo.pop()?;
        *self.total_packets -= 1;
        *self.total_bytes -= p.size as u64;
        Some(p)
    }
    fn backlog_bytes(&self) -> u64 {
        *self.total_bytes
    }
}

/// The discipline's state.
#[derive(Debug)]
pub struct FqCodel {
    pub params: FqCodelParams,
    limit: QueueLimit,
    flows: Vec<Flow>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    packets: u64,
    bytes: u64,
}

impl FqCodel {
    pub fn new(params: FqCodelParams, limit: QueueLimit) -> FqCodel {
        let n = params.flows.max(1) as usize;
        let flow = Flow { fifo: Fifo::default(), deficit: 0, codel: CodelState::default(), list: List::None };
        FqCodel {
            params,
            limit,
            flows: vec![flow; n],
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            packets: 0,
            bytes: 0,
        }
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The flow index of a packet (its hash modulo the number of flows).
    pub fn flow_of(&self, p: &Queued) -> usize {
        (p.flow_hash % self.flows.len() as u64) as usize
    }

    /// RFC 8290 §4.1: adds `p` to its flow; returns the packet dropped on overflow (§4.1.2),
    /// the head of the fattest flow.
    pub fn enqueue(&mut self, p: Queued) -> Option<Queued> {
        let i = self.flow_of(&p);
        let f = &mut self.flows[i];
        f.fifo.push(p);
        self.packets += 1;
        self.bytes += p.size as u64;
        if f.list == List::None {
            f.list = List::New;
            f.deficit = self.params.quantum_bytes as i64;
            self.new_flows.push_back(i);
        }
        if over_limit(self.limit, self.packets, self.bytes) {
            let fat = (0..self.flows.len()).max_by_key(|&j| (self.flows[j].fifo.bytes, std::cmp::Reverse(j))).unwrap();
            let v = self.flows[fat].fifo.pop().expect("the fattest flow holds a packet");
            self.packets -= 1;
            self.bytes -= v.size as u64;
            return Some(v);
        }
        None
    }

    /// Any queued packet, without scheduling (emptying the queue at shutdown).
    pub fn pop_any(&mut self) -> Option<Queued> {
        let f = self.flows.iter_mut().find(|f| !f.fifo.is_empty())?;
        let p = f.fifo.pop()?;
        self.packets -= 1;
        self.bytes -= p.size as u64;
        Some(p)
    }

    /// RFC 8290 §4.2: the next packet to send at `now`.
    pub fn dequeue(&mut self, now: u64) -> Dequeued {
        let mut out = Dequeued::default();
        loop {
            let (i, from_new) = if let Some(&i) = self.new_flows.front() {
                (i, true)
            } else if let Some(&i) = self.old_flows.front() {
                (i, false)
            } else {
                return out;
            };
            let quantum = self.params.quantum_bytes as i64;
            if self.flows[i].deficit <= 0 {
                self.flows[i].deficit += quantum;
                if from_new {
                    self.new_flows.pop_front();
                } else {
                    self.old_flows.pop_front();
                }
                self.old_flows.push_back(i);
                self.flows[i].list = List::Old;
                continue;
            }
            let params = self.params.codel;
            let f = &mut self.flows[i];
            let mut src = FlowSource { fifo: &mut f.fifo, total_packets: &mut self.packets, total_bytes: &mut self.bytes };
            let r = f.codel.dequeue(&params, now, &mut src, &mut out.dropped);
            match r {
                None => {
                    if from_new {
                        self.new_flows.pop_front();
                        self.old_flows.push_back(i);
                        f.list = List::Old;
                    } else {
                        self.old_flows.pop_front();
                        f.list = List::None;
                    }
                }
                Some((p, mark)) => {
                    f.deficit -= p.size as i64;
                    out.packet = Some(p);
                    out.mark_ce = mark;
                    return out;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn pkt(id: u64, flow: u64, size: u32, t: u64) -> Queued {
        Queued { slot: id as u32, id, size, enqueued_ns: t, flow_hash: flow, ect: false, mark_ce: false }
    }

    /// A bulk flow (flow 1) has 100 packets of 1500 B queued; a sparse flow (flow 2) sends one
    /// 200-B packet. The sparse packet is a new flow and is served next, ahead of the 99 bulk
    /// packets still queued (RFC 8290 §4.2 / §1.3 "sparse flows get priority").
    #[test]
    fn a_sparse_flow_is_served_before_a_bulk_backlog() {
        let mut q = FqCodel::new(FqCodelParams::default(), QueueLimit::Unlimited);
        for i in 0..100 {
            assert_eq!(q.enqueue(pkt(i, 1, 1500, 0)), None);
        }
        // the bulk flow is new at first: first packet served, deficit 1514 - 1500 = 14
        let first = q.dequeue(0).packet.unwrap();
        assert_eq!(first.id, 0);
        let second = q.dequeue(0).packet.unwrap(); // deficit 14 > 0: one more, -1486
        assert_eq!(second.id, 1);
        // bulk's deficit is spent: on the next dequeue it moves to the old list
        q.enqueue(pkt(1000, 2, 200, 0));
        let next = q.dequeue(0).packet.unwrap();
        assert_eq!(next.id, 1000, "the sparse flow's packet goes first");
        // then bulk again
        assert_eq!(q.dequeue(0).packet.unwrap().id, 2);
        assert_eq!(q.packets(), 97);
    }

    /// Two backlogged flows of 1500-B packets share in DRR turns: with a 1514-B quantum each
    /// turn sends one or two packets, so after 40 dequeues each has sent 20 (+-1).
    #[test]
    fn two_bulk_flows_share_by_bytes() {
        let mut q = FqCodel::new(FqCodelParams::default(), QueueLimit::Unlimited);
        for i in 0..100 {
            q.enqueue(pkt(i, 1, 1500, 0));
            q.enqueue(pkt(1000 + i, 2, 1500, 0));
        }
        let mut n1 = 0;
        for _ in 0..40 {
            if q.dequeue(0).packet.unwrap().flow_hash == 1 {
                n1 += 1;
            }
        }
        assert!((19..=21).contains(&n1), "{n1}");
    }

    /// A 10-packet limit: the bulk flow holds 9 packets, a sparse flow 1; the 11th packet
    /// (sparse) overflows and the head of the fattest flow (bulk, 13500 B) is dropped, not the
    /// arrival (RFC 8290 §4.1.2).
    #[test]
    fn overflow_drops_the_head_of_the_fattest_flow() {
        let mut q = FqCodel::new(FqCodelParams::default(), QueueLimit::Packets(10));
        for i in 0..9 {
            assert_eq!(q.enqueue(pkt(i, 1, 1500, 0)), None);
        }
        assert_eq!(q.enqueue(pkt(100, 2, 100, 0)), None);
        let dropped = q.enqueue(pkt(101, 2, 100, 0)).unwrap();
        assert_eq!((dropped.id, dropped.flow_hash), (0, 1));
        assert_eq!(q.packets(), 10);
        assert_eq!(q.bytes(), 8 * 1500 + 200);
    }

    /// CoDel runs per flow: a bulk flow with a standing 10-ms queue is dropped (after an
    /// interval) while a sparse flow with no standing queue is never dropped.
    #[test]
    fn per_flow_codel_drops_only_the_standing_flow() {
        let mut q = FqCodel::new(FqCodelParams::default(), QueueLimit::Unlimited);
        let mut drops = [0u32; 3];
        let mut id = 0;
        for ms in 0..1000u64 {
            let now = ms * MS;
            // bulk: arrives 1 packet/ms, starts with a 20-packet standing queue
            let n = if ms == 0 { 21 } else { 1 };
            for _ in 0..n {
                q.enqueue(pkt(id, 1, 1500, now));
                id += 1;
            }
            if ms % 20 == 0 {
                q.enqueue(pkt(id, 2, 100, now));
                id += 1;
            }
            let d = q.dequeue(now);
            for p in d.dropped {
                drops[p.flow_hash as usize] += 1;
            }
        }
        assert!(drops[1] > 0, "{drops:?}");
        assert_eq!(drops[2], 0);
    }
}

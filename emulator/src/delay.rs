//! Propagation delay: a fixed one-way delay plus optional variation (jitter),
//! and the delay line that holds packets until they are due.
//!
//! Jitter is uniform in `[-jitter_s, +jitter_s]` around `delay_s` (netem's
//! default uniform distribution), clamped so a packet is never due before it
//! left the bottleneck. Unless `reorder` is set, a packet is never due before
//! the one ahead of it (`due = max(due, previous due)`): jitter then stretches
//! gaps but keeps order, as on a real path with one queue. The delay line is a
//! FIFO in that case (due times are non-decreasing) and a binary heap ordered
//! by (due time, arrival number) when reordering is allowed.

use crate::rng::Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Per-packet delay sampler.
#[derive(Clone, Debug)]
pub struct DelaySampler {
    delay_ns: u64,
    jitter_ns: u64,
    reorder: bool,
    rng: Rng,
    last_due_ns: u64,
}

impl DelaySampler {
    pub fn new(delay_ns: u64, jitter_ns: u64, reorder: bool, rng: Rng) -> DelaySampler {
        DelaySampler { delay_ns, jitter_ns, reorder, rng, last_due_ns: 0 }
    }

    pub fn reorder(&self) -> bool {
        self.reorder
    }

    /// Due time of a packet that finished leaving the bottleneck at `sent_ns`.
    #[inline]
    pub fn due(&mut self, sent_ns: u64) -> u64 {
        let mut d = self.delay_ns;
        if self.jitter_ns > 0 {
            let u = self.rng.next_f64() * 2.0 - 1.0; // [-1, 1)
            let j = (u * self.jitter_ns as f64) as i64;
            d = (d as i64 + j).max(0) as u64;
        }
        let mut due = sent_ns + d;
        if !self.reorder {
            due = due.max(self.last_due_ns);
            self.last_due_ns = due;
        }
        due
    }
}

/// A packet waiting in the delay line: pool slot, size, arrival number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct InFlight {
    pub due_ns: u64,
    pub id: u64,
    pub slot: u32,
    pub len: u32,
}

/// Packets in flight, released in due-time order.
#[derive(Debug)]
pub enum DelayLine {
    Fifo(VecDeque<InFlight>),
    Heap(BinaryHeap<Reverse<InFlight>>),
}

impl DelayLine {
    pub fn new(reorder: bool) -> DelayLine {
        if reorder {
            DelayLine::Heap(BinaryHeap::with_capacity(4096))
        } else {
            DelayLine::Fifo(VecDeque::with_capacity(4096))
        }
    }

    #[inline]
    pub fn push(&mut self, p: InFlight) {
        match self {
            DelayLine::Fifo(q) => {
                debug_assert!(q.back().map_or(true, |b| b.due_ns <= p.due_ns));
                q.push_back(p)
            }
            DelayLine::Heap(h) => h.push(Reverse(p)),
        }
    }

    /// Earliest due time, if any packet is in flight.
    #[inline]
    pub fn next_due(&self) -> Option<u64> {
        match self {
            DelayLine::Fifo(q) => q.front().map(|p| p.due_ns),
            DelayLine::Heap(h) => h.peek().map(|r| r.0.due_ns),
        }
    }

    /// Removes and returns the earliest packet if it is due at `now_ns`.
    #[inline]
    pub fn pop_due(&mut self, now_ns: u64) -> Option<InFlight> {
        match self {
            DelayLine::Fifo(q) => {
                if q.front()?.due_ns <= now_ns {
                    q.pop_front()
                } else {
                    None
                }
            }
            DelayLine::Heap(h) => {
                if h.peek()?.0.due_ns <= now_ns {
                    h.pop().map(|r| r.0)
                } else {
                    None
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        match self {
            DelayLine::Fifo(q) => q.len(),
            DelayLine::Heap(h) => h.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes everything (at shutdown), returning the pool slots.
    pub fn drain_slots(&mut self) -> Vec<u32> {
        match self {
            DelayLine::Fifo(q) => q.drain(..).map(|p| p.slot).collect(),
            DelayLine::Heap(h) => h.drain().map(|r| r.0.slot).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn fixed_delay_is_exact() {
        let mut s = DelaySampler::new(50 * MS, 0, false, Rng::new(1, 3));
        assert_eq!(s.due(0), 50 * MS);
        assert_eq!(s.due(123), 50 * MS + 123);
    }

    #[test]
    fn jitter_without_reorder_keeps_order_and_stays_in_range() {
        let mut s = DelaySampler::new(20 * MS, 5 * MS, false, Rng::new(1, 3));
        let mut last = 0;
        let mut spread = (u64::MAX, 0);
        for i in 0..10_000u64 {
            // 0.1 ms apart (much less than the jitter) for the first half, 20 ms apart after
            let sent = if i < 5000 { i * 100_000 } else { 500 * MS + (i - 5000) * 20 * MS };
            let due = s.due(sent);
            assert!(due >= last, "reordered");
            assert!(due >= sent + 15 * MS && due <= sent + 25 * MS + 10 * MS);
            last = due;
            let d = due - sent;
            spread = (spread.0.min(d), spread.1.max(d));
        }
        assert!(spread.1 - spread.0 > 5 * MS);
    }

    #[test]
    fn jitter_with_reorder_is_uniform_and_reorders() {
        let mut s = DelaySampler::new(20 * MS, 5 * MS, true, Rng::new(2, 3));
        let n = 100_000u64;
        let (mut sum, mut reordered, mut last) = (0f64, 0, 0u64);
        for i in 0..n {
            let sent = i * 100_000;
            let due = s.due(sent);
            let d = due - sent;
            assert!(d >= 15 * MS && d <= 25 * MS);
            sum += d as f64;
            if due < last {
                reordered += 1;
            }
            last = due;
        }
        let mean = sum / n as f64;
        assert!((mean - 20e6).abs() < 0.05e6, "mean delay {mean}");
        assert!(reordered > 1000);
    }

    #[test]
    fn heap_releases_in_due_order() {
        let mut d = DelayLine::new(true);
        for (i, due) in [30u64, 10, 20, 10].iter().enumerate() {
            d.push(InFlight { due_ns: *due, id: i as u64, slot: i as u32, len: 1 });
        }
        assert_eq!(d.next_due(), Some(10));
        assert!(d.pop_due(9).is_none());
        let ids: Vec<u64> = std::iter::from_fn(|| d.pop_due(100)).map(|p| p.id).collect();
        assert_eq!(ids, vec![1, 3, 2, 0]);
    }

    #[test]
    fn fifo_releases_only_what_is_due() {
        let mut d = DelayLine::new(false);
        d.push(InFlight { due_ns: 5, id: 0, slot: 0, len: 1 });
        d.push(InFlight { due_ns: 7, id: 1, slot: 1, len: 1 });
        assert_eq!(d.pop_due(6).map(|p| p.id), Some(0));
        assert!(d.pop_due(6).is_none());
        assert_eq!(d.len(), 1);
        assert_eq!(d.drain_slots(), vec![1]);
    }
}

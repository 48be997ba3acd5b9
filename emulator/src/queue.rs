//! The bottleneck's drop-tail queue, limited in packets or in bytes: the two
//! router disciplines of Brosh, Baset, Misra, Rubenstein, Schulzrinne, "The
//! Delay-Friendliness of TCP for Real-Time Traffic", §5.3 "Validation Using
//! Drop-Tail Routers" (100-packet and 50,000-byte queues). Linux `pfifo` /
//! `bfifo` behave the same way.
//!
//! Because the bottleneck's schedule is computed when a packet is admitted
//! (see `link`), the queue stores each waiting packet's service start time;
//! a packet leaves the queue when its transmission starts. The packet being
//! transmitted is not counted, as with a qdisc whose head has gone to the NIC.

use std::collections::VecDeque;

/// Queue limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    Unlimited,
    Packets(u64),
    Bytes(u64),
}

#[derive(Clone, Debug)]
pub struct DropTailQueue {
    limit: QueueLimit,
    waiting: VecDeque<(u64, u32)>,
    bytes: u64,
    peak_packets: u64,
    peak_bytes: u64,
    /// The queue's length integrated over time up to `last_ns` (packet·ns and byte·ns), for
    /// its time average (papers/004's "average queue length").
    area_packets_ns: u128,
    area_bytes_ns: u128,
    last_ns: u64,
}

impl DropTailQueue {
    pub fn new(limit: QueueLimit) -> DropTailQueue {
        DropTailQueue {
            limit,
            waiting: VecDeque::new(),
            bytes: 0,
            peak_packets: 0,
            peak_bytes: 0,
            area_packets_ns: 0,
            area_bytes_ns: 0,
            last_ns: 0,
        }
    }

    /// Removes the packets whose transmission has started by `now_ns`, integrating the
    /// queue's length up to each one's start and then up to `now_ns`.
    #[inline]
    pub fn advance(&mut self, now_ns: u64) {
        while let Some(&(start, size)) = self.waiting.front() {
            if start > now_ns {
                break;
            }
            self.integrate(start);
            self.waiting.pop_front();
            self.bytes -= size as u64;
        }
        self.integrate(now_ns);
    }

    #[inline]
    fn integrate(&mut self, t_ns: u64) {
        if t_ns > self.last_ns {
            let dt = (t_ns - self.last_ns) as u128;
            self.area_packets_ns += self.waiting.len() as u128 * dt;
            self.area_bytes_ns += self.bytes as u128 * dt;
            self.last_ns = t_ns;
        }
    }

    /// The length (packets, bytes) at `t_ns` >= the last `advance`: the waiting packets whose
    /// transmission has not started by then. Changes nothing.
    pub fn len_at(&self, t_ns: u64) -> (u64, u64) {
        let (mut packets, mut bytes) = (self.waiting.len() as u64, self.bytes);
        for &(start, size) in self.waiting.iter() {
            if start > t_ns {
                break;
            }
            packets -= 1;
            bytes -= size as u64;
        }
        (packets, bytes)
    }

    /// The time-average length (packets, bytes) over [0, `t_ns`] (t_ns >= the last
    /// `advance`); (0, 0) at 0. Changes nothing.
    pub fn mean_until(&self, t_ns: u64) -> (f64, f64) {
        if t_ns == 0 {
            return (0.0, 0.0);
        }
        let (mut ap, mut ab, mut last) = (self.area_packets_ns, self.area_bytes_ns, self.last_ns);
        let (mut n, mut b) = (self.waiting.len() as u128, self.bytes as u128);
        for &(start, size) in self.waiting.iter() {
            if start > t_ns {
                break;
            }
            if start > last {
                ap += n * (start - last) as u128;
                ab += b * (start - last) as u128;
                last = start;
            }
            n -= 1;
            b -= size as u128;
        }
        if t_ns > last {
            ap += n * (t_ns - last) as u128;
            ab += b * (t_ns - last) as u128;
        }
        (ap as f64 / t_ns as f64, ab as f64 / t_ns as f64)
    }

    /// Whether a packet of `size` bytes fits (call `advance` first).
    #[inline]
    pub fn fits(&self, size: u32) -> bool {
        match self.limit {
            QueueLimit::Unlimited => true,
            QueueLimit::Packets(n) => (self.waiting.len() as u64) < n,
            QueueLimit::Bytes(b) => self.bytes + size as u64 <= b,
        }
    }

    /// Adds a packet that will start transmission at `start_ns`.
    #[inline]
    pub fn push(&mut self, start_ns: u64, size: u32) {
        self.waiting.push_back((start_ns, size));
        self.bytes += size as u64;
        self.peak_packets = self.peak_packets.max(self.waiting.len() as u64);
        self.peak_bytes = self.peak_bytes.max(self.bytes);
    }

    pub fn len_packets(&self) -> u64 {
        self.waiting.len() as u64
    }

    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }

    pub fn peak_packets(&self) -> u64 {
        self.peak_packets
    }

    pub fn peak_bytes(&self) -> u64 {
        self.peak_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_limit_drops_the_tail() {
        let mut q = DropTailQueue::new(QueueLimit::Packets(3));
        let mut accepted = 0;
        for i in 0..5u64 {
            q.advance(0);
            if q.fits(1500) {
                q.push(10 + i, 1500);
                accepted += 1;
            }
        }
        assert_eq!(accepted, 3);
        assert_eq!(q.len_packets(), 3);
        assert_eq!(q.len_bytes(), 4500);
        // a tiny packet is refused as well: the limit counts packets
        assert!(!q.fits(40));
        q.advance(10); // first one starts sending
        assert_eq!(q.len_packets(), 2);
        assert!(q.fits(40));
        assert_eq!(q.peak_packets(), 3);
    }

    #[test]
    fn byte_limit_counts_bytes() {
        let mut q = DropTailQueue::new(QueueLimit::Bytes(3000));
        assert!(q.fits(1500));
        q.push(5, 1500);
        assert!(q.fits(1500));
        q.push(6, 1500);
        assert!(!q.fits(1500));
        assert!(!q.fits(1)); // exactly full
        q.advance(5);
        assert!(q.fits(1500));
        assert!(!q.fits(1501));
        q.push(7, 100);
        q.push(8, 100);
        assert_eq!(q.len_packets(), 3);
        assert_eq!(q.len_bytes(), 1700);
        assert_eq!(q.peak_bytes(), 3000);
        q.advance(100);
        assert_eq!((q.len_packets(), q.len_bytes()), (0, 0));
    }

    /// A hand-computed sequence: packets of 100 bytes admitted at 0, 0, 10 and 40 ns, whose
    /// transmissions start at 20, 30, 60 and 70 ns. The length is 2 on [0, 10), 3 on [10, 20),
    /// 2 on [20, 30), 1 on [30, 40), 2 on [40, 60), 1 on [60, 70), 0 from 70: over [0, 100]
    /// the area is 20 + 30 + 20 + 10 + 40 + 10 = 130 packet·ns, a mean of 1.3 packets.
    #[test]
    fn time_average_and_length_at_a_time_match_a_hand_computed_sequence() {
        let mut q = DropTailQueue::new(QueueLimit::Packets(10));
        q.advance(0);
        q.push(20, 100);
        q.push(30, 100);
        assert_eq!(q.len_at(5), (2, 200));
        q.advance(10);
        q.push(60, 100);
        assert_eq!(q.len_at(15), (3, 300));
        assert_eq!(q.len_at(25), (2, 200)); // not advanced yet: read without changing anything
        assert_eq!(q.len_at(35), (1, 100));
        // mean over [0, 40] before the fourth arrival: 20 + 30 + 20 + 10 = 80 packet·ns
        let (p, b) = q.mean_until(40);
        assert!((p - 2.0).abs() < 1e-12 && (b - 200.0).abs() < 1e-9, "{p} {b}");
        q.advance(40);
        q.push(70, 100);
        assert_eq!(q.len_at(65), (1, 100));
        let (p, b) = q.mean_until(100);
        assert!((p - 1.3).abs() < 1e-12 && (b - 130.0).abs() < 1e-9, "{p} {b}");
        q.advance(100); // advancing for real gives the same
        assert_eq!(q.mean_until(100), (p, b));
        assert_eq!(q.len_at(100), (0, 0));
        assert_eq!(q.mean_until(0), (0.0, 0.0));
    }

    #[test]
    fn unlimited_accepts_everything() {
        let mut q = DropTailQueue::new(QueueLimit::Unlimited);
        for i in 0..10_000 {
            assert!(q.fits(65535));
            q.push(i, 65535);
        }
        assert_eq!(q.peak_packets(), 10_000);
    }
}

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
}

impl DropTailQueue {
    pub fn new(limit: QueueLimit) -> DropTailQueue {
        DropTailQueue { limit, waiting: VecDeque::new(), bytes: 0, peak_packets: 0, peak_bytes: 0 }
    }

    /// Removes the packets whose transmission has started by `now_ns`.
    #[inline]
    pub fn advance(&mut self, now_ns: u64) {
        while let Some(&(start, size)) = self.waiting.front() {
            if start > now_ns {
                break;
            }
            self.waiting.pop_front();
            self.bytes -= size as u64;
        }
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

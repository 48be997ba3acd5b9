//! A pool of packet buffers, so the data path does not allocate per packet.
//!
//! Slots are allocated on first use and recycled through a free list; the pool
//! grows up to `max_slots` (beyond that, arrivals are dropped with reason
//! `memory`, which bounds the emulator's memory whatever the configuration).

pub struct PacketPool {
    slots: Vec<Box<[u8]>>,
    free: Vec<u32>,
    slot_bytes: usize,
    max_slots: usize,
}

impl PacketPool {
    pub fn new(slot_bytes: usize, max_slots: usize) -> PacketPool {
        PacketPool { slots: Vec::new(), free: Vec::new(), slot_bytes, max_slots }
    }

    /// Takes a free slot, or `None` when the pool is at its limit.
    #[inline]
    pub fn take(&mut self) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            return Some(i);
        }
        if self.slots.len() >= self.max_slots {
            return None;
        }
        self.slots.push(vec![0u8; self.slot_bytes].into_boxed_slice());
        Some((self.slots.len() - 1) as u32)
    }

    #[inline]
    pub fn give(&mut self, slot: u32) {
        self.free.push(slot);
    }

    #[inline]
    pub fn buf(&self, slot: u32) -> &[u8] {
        &self.slots[slot as usize]
    }

    #[inline]
    pub fn buf_mut(&mut self, slot: u32) -> &mut [u8] {
        &mut self.slots[slot as usize]
    }

    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Slots allocated so far (peak simultaneous packets held).
    pub fn allocated(&self) -> usize {
        self.slots.len()
    }

    pub fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycles_and_respects_limit() {
        let mut p = PacketPool::new(2048, 2);
        let a = p.take().unwrap();
        let b = p.take().unwrap();
        assert_ne!(a, b);
        assert!(p.take().is_none());
        p.buf_mut(a)[0] = 7;
        p.give(a);
        assert_eq!(p.take(), Some(a));
        assert_eq!(p.buf(a)[0], 7);
        assert_eq!(p.allocated(), 2);
        assert_eq!(p.buf(b).len(), 2048);
    }
}

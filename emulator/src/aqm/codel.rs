//! CoDel, "Controlled Delay Active Queue Management", RFC 8289 (Nichols, Jacobson, McGregor,
//! Iyengar), as its §5 pseudo-code: a packet's sojourn time (now − its arrival, measured at
//! dequeue) above `target` for at least `interval` puts the queue in the dropping state; there
//! it drops one packet at `drop_next` and sets the next drop `interval / sqrt(count)` later
//! (the control law, §5.5), leaving the state when a sojourn falls below `target` or the
//! backlog is at most one MTU (MAXPACKET, §4.2).
//!
//! With `ecn`, a markable packet (ECT or CE) the law would drop is marked CE and sent instead,
//! as Linux's `codel_dequeue` (include/net/codel_impl.h) does: in the dropping state the mark
//! counts as the drop and ends this dequeue; entering it, the marked packet is the one sent.
//!
//! Units: nanoseconds since the emulator started; sizes in bytes.

use super::Queued;

/// CoDel's configuration (RFC 8289 §4.2–4.4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodelParams {
    /// TARGET, the acceptable standing queue delay, ns (RFC default 5 ms).
    pub target_ns: u64,
    /// INTERVAL, ns (RFC default 100 ms): a sojourn above target this long starts dropping.
    pub interval_ns: u64,
    /// Mark ECN-capable packets CE instead of dropping them.
    pub ecn: bool,
    /// MAXPACKET, bytes: with at most this much queued nothing is dropped (set from the MTU).
    pub mtu_bytes: u32,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams { target_ns: 5_000_000, interval_ns: 100_000_000, ecn: false, mtu_bytes: 1500 }
    }
}

/// What CoDel dequeues from: a FIFO (the `codel` discipline) or one flow's queue (FQ-CoDel).
pub trait PacketSource {
    fn pop(&mut self) -> Option<Queued>;
    /// Bytes still queued after the pop (RFC 8289's `bytes()`).
    fn backlog_bytes(&self) -> u64;
}

/// CoDel's mutable state (RFC 8289 §5.2's member variables).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CodelState {
    /// `first_above_time_`: when the sojourn will have been above target for an interval.
    pub first_above_ns: Option<u64>,
    /// `drop_next_`: time of the next drop in the dropping state.
    pub drop_next_ns: u64,
    /// `count_`: drops (or marks) since entering the dropping state.
    pub count: u32,
    /// `lastcount_`: `count` when the dropping state was last entered.
    pub lastcount: u32,
    /// `dropping_`: in the dropping state.
    pub dropping: bool,
}

/// RFC 8289 §5.5 `control_law(t, count) = t + interval / sqrt(count)`, ns.
pub fn control_law(t_ns: u64, interval_ns: u64, count: u32) -> u64 {
    t_ns + (interval_ns as f64 / (count.max(1) as f64).sqrt()) as u64
}

impl CodelState {
    /// RFC 8289 §5.3 `dodequeue`: the head packet and whether CoDel may drop it.
    fn dodequeue(&mut self, p: &CodelParams, now: u64, src: &mut dyn PacketSource) -> (Option<Queued>, bool) {
        let Some(pkt) = src.pop() else {
            self.first_above_ns = None;
            return (None, false);
        };
        let sojourn = now.saturating_sub(pkt.enqueued_ns);
        let mut ok_to_drop = false;
        if sojourn < p.target_ns || src.backlog_bytes() <= p.mtu_bytes as u64 {
            self.first_above_ns = None;
        } else {
            match self.first_above_ns {
                None => self.first_above_ns = Some(now + p.interval_ns),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        (Some(pkt), ok_to_drop)
    }

    /// RFC 8289 §5.4 `dequeue` at `now`: the packet to send and whether to mark it CE; the
    /// packets dropped are appended to `dropped`.
    pub fn dequeue(
        &mut self,
        p: &CodelParams,
        now: u64,
        src: &mut dyn PacketSource,
        dropped: &mut Vec<Queued>,
    ) -> Option<(Queued, bool)> {
        let (mut pkt, mut ok_to_drop) = self.dodequeue(p, now, src);
        let mut mark = false;
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next_ns {
                let cur = pkt.expect("ok_to_drop implies a packet");
                self.count += 1;
                if p.ecn && cur.ect {
                    mark = true;
                    self.drop_next_ns = control_law(self.drop_next_ns, p.interval_ns, self.count);
                    break;
                }
                dropped.push(cur);
                (pkt, ok_to_drop) = self.dodequeue(p, now, src);
                if !ok_to_drop {
                    self.dropping = false;
                } else {
                    self.drop_next_ns = control_law(self.drop_next_ns, p.interval_ns, self.count);
                }
            }
        } else if ok_to_drop {
            let cur = pkt.expect("ok_to_drop implies a packet");
            if p.ecn && cur.ect {
                mark = true;
            } else {
                dropped.push(cur);
                (pkt, _) = self.dodequeue(p, now, src);
            }
            self.dropping = true;
            // If min went above target close to when it last went below, assume that the
            // drop rate that controlled the queue on the last cycle is a good starting point.
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = 1;
            if delta > 1 && delta < u32::MAX / 2 && now.saturating_sub(self.drop_next_ns) < 16 * p.interval_ns {
                self.count = delta;
            }
            self.drop_next_ns = control_law(now, p.interval_ns, self.count);
            self.lastcount = self.count;
        }
        pkt.map(|x| (x, mark))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Fifo;
    use super::*;

    const MS: u64 = 1_000_000;

    fn pkt(id: u64, t: u64, ect: bool) -> Queued {
        Queued { slot: id as u32, id, size: 1500, enqueued_ns: t, flow_hash: 0, ect, mark_ce: false }
    }

    /// A standing queue: 600 packets queued at 0, one dequeued per ms (12 Mb/s). The sojourn
    /// reaches target (5 ms) at the dequeue at 5 ms, which sets first_above = 105 ms; the first
    /// drop is at the dequeue at 105 ms (count = 1, next drop at 105 + 100/sqrt(1) = 205 ms);
    /// then drops follow at 205 + 100/sqrt(2) = 275.71 ms, + 100/sqrt(3) = 333.45 ms,
    /// + 100/sqrt(4) = 383.45 ms (RFC 8289 §5.5's spacing), each at the first dequeue at or
    /// after that time.
    #[test]
    fn first_drop_after_an_interval_above_target_then_interval_over_sqrt_count() {
        let p = CodelParams::default();
        let mut s = CodelState::default();
        let mut q = Fifo::default();
        for i in 0..600 {
            q.push(pkt(i, 0, false));
        }
        let mut drop_times = Vec::new();
        let mut sent = 0;
        for ms in 0..400u64 {
            let mut dropped = Vec::new();
            let r = s.dequeue(&p, ms * MS, &mut q, &mut dropped);
            assert!(r.is_some());
            sent += 1;
            for _ in dropped {
                drop_times.push(ms);
            }
        }
        assert_eq!(sent, 400);
        assert_eq!(drop_times, vec![105, 205, 276, 334, 384]);
        assert_eq!(q.len(), 600 - 400 - 5);
        assert_eq!(s.count, 5);
        assert!(s.dropping);
        let law = |t, n| control_law(t, 100 * MS, n);
        assert_eq!(s.drop_next_ns, law(law(law(law(205 * MS, 2), 3), 4), 5));
        assert_eq!(law(205 * MS, 2), 205 * MS + 70_710_678);
    }

    #[test]
    fn below_target_or_one_mtu_backlog_never_drops() {
        let p = CodelParams::default();
        let mut s = CodelState::default();
        let mut q = Fifo::default();
        // sojourn 4 ms (< 5 ms target) for a long time
        for ms in 0..1000u64 {
            q.push(pkt(ms, ms * MS, false));
            q.push(pkt(ms, ms * MS, false));
            let mut dropped = Vec::new();
            if ms >= 4 {
                assert!(s.dequeue(&p, ms * MS, &mut q, &mut dropped).is_some());
                assert!(s.dequeue(&p, ms * MS, &mut q, &mut dropped).is_some());
            }
            assert!(dropped.is_empty());
        }
        // a large sojourn but only one packet left behind: not dropped
        let mut s = CodelState::default();
        let mut q = Fifo::default();
        for ms in 0..1000u64 {
            q.push(pkt(ms, 0, false));
            q.push(pkt(ms, 0, false));
            let mut dropped = Vec::new();
            s.dequeue(&p, ms * MS, &mut q, &mut dropped);
            assert!(dropped.is_empty() || q.len() > 1, "dropped at {ms} with {} queued", q.len());
        }
    }

    /// With ECN the same standing queue of ECT packets is marked at the times it would have
    /// been dropped, and every packet is sent.
    #[test]
    fn ecn_marks_at_the_drop_times_and_drops_nothing() {
        let p = CodelParams { ecn: true, ..CodelParams::default() };
        let mut s = CodelState::default();
        let mut q = Fifo::default();
        for i in 0..600 {
            q.push(pkt(i, 0, true));
        }
        let mut marks = Vec::new();
        for ms in 0..400u64 {
            let mut dropped = Vec::new();
            let (_, m) = s.dequeue(&p, ms * MS, &mut q, &mut dropped).unwrap();
            assert!(dropped.is_empty());
            if m {
                marks.push(ms);
            }
        }
        assert_eq!(marks, vec![105, 205, 276, 334, 384]);
        assert_eq!(q.len(), 200);
    }

    #[test]
    fn leaves_the_dropping_state_when_the_sojourn_falls_below_target() {
        let p = CodelParams::default();
        let mut s = CodelState::default();
        let mut q = Fifo::default();
        for i in 0..200 {
            q.push(pkt(i, 0, false));
        }
        let mut dropped = Vec::new();
        for ms in 0..=105u64 {
            s.dequeue(&p, ms * MS, &mut q, &mut dropped);
        }
        assert!(s.dropping && dropped.len() == 1);
        // the rest of the queue is fresh: sojourn 0
        while q.pop().is_some() {}
        for i in 0..10 {
            q.push(pkt(1000 + i, 106 * MS, false));
        }
        s.dequeue(&p, 106 * MS, &mut q, &mut dropped);
        assert!(!s.dropping);
        assert_eq!(s.first_above_ns, None);
    }
}

//! PIE, "Proportional Integral Controller Enhanced (PIE): A Lightweight Control Scheme to
//! Address the Bufferbloat Problem", RFC 8033 (Pan, Natarajan, Piglione, Prabhu, Subramanian,
//! Baker, VerSteeg).
//!
//! * §4.1 (random drop at enqueue): no drop while the burst allowance lasts, nor when the
//!   delay was below half the target with `drop_prob < 0.2`, nor with at most two mean packets
//!   queued; otherwise drop with probability `drop_prob`. With `ecn` a markable packet is
//!   marked CE instead while `drop_prob <= 0.1` (§5.1's mark threshold; above it, drop);
//! * §4.2 (every `t_update`): `p = alpha (qdelay - target) + beta (qdelay - qdelay_old)`,
//!   scaled down while `drop_prob` is small (the auto-tuning table), capped at 0.02 per update
//!   when `drop_prob >= 0.1` (Appendix B), decayed by 0.98 when the queue was idle at both
//!   updates, bounded to [0, 1];
//! * §4.3 (burst tolerance): the allowance shrinks by `t_update` each update and is reset to
//!   `max_burst` when `drop_prob` is 0 and both delays are below half the target;
//! * the queueing delay is the timestamp form of §4.2 ("current_qdelay" as the sojourn time of
//!   the packet last dequeued; 0 when the queue is empty), as Linux's `pie` without
//!   `dq_rate_estimator`.
//!
//! The update runs lazily: on every enqueue and dequeue, once per `t_update` boundary passed.
//! Units: delays in ns (seconds in the formulas), alpha and beta in 1/s.

use super::{over_limit, AqmDrop, Dequeued, Fifo, Queued};
use crate::queue::QueueLimit;
use crate::rng::Rng;

/// PIE's configuration (RFC 8033 §5 defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PieParams {
    /// QDELAY_REF, ns (15 ms).
    pub target_ns: u64,
    /// T_UPDATE, ns (15 ms).
    pub t_update_ns: u64,
    /// MAX_BURST, ns (150 ms).
    pub max_burst_ns: u64,
    /// alpha, 1/s (0.125).
    pub alpha: f64,
    /// beta, 1/s (1.25).
    pub beta: f64,
    pub ecn: bool,
}

impl Default for PieParams {
    fn default() -> Self {
        PieParams { target_ns: 15_000_000, t_update_ns: 15_000_000, max_burst_ns: 150_000_000, alpha: 0.125, beta: 1.25, ecn: false }
    }
}

/// RFC 8033 §5.1: above this drop probability ECN-capable packets are dropped too.
pub const MARK_ECN_THRESHOLD: f64 = 0.1;

/// PIE's mutable state (RFC 8033 §4's variables).
#[derive(Clone, Debug, PartialEq)]
pub struct PieState {
    pub drop_prob: f64,
    /// qdelay_old, ns.
    pub qdelay_old_ns: u64,
    /// current_qdelay, ns.
    pub qdelay_ns: u64,
    /// burst_allowance, ns.
    pub burst_allowance_ns: u64,
    /// When the next update is due, ns.
    pub next_update_ns: u64,
}

/// The `pie` discipline: a FIFO, its state and its random stream.
#[derive(Debug)]
pub struct Pie {
    pub params: PieParams,
    pub limit: QueueLimit,
    pub fifo: Fifo,
    pub state: PieState,
    /// MEAN_PKTSIZE, bytes (the MTU).
    mean_pkt_bytes: u32,
    rng: Rng,
}

impl PieState {
    /// RFC 8033 §4.2–4.3: one update of the drop probability and the burst allowance.
    pub fn update(&mut self, p: &PieParams) {
        let s = |ns: u64| ns as f64 / 1e9;
        let (cur, old, target) = (s(self.qdelay_ns), s(self.qdelay_old_ns), s(p.target_ns));
        let mut dp = p.alpha * (cur - target) + p.beta * (cur - old);
        // §4.2's auto-tuning: smaller steps while the probability is small.
        let scale = match self.drop_prob {
            x if x < 0.000001 => 1.0 / 2048.0,
            x if x < 0.00001 => 1.0 / 512.0,
            x if x < 0.0001 => 1.0 / 128.0,
            x if x < 0.001 => 1.0 / 32.0,
            x if x < 0.01 => 1.0 / 8.0,
            x if x < 0.1 => 1.0 / 2.0,
            _ => 1.0,
        };
        dp *= scale;
        // Appendix B: cap the increase once the probability is high.
        if self.drop_prob >= 0.1 && dp > 0.02 {
            dp = 0.02;
        }
        self.drop_prob += dp;
        if self.qdelay_ns == 0 && self.qdelay_old_ns == 0 {
            self.drop_prob *= 0.98;
        }
        self.drop_prob = self.drop_prob.clamp(0.0, 1.0);
        // §4.3 burst tolerance.
        self.burst_allowance_ns = self.burst_allowance_ns.saturating_sub(p.t_update_ns);
        if self.drop_prob == 0.0 && 2 * self.qdelay_ns < p.target_ns && 2 * self.qdelay_old_ns < p.target_ns {
            self.burst_allowance_ns = p.max_burst_ns;
        }
        self.qdelay_old_ns = self.qdelay_ns;
    }
}

impl Pie {
    pub fn new(params: PieParams, limit: QueueLimit, mean_pkt_bytes: u32, rng: Rng) -> Pie {
        let state = PieState {
            drop_prob: 0.0,
            qdelay_old_ns: 0,
            qdelay_ns: 0,
            burst_allowance_ns: params.max_burst_ns,
            next_update_ns: params.t_update_ns,
        };
        Pie { params, limit, fifo: Fifo::default(), state, mean_pkt_bytes, rng }
    }

    /// Runs every update due by `now`.
    fn catch_up(&mut self, now: u64) {
        while now >= self.state.next_update_ns {
            if self.fifo.is_empty() {
                self.state.qdelay_ns = 0;
            }
            self.state.update(&self.params);
            self.state.next_update_ns += self.params.t_update_ns.max(1);
        }
    }

    /// RFC 8033 §4.1 `drop_early`: whether to drop (or mark) an arrival of `size` bytes.
    fn drop_early(&mut self, size: u32) -> bool {
        let st = &self.state;
        if st.burst_allowance_ns > 0 {
            return false;
        }
        if (2 * st.qdelay_old_ns < self.params.target_ns && st.drop_prob < 0.2)
            || self.fifo.bytes + size as u64 <= 2 * self.mean_pkt_bytes as u64
        {
            return false;
        }
        self.rng.chance(st.drop_prob)
    }

    /// Adds an arrival at `now`; returns it with the cause if it is dropped. A packet PIE
    /// would drop that ECN lets it mark is queued with `ect` kept and marked at dequeue.
    pub fn enqueue(&mut self, now: u64, mut p: Queued) -> Option<(Queued, AqmDrop)> {
        self.catch_up(now);
        if over_limit(self.limit, self.fifo.len() as u64 + 1, self.fifo.bytes + p.size as u64) {
            return Some((p, AqmDrop::Overflow));
        }
        if self.drop_early(p.size) {
            if self.params.ecn && p.ect && self.state.drop_prob <= MARK_ECN_THRESHOLD {
                p.mark_ce = true;
            } else {
                return Some((p, AqmDrop::Aqm));
            }
        }
        self.fifo.push(p);
        None
    }

    /// The head packet at `now`; its sojourn becomes the current queueing delay.
    pub fn dequeue(&mut self, now: u64) -> Dequeued {
        self.catch_up(now);
        let mut out = Dequeued::default();
        if let Some(p) = self.fifo.pop() {
            self.state.qdelay_ns = now.saturating_sub(p.enqueued_ns);
            out.mark_ce = p.mark_ce;
            out.packet = Some(p);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Hand-computed updates with the defaults (alpha 0.125, beta 1.25, target 15 ms):
    /// from p = 0 with qdelay 35 ms, old 15 ms: 0.125 * 0.020 + 1.25 * 0.020 = 0.0275, scaled
    /// by 1/2048 (p < 1e-6): 1.3428e-5. Next, qdelay 35 ms again (old 35): 0.0025 / 128
    /// (1e-5 <= p < 1e-4) = 1.9531e-5 more. At p = 0.05 with qdelay 115 ms, old 15 ms:
    /// 0.0125 + 0.125 = 0.1375, halved (p < 0.1): p = 0.11875. At p = 0.5, the same step is
    /// capped at 0.02. Queue idle at both updates: p decays by 0.98 (here with a step of
    /// 0.125 * -0.015 = -0.001875 first).
    #[test]
    fn probability_update_matches_hand_computed_steps() {
        let p = PieParams::default();
        let mut s = PieState { drop_prob: 0.0, qdelay_old_ns: 15 * MS, qdelay_ns: 35 * MS, burst_allowance_ns: 0, next_update_ns: 0 };
        s.update(&p);
        assert!((s.drop_prob - 0.0275 / 2048.0).abs() < 1e-15, "{}", s.drop_prob);
        assert_eq!(s.qdelay_old_ns, 35 * MS);
        s.update(&p);
        assert!((s.drop_prob - (0.0275 / 2048.0 + 0.0025 / 128.0)).abs() < 1e-15, "{}", s.drop_prob);

        let mut s = PieState { drop_prob: 0.05, qdelay_old_ns: 15 * MS, qdelay_ns: 115 * MS, burst_allowance_ns: 0, next_update_ns: 0 };
        s.update(&p);
        assert!((s.drop_prob - 0.11875).abs() < 1e-12, "{}", s.drop_prob);

        let mut s = PieState { drop_prob: 0.5, qdelay_old_ns: 15 * MS, qdelay_ns: 115 * MS, burst_allowance_ns: 0, next_update_ns: 0 };
        s.update(&p);
        assert!((s.drop_prob - 0.52).abs() < 1e-12);

        let mut s = PieState { drop_prob: 0.5, qdelay_old_ns: 0, qdelay_ns: 0, burst_allowance_ns: 0, next_update_ns: 0 };
        s.update(&p);
        assert!((s.drop_prob - (0.5 - 0.001875) * 0.98).abs() < 1e-12, "{}", s.drop_prob);
    }

    #[test]
    fn burst_allowance_runs_down_and_is_restored_when_calm() {
        let p = PieParams::default();
        let mut s = PieState { drop_prob: 0.0, qdelay_old_ns: 0, qdelay_ns: 40 * MS, burst_allowance_ns: 150 * MS, next_update_ns: 0 };
        s.update(&p);
        assert_eq!(s.burst_allowance_ns, 135 * MS);
        for _ in 0..20 {
            s.update(&p);
        }
        assert_eq!(s.burst_allowance_ns, 0);
        assert!(s.drop_prob > 0.0);
        // calm: probability decays to 0 only slowly, so the allowance is not restored yet
        s.qdelay_ns = 0;
        s.update(&p);
        assert_eq!(s.burst_allowance_ns, 0);
        let mut calm = PieState { drop_prob: 0.0, qdelay_old_ns: 1 * MS, qdelay_ns: 2 * MS, burst_allowance_ns: 0, next_update_ns: 0 };
        calm.update(&p);
        assert_eq!(calm.burst_allowance_ns, 150 * MS);
    }

    /// With ECN, an ECT packet PIE would drop is marked while drop_prob <= 0.1 (RFC 8033
    /// §5.1) and dropped above it; a not-ECT packet is dropped either way.
    #[test]
    fn ecn_marks_below_the_threshold_and_drops_above_it() {
        for (prob, ect, want_marks, want_drops) in [(0.1, true, true, false), (0.5, true, false, true), (0.1, false, false, true)] {
            let mut q = Pie::new(PieParams { ecn: true, ..PieParams::default() }, QueueLimit::Unlimited, 1500, Rng::new(1, 9));
            for i in 0..3 {
                q.fifo.push(Queued { slot: 0, id: i, size: 1500, enqueued_ns: 0, flow_hash: 0, ect, mark_ce: false });
            }
            q.state = PieState { drop_prob: prob, qdelay_old_ns: 100 * MS, qdelay_ns: 100 * MS, burst_allowance_ns: 0, next_update_ns: u64::MAX };
            let (mut marks, mut drops) = (0, 0);
            for i in 0..1000 {
                match q.enqueue(MS, Queued { slot: 0, id: 10 + i, size: 1500, enqueued_ns: MS, flow_hash: 0, ect, mark_ce: false }) {
                    Some((_, AqmDrop::Aqm)) => drops += 1,
                    Some(other) => panic!("{other:?}"),
                    None => marks += q.fifo.packets.back().unwrap().mark_ce as u32,
                }
            }
            assert_eq!((marks > 0, drops > 0), (want_marks, want_drops), "p {prob} ect {ect}: {marks} marks, {drops} drops");
            // marks (or drops) happen at about the probability: 1000 arrivals
            let n = (marks + drops) as f64;
            assert!((n - 1000.0 * prob).abs() < 5.0 * (1000.0 * prob * (1.0 - prob)).sqrt(), "{n}");
        }
        let mut q = Pie::new(PieParams { ecn: true, ..PieParams::default() }, QueueLimit::Unlimited, 1500, Rng::new(1, 9));
        let pkt = Queued { slot: 0, id: 0, size: 1500, enqueued_ns: 0, flow_hash: 0, ect: true, mark_ce: true };
        q.fifo.push(pkt);
        assert!(q.dequeue(MS).mark_ce);
    }

    /// A queue held at 60 ms (4x the target) by a constant backlog: the probability rises at
    /// every update, and once the burst allowance (150 ms) is spent arrivals are dropped.
    #[test]
    fn probability_rises_under_a_standing_queue_and_arrivals_are_dropped() {
        let mut q = Pie::new(PieParams::default(), QueueLimit::Unlimited, 1500, Rng::new(1, 9));
        let mut id = 0;
        let pkt = |id: u64, t: u64| Queued { slot: 0, id, size: 1500, enqueued_ns: t, flow_hash: 0, ect: false, mark_ce: false };
        for _ in 0..60 {
            assert_eq!(q.enqueue(0, pkt(id, 0)), None);
            id += 1;
        }
        let (mut drops, mut last_p) = (0, 0.0);
        let mut rising = true;
        for ms in 0..1200u64 {
            let now = ms * MS;
            assert!(q.dequeue(now).packet.is_some());
            while q.fifo.len() < 60 {
                if q.enqueue(now, pkt(id, now)).is_some() {
                    drops += 1;
                    assert!(ms >= 150, "dropped at {ms} ms within the burst allowance");
                }
                id += 1;
            }
            if ms % 15 == 0 && ms > 0 {
                rising &= q.state.drop_prob > last_p;
                last_p = q.state.drop_prob;
            }
        }
        assert!(rising);
        assert!(drops > 0);
        assert!(q.state.drop_prob > 0.1 && q.state.drop_prob < 1.0, "{}", q.state.drop_prob);
    }
}

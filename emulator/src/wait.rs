//! How the event loop waits for the next due packet: a small state machine
//! that chooses between delivering now, busy-waiting and sleeping.
//!
//! A timer wake-up (epoll_pwait2's timeout) is some tens of µs late on a VM, so
//! the loop sleeps until `spin_ns` before the due time and busy-waits the rest.
//! Busy-waiting is rationed to `budget_ns` of every `window_ns`: under dense
//! traffic (gaps always below `spin_ns`) the emulator then falls back to timer
//! wake-ups instead of taking a core from the TCP endpoints it serves.

/// What to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// A packet is due: deliver.
    Deliver,
    /// Busy-wait until this time (leaving early if a TUN becomes readable).
    Spin { until_ns: u64 },
    /// Sleep in epoll for this long (`None`: until a packet or signal arrives).
    Sleep { timeout_ns: Option<u64> },
}

#[derive(Clone, Debug)]
pub struct Waiter {
    spin_ns: u64,
    window_ns: u64,
    budget_ns: u64,
    window_start_ns: u64,
    used_ns: u64,
}

impl Waiter {
    pub fn new(spin_ns: u64, window_ns: u64, budget_ns: u64) -> Waiter {
        Waiter { spin_ns, window_ns, budget_ns, window_start_ns: 0, used_ns: 0 }
    }

    fn budget_left(&mut self, now_ns: u64) -> u64 {
        if now_ns >= self.window_start_ns + self.window_ns {
            self.window_start_ns = now_ns;
            self.used_ns = 0;
        }
        self.budget_ns.saturating_sub(self.used_ns)
    }

    /// Plans the wait at `now_ns` for the earliest due time `next_due_ns`.
    pub fn plan(&mut self, now_ns: u64, next_due_ns: Option<u64>) -> Plan {
        let Some(due) = next_due_ns else {
            return Plan::Sleep { timeout_ns: None };
        };
        if due <= now_ns {
            return Plan::Deliver;
        }
        let wait = due - now_ns;
        let left = self.budget_left(now_ns);
        if wait <= self.spin_ns && wait <= left {
            self.used_ns += wait;
            return Plan::Spin { until_ns: due };
        }
        if wait > self.spin_ns && self.spin_ns <= left {
            return Plan::Sleep { timeout_ns: Some(wait - self.spin_ns) };
        }
        Plan::Sleep { timeout_ns: Some(wait) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1000;
    const MS: u64 = 1_000_000;

    #[test]
    fn nothing_in_flight_sleeps_without_timeout() {
        let mut w = Waiter::new(100 * US, 10 * MS, MS);
        assert_eq!(w.plan(5, None), Plan::Sleep { timeout_ns: None });
    }

    #[test]
    fn due_packets_are_delivered() {
        let mut w = Waiter::new(100 * US, 10 * MS, MS);
        assert_eq!(w.plan(50, Some(50)), Plan::Deliver);
        assert_eq!(w.plan(50, Some(10)), Plan::Deliver);
    }

    #[test]
    fn sleeps_until_spin_margin_then_spins() {
        let mut w = Waiter::new(100 * US, 10 * MS, MS);
        assert_eq!(w.plan(0, Some(5 * MS)), Plan::Sleep { timeout_ns: Some(5 * MS - 100 * US) });
        assert_eq!(w.plan(4900 * US, Some(5 * MS)), Plan::Spin { until_ns: 5 * MS });
    }

    #[test]
    fn without_spin_sleeps_the_whole_wait() {
        let mut w = Waiter::new(0, 10 * MS, MS);
        assert_eq!(w.plan(0, Some(30 * US)), Plan::Sleep { timeout_ns: Some(30 * US) });
    }

    #[test]
    fn exhausted_budget_sleeps_the_whole_wait_and_never_wraps() {
        // budget: 1 ms of each 10 ms window
        let mut w = Waiter::new(100 * US, 10 * MS, MS);
        let mut t = 0;
        for _ in 0..10 {
            assert_eq!(w.plan(t, Some(t + 100 * US)), Plan::Spin { until_ns: t + 100 * US });
            t += 100 * US;
        }
        // 1 ms spent in this window: a short wait is now slept, in full
        assert_eq!(w.plan(t, Some(t + 60 * US)), Plan::Sleep { timeout_ns: Some(60 * US) });
        // and a long wait is slept in full too (no early wake-up to spin)
        assert_eq!(w.plan(t, Some(t + 2 * MS)), Plan::Sleep { timeout_ns: Some(2 * MS) });
        // a new window restores the budget
        assert_eq!(w.plan(10 * MS, Some(10 * MS + 50 * US)), Plan::Spin { until_ns: 10 * MS + 50 * US });
    }
}

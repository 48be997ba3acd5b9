//! Scheduled outages: the link is down during given windows — handoffs, as in
//! the wireless scenarios of Papadimitriou and Tsaoussidis, "On Transport Layer
//! Mechanisms for Real-Time QoS" (five handoffs of 1 s each).
//!
//! Semantics while a direction is down (times are nanoseconds since the
//! emulator started its loop):
//! * packets arriving are dropped with reason `outage`;
//! * the bottleneck (rate or trace) does not start sending: packets already
//!   queued wait and leave when the link comes back (a handover that keeps the
//!   buffer), subject to the queue limit;
//! * packets already on the wire (in the delay line) are delivered.

/// One outage window `[start_ns, end_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// A sorted list of non-overlapping windows.
#[derive(Clone, Debug, Default)]
pub struct OutageSchedule {
    windows: Vec<Window>,
}

impl OutageSchedule {
    /// Builds a schedule; windows are sorted here. Overlap is rejected earlier by
    /// `config`, but adjacent windows are fine.
    pub fn new(mut windows: Vec<Window>) -> OutageSchedule {
        windows.retain(|w| w.end_ns > w.start_ns);
        windows.sort_by_key(|w| w.start_ns);
        OutageSchedule { windows }
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// If the link is down at `t_ns`, the end of that window.
    #[inline]
    pub fn down_until(&self, t_ns: u64) -> Option<u64> {
        if self.windows.is_empty() {
            return None;
        }
        let i = self.windows.partition_point(|w| w.start_ns <= t_ns);
        if i > 0 && self.windows[i - 1].end_ns > t_ns {
            Some(self.windows[i - 1].end_ns)
        } else {
            None
        }
    }

    #[inline]
    pub fn is_down(&self, t_ns: u64) -> bool {
        self.down_until(t_ns).is_some()
    }

    /// The first instant at or after `t_ns` when the link is up.
    #[inline]
    pub fn next_up(&self, mut t_ns: u64) -> u64 {
        while let Some(end) = self.down_until(t_ns) {
            t_ns = end;
        }
        t_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn sched() -> OutageSchedule {
        OutageSchedule::new(vec![
            Window { start_ns: 10 * S, end_ns: 11 * S },
            Window { start_ns: 2 * S, end_ns: 2 * S + 500_000_000 },
            Window { start_ns: 11 * S, end_ns: 12 * S }, // adjacent to the first
        ])
    }

    #[test]
    fn down_inside_windows_only() {
        let s = sched();
        assert!(!s.is_down(0));
        assert!(!s.is_down(2 * S - 1));
        assert!(s.is_down(2 * S));
        assert!(s.is_down(2 * S + 499_999_999));
        assert!(!s.is_down(2 * S + 500_000_000)); // end is exclusive
        assert!(s.is_down(10 * S + 3));
        assert!(s.is_down(11 * S));
        assert!(!s.is_down(12 * S));
        assert!(!s.is_down(100 * S));
    }

    #[test]
    fn next_up_skips_adjacent_windows() {
        let s = sched();
        assert_eq!(s.next_up(5 * S), 5 * S);
        assert_eq!(s.next_up(2 * S + 1), 2 * S + 500_000_000);
        assert_eq!(s.next_up(10 * S), 12 * S);
        assert_eq!(s.down_until(10 * S), Some(11 * S));
    }

    #[test]
    fn empty_schedule_is_always_up() {
        let s = OutageSchedule::new(vec![]);
        assert!(s.is_empty());
        assert!(!s.is_down(0));
        assert_eq!(s.next_up(42), 42);
    }
}

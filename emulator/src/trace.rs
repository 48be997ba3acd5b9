//! Mahimahi delivery-opportunity traces.
//!
//! Format (K. Winstein, A. Sivaraman, H. Balakrishnan, "Stochastic Forecasts
//! Achieve High Throughput and Low Delay over Cellular Networks", NSDI 2013,
//! and R. Netravali et al., "Mahimahi: Accurate Record-and-Replay for HTTP",
//! USENIX ATC 2015, `mm-link`): a text file with one integer per line, a time
//! in milliseconds since the start of the trace, non-decreasing. Each line is
//! one opportunity to deliver up to 1500 bytes at that millisecond; repeated
//! values are several opportunities in the same millisecond. When the trace
//! ends it loops: the whole schedule repeats shifted by the last timestamp
//! (Mahimahi's `base_timestamp += schedule.back()`), so the last value is the
//! period and must be positive.
//!
//! Delivery follows `mm-link`'s `LinkQueue::use_a_delivery_opportunity`: an
//! opportunity serves the packets queued at its time, head first; a packet
//! larger than what is left of the opportunity continues in the next one and
//! leaves when its last byte is sent; bytes of an opportunity that nobody
//! uses are lost. Blank lines are ignored; anything else is an error.

use crate::outage::OutageSchedule;

/// Bytes per delivery opportunity.
pub const OPPORTUNITY_BYTES: u32 = 1500;

/// A parsed trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    opportunities_ms: Vec<u64>,
}

impl Trace {
    /// Parses the text of a trace. The error names the offending line.
    pub fn parse(text: &str) -> Result<Trace, String> {
        let mut opps = Vec::new();
        let mut prev: Option<u64> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let v: u64 = match line.parse() {
                Ok(v) => v,
                Err(_) => {
                    return Err(format!(
                        "line {}: {:?} is not a millisecond timestamp (a non-negative integer per line)",
                        i + 1,
                        line
                    ))
                }
            };
            if let Some(p) = prev {
                if v < p {
                    return Err(format!(
                        "line {}: {} is before the previous timestamp {} (timestamps must not decrease)",
                        i + 1,
                        v,
                        p
                    ));
                }
            }
            prev = Some(v);
            opps.push(v);
        }
        match opps.last() {
            None => Err("no delivery opportunities (the trace has no timestamps)".to_string()),
            Some(0) => Err("the last timestamp must be greater than 0 (it is the period of the looping trace)".to_string()),
            Some(_) => Ok(Trace { opportunities_ms: opps }),
        }
    }

    pub fn period_ms(&self) -> u64 {
        *self.opportunities_ms.last().unwrap()
    }

    pub fn len(&self) -> usize {
        self.opportunities_ms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.opportunities_ms.is_empty()
    }

    /// Average capacity of the trace in bit/s.
    pub fn mean_rate_bps(&self) -> f64 {
        // Over one period the opportunities at time 0 of the next loop coincide with the
        // last ones of this loop; counting all lines per period is Mahimahi's convention.
        self.len() as f64 * OPPORTUNITY_BYTES as f64 * 8.0 / (self.period_ms() as f64 / 1000.0)
    }
}

/// Serves packets from a looping trace.
#[derive(Clone, Debug)]
pub struct TraceShaper {
    trace: Trace,
    /// Index of the current opportunity in the trace.
    idx: usize,
    /// Offset of the current loop, ms.
    base_ms: u64,
    /// Bytes left in the current opportunity.
    left: u32,
}

impl TraceShaper {
    pub fn new(trace: Trace) -> TraceShaper {
        TraceShaper { trace, idx: 0, base_ms: 0, left: OPPORTUNITY_BYTES }
    }

    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    #[inline]
    fn current_ns(&self) -> u64 {
        (self.base_ms + self.trace.opportunities_ms[self.idx]) * 1_000_000
    }

    #[inline]
    fn advance(&mut self) {
        self.idx += 1;
        if self.idx == self.trace.opportunities_ms.len() {
            self.idx = 0;
            self.base_ms += self.trace.period_ms();
        }
        self.left = OPPORTUNITY_BYTES;
    }

    /// Moves to the first opportunity at or after `t_ns` that has bytes left and is
    /// not inside an outage (jumping over whole loops and whole outages at once).
    fn seek(&mut self, mut t_ns: u64, outages: &OutageSchedule) {
        let period_ns = self.trace.period_ms() * 1_000_000;
        loop {
            let cur = self.current_ns();
            if cur + period_ns < t_ns {
                // skip whole loops at once after a long idle time
                let loops = (t_ns - cur) / period_ns - 1;
                self.base_ms += loops * self.trace.period_ms();
            }
            while self.left == 0 || self.current_ns() < t_ns {
                self.advance();
            }
            match outages.down_until(self.current_ns()) {
                Some(end) => t_ns = end,
                None => return,
            }
        }
    }

    /// Schedules a packet ready at `ready_ns`; returns (start, finish): the times of
    /// the first and of the last opportunity it uses.
    pub fn serve(&mut self, ready_ns: u64, size: u32, outages: &OutageSchedule) -> (u64, u64) {
        self.seek(ready_ns, outages);
        let start = self.current_ns();
        let mut remaining = size.max(1);
        loop {
            let take = remaining.min(self.left);
            self.left -= take;
            remaining -= take;
            if remaining == 0 {
                break;
            }
            let t = self.current_ns();
            self.seek(t, outages);
        }
        (start, self.current_ns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outage::Window;

    const MS: u64 = 1_000_000;

    #[test]
    fn parses_mahimahi_lines() {
        let t = Trace::parse("1\n1\n3\n\n10\n").unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.period_ms(), 10);
        // 4 * 1500 B * 8 per 10 ms = 4.8 Mb/s
        assert!((t.mean_rate_bps() - 4_800_000.0).abs() < 1e-6);
    }

    #[test]
    fn rejects_bad_lines() {
        assert_eq!(
            Trace::parse("1\n2\nx3\n").unwrap_err(),
            "line 3: \"x3\" is not a millisecond timestamp (a non-negative integer per line)"
        );
        assert_eq!(
            Trace::parse("1\n-2\n").unwrap_err(),
            "line 2: \"-2\" is not a millisecond timestamp (a non-negative integer per line)"
        );
        assert_eq!(
            Trace::parse("1.5\n").unwrap_err(),
            "line 1: \"1.5\" is not a millisecond timestamp (a non-negative integer per line)"
        );
        assert_eq!(
            Trace::parse("5\n4\n").unwrap_err(),
            "line 2: 4 is before the previous timestamp 5 (timestamps must not decrease)"
        );
        assert_eq!(Trace::parse("\n \n").unwrap_err(), "no delivery opportunities (the trace has no timestamps)");
        assert_eq!(
            Trace::parse("0\n0\n").unwrap_err(),
            "the last timestamp must be greater than 0 (it is the period of the looping trace)"
        );
    }

    #[test]
    fn one_packet_per_opportunity_and_loops() {
        let mut s = TraceShaper::new(Trace::parse("2\n5\n").unwrap());
        let none = OutageSchedule::default();
        assert_eq!(s.serve(0, 1500, &none), (2 * MS, 2 * MS));
        assert_eq!(s.serve(0, 1500, &none), (5 * MS, 5 * MS));
        // next loop starts at 5 ms: opportunities at 7 and 10 ms
        assert_eq!(s.serve(0, 1500, &none), (7 * MS, 7 * MS));
        assert_eq!(s.serve(0, 1500, &none), (10 * MS, 10 * MS));
        // a packet arriving later waits for the next opportunity after it
        assert_eq!(s.serve(11 * MS, 100, &none), (12 * MS, 12 * MS));
    }

    #[test]
    fn small_packets_share_an_opportunity_and_big_ones_span_two() {
        let mut s = TraceShaper::new(Trace::parse("1\n2\n3\n4\n").unwrap());
        let none = OutageSchedule::default();
        assert_eq!(s.serve(0, 500, &none), (MS, MS));
        assert_eq!(s.serve(0, 1000, &none), (MS, MS)); // fills the rest of the 1 ms opportunity
        assert_eq!(s.serve(0, 1000, &none), (2 * MS, 2 * MS));
        assert_eq!(s.serve(0, 1000, &none), (2 * MS, 3 * MS)); // 500 B at 2 ms, 500 B at 3 ms
        // unused bytes of an opportunity are wasted once time has passed it
        assert_eq!(s.serve(3 * MS + 1, 100, &none), (4 * MS, 4 * MS));
    }

    #[test]
    fn delivers_the_trace_capacity_over_many_loops() {
        let mut s = TraceShaper::new(Trace::parse("0\n0\n3\n7\n10\n").unwrap());
        let none = OutageSchedule::default();
        let mut last = 0;
        for _ in 0..4000 {
            last = s.serve(0, 1500, &none).1;
        }
        // 5 opportunities (lines) per 10 ms period (the 10 of one loop and the two 0s of
        // the next coincide): packet n leaves at about n / 5 * 10 ms.
        let expect = 4000.0 / 5.0 * 10.0;
        assert!(((last / MS) as f64 - expect).abs() <= 10.0, "last at {} ms", last / MS);
    }

    #[test]
    fn skips_opportunities_inside_outages() {
        let out = OutageSchedule::new(vec![Window { start_ns: 2 * MS, end_ns: 4 * MS }]);
        let mut s = TraceShaper::new(Trace::parse("1\n2\n3\n4\n5\n").unwrap());
        assert_eq!(s.serve(0, 1500, &out), (MS, MS));
        assert_eq!(s.serve(0, 1500, &out), (4 * MS, 4 * MS));
    }

    #[test]
    fn a_long_outage_is_skipped_at_once() {
        let hour = 3_600_000 * MS;
        let out = OutageSchedule::new(vec![Window { start_ns: 5 * MS, end_ns: 5 * MS + hour }]);
        let mut s = TraceShaper::new(Trace::parse("1\n").unwrap()); // one opportunity per ms
        assert_eq!(s.serve(4 * MS, 1500, &out), (4 * MS, 4 * MS));
        assert_eq!(s.serve(4 * MS, 1500, &out), (5 * MS + hour, 5 * MS + hour));
    }

    #[test]
    fn long_idle_jumps_ahead_in_loops() {
        let mut s = TraceShaper::new(Trace::parse("1\n10\n").unwrap());
        let none = OutageSchedule::default();
        // 1e6 ms later: the opportunities are at 10k+1 and 10k+10 ms
        assert_eq!(s.serve(1_000_000 * MS + 2 * MS, 1500, &none), (1_000_010 * MS, 1_000_010 * MS));
    }
}

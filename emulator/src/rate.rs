//! Serialization at a fixed bit rate: a packet of `size` bytes occupies the
//! link for `size * 8 / rate_bps` seconds, back to back after the previous one.
//!
//! Time is kept in integer nanoseconds with the division remainder carried
//! from packet to packet, so a busy period of N packets lasts exactly
//! `floor(total_bits * 1e9 / rate_bps)` ns: no drift however long the run.

use crate::outage::OutageSchedule;

#[derive(Clone, Debug)]
pub struct RateShaper {
    rate_bps: u64,
    /// When the link finishes sending what it has accepted so far.
    free_at_ns: u64,
    /// Carried remainder, in units of 1/rate_bps ns.
    rem: u64,
}

impl RateShaper {
    /// `rate_bps` must be at least 1 (checked by `config`).
    pub fn new(rate_bps: u64) -> RateShaper {
        assert!(rate_bps > 0);
        RateShaper { rate_bps, free_at_ns: 0, rem: 0 }
    }

    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Transmission time of `size` bytes, rounded down to whole ns.
    pub fn tx_time_ns(&self, size: u32) -> u64 {
        (size as u64 * 8 * 1_000_000_000) / self.rate_bps
    }

    /// Schedules a packet that is ready at `ready_ns`; returns (start, finish).
    /// The link does not start sending inside an outage.
    pub fn serve(&mut self, ready_ns: u64, size: u32, outages: &OutageSchedule) -> (u64, u64) {
        let mut start = ready_ns.max(self.free_at_ns);
        if start > self.free_at_ns {
            self.rem = 0; // the link was idle: no partial nanosecond to carry
        }
        let up = outages.next_up(start);
        if up != start {
            start = up;
            self.rem = 0;
        }
        let num = size as u64 * 8 * 1_000_000_000 + self.rem;
        let tx = num / self.rate_bps;
        self.rem = num % self.rate_bps;
        let finish = start + tx;
        self.free_at_ns = finish;
        (start, finish)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outage::Window;

    #[test]
    fn one_packet_takes_size_over_rate() {
        let mut r = RateShaper::new(10_000_000); // 10 Mb/s
        let none = OutageSchedule::default();
        // 1500 B = 12000 bits at 1e7 b/s = 1.2 ms
        assert_eq!(r.serve(5_000, 1500, &none), (5_000, 5_000 + 1_200_000));
    }

    #[test]
    fn back_to_back_packets_queue_behind_each_other() {
        let mut r = RateShaper::new(12_000_000); // 1500 B = 1 ms
        let none = OutageSchedule::default();
        let ms = 1_000_000;
        assert_eq!(r.serve(0, 1500, &none), (0, ms));
        assert_eq!(r.serve(0, 1500, &none), (ms, 2 * ms));
        assert_eq!(r.serve(100, 750, &none), (2 * ms, 2 * ms + ms / 2));
        // after an idle gap the link starts at the arrival
        assert_eq!(r.serve(10 * ms, 1500, &none), (10 * ms, 11 * ms));
    }

    #[test]
    fn busy_period_has_no_rounding_drift() {
        // 7 Mb/s does not divide 1500 B * 8 * 1e9 evenly: 1714285.714... ns each.
        let mut r = RateShaper::new(7_000_000);
        let none = OutageSchedule::default();
        let n = 100_000u64;
        let mut last = (0, 0);
        for _ in 0..n {
            last = r.serve(0, 1500, &none);
        }
        assert_eq!(last.1, n * 1500 * 8 * 1_000_000_000 / 7_000_000);
    }

    #[test]
    fn throughput_matches_rate() {
        let mut r = RateShaper::new(1_000_000_000);
        let none = OutageSchedule::default();
        let mut finish = 0;
        let mut bits = 0u64;
        for i in 0..10_000u32 {
            let size = 64 + (i * 37) % 1437;
            bits += size as u64 * 8;
            finish = r.serve(0, size, &none).1;
        }
        let rate = bits as f64 / (finish as f64 / 1e9);
        assert!((rate - 1e9).abs() < 1.0, "{rate}");
    }

    #[test]
    fn does_not_start_during_an_outage() {
        let ms = 1_000_000;
        let out = OutageSchedule::new(vec![Window { start_ns: 10 * ms, end_ns: 20 * ms }]);
        let mut r = RateShaper::new(12_000_000);
        assert_eq!(r.serve(9 * ms + ms / 2, 1500, &out), (9 * ms + ms / 2, 10 * ms + ms / 2));
        assert_eq!(r.serve(9 * ms + ms / 2, 1500, &out), (20 * ms, 21 * ms));
    }
}

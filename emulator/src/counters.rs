//! Per-direction counters, reported as JSON on SIGUSR1 and at exit.
//!
//! Lateness is how much later than its due time a packet was written to the
//! destination TUN: the emulator's own timing error. It is kept in a
//! histogram of 1 µs bins up to 65.535 ms (later ones go to an overflow bin;
//! the exact maximum and mean are kept separately).

use crate::link::DropReason;
pub use crate::sojourn::SojournHistogram;
use serde_json::{json, Value};

const LATENESS_BINS: usize = 65_536;

#[derive(Clone, Debug)]
pub struct LatenessHistogram {
    bins: Vec<u32>,
    overflow: u64,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl Default for LatenessHistogram {
    fn default() -> Self {
        LatenessHistogram { bins: vec![0; LATENESS_BINS], overflow: 0, count: 0, sum_ns: 0, max_ns: 0 }
    }
}

impl LatenessHistogram {
    #[inline]
    pub fn record(&mut self, late_ns: u64) {
        let us = (late_ns / 1000) as usize;
        if us < LATENESS_BINS {
            self.bins[us] = self.bins[us].saturating_add(1);
        } else {
            self.overflow += 1;
        }
        self.count += 1;
        self.sum_ns += late_ns as u128;
        self.max_ns = self.max_ns.max(late_ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64 / 1000.0
        }
    }

    pub fn max_us(&self) -> f64 {
        self.max_ns as f64 / 1000.0
    }

    /// Upper edge (µs) of the bin holding quantile `q`; the maximum if it overflows.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &c) in self.bins.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return ((i + 1) as f64).min(self.max_us());
            }
        }
        self.max_us()
    }
}

#[derive(Clone, Debug, Default)]
pub struct DirCounters {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub drops: [u64; DropReason::ALL.len()],
    pub lateness: LatenessHistogram,
    /// Packets marked CE instead of dropped by the AQM (`ecn = true`).
    pub ce_marks: u64,
}

impl DirCounters {
    #[inline]
    pub fn drop(&mut self, r: DropReason) {
        self.drops[r.index()] += 1;
    }

    /// JSON object; the queue's peaks, its time-average length since the start (`mean`:
    /// packets, bytes) and the current occupancy come from the link.
    pub fn to_json(&self, peak_queue_packets: u64, peak_queue_bytes: u64, mean: (f64, f64), in_flight_packets: usize) -> Value {
        let mut drops = serde_json::Map::new();
        let mut total = 0;
        for r in DropReason::ALL {
            drops.insert(r.as_str().to_string(), json!(self.drops[r.index()]));
            total += self.drops[r.index()];
        }
        drops.insert("total".to_string(), json!(total));
        json!({
            "packets_in": self.packets_in,
            "packets_out": self.packets_out,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "drops": drops,
            "peak_queue_packets": peak_queue_packets,
            "peak_queue_bytes": peak_queue_bytes,
            "mean_queue_packets": round3(mean.0),
            "mean_queue_bytes": round3(mean.1),
            "in_flight_packets": in_flight_packets,
            "ce_marks": self.ce_marks,
            "lateness_us": {
                "max": round3(self.lateness.max_us()),
                "mean": round3(self.lateness.mean_us()),
                "p50": self.lateness.quantile_us(0.5),
                "p99": self.lateness.quantile_us(0.99),
                "p999": self.lateness.quantile_us(0.999),
            },
        })
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_from_histogram() {
        let mut h = LatenessHistogram::default();
        for i in 0..1000u64 {
            h.record(i * 1000 + 500); // 0.5, 1.5, ..., 999.5 µs
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.quantile_us(0.5), 500.0);
        assert_eq!(h.quantile_us(0.99), 990.0);
        assert!((h.mean_us() - 500.0).abs() < 1e-9);
        assert_eq!(h.max_us(), 999.5);
    }

    #[test]
    fn overflow_reports_the_max() {
        let mut h = LatenessHistogram::default();
        h.record(10);
        h.record(100_000_000); // 100 ms
        assert_eq!(h.quantile_us(1.0), 100_000.0);
        assert_eq!(h.quantile_us(0.5), 1.0);
    }

    #[test]
    fn json_has_contract_keys() {
        let mut c = DirCounters::default();
        c.drop(DropReason::Queue);
        c.drop(DropReason::Queue);
        c.drop(DropReason::Loss);
        let v = c.to_json(5, 7500, (1.25, 1875.0), 0);
        assert_eq!(v["drops"]["queue"], 2);
        assert_eq!(v["drops"]["loss"], 1);
        assert_eq!(v["drops"]["outage"], 0);
        assert_eq!(v["drops"]["total"], 3);
        assert_eq!(v["peak_queue_packets"], 5);
        assert_eq!(v["mean_queue_packets"], 1.25);
        assert_eq!(v["mean_queue_bytes"], 1875.0);
        for k in ["packets_in", "packets_out", "bytes_in", "bytes_out", "peak_queue_bytes"] {
            assert!(v.get(k).is_some(), "{k}");
        }
        for k in ["max", "mean", "p99"] {
            assert!(v["lateness_us"].get(k).is_some(), "{k}");
        }
    }
}

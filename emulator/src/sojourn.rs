//! Sojourn times in a bottleneck's queue, kept per direction for every queue discipline
//! (drop-tail too): a histogram in ms, reported in the direction's counters as `sojourn_ms`.

use serde_json::{json, Value};

/// Sojourn times in the bottleneck's queue (arrival to the start of transmission), ms:
/// 50 µs bins up to 100 ms, 5 ms bins up to 10 s, then an overflow bin (the exact maximum
/// and mean kept apart). Its bins are allocated at the first record, so a direction that
/// never queues costs nothing.
#[derive(Clone, Debug, Default)]
pub struct SojournHistogram {
    bins: Vec<u32>,
    overflow: u64,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

const SOJOURN_FINE_NS: u64 = 50_000;
const SOJOURN_FINE_BINS: usize = 2000; // to 100 ms
const SOJOURN_COARSE_NS: u64 = 5_000_000;
const SOJOURN_COARSE_BINS: usize = 1980; // 100 ms to 10 s

impl SojournHistogram {
    #[inline]
    pub fn record(&mut self, ns: u64) {
        if self.bins.is_empty() {
            self.bins = vec![0; SOJOURN_FINE_BINS + SOJOURN_COARSE_BINS];
        }
        let fine_end = SOJOURN_FINE_NS * SOJOURN_FINE_BINS as u64;
        let i = if ns < fine_end {
            (ns / SOJOURN_FINE_NS) as usize
        } else {
            SOJOURN_FINE_BINS + ((ns - fine_end) / SOJOURN_COARSE_NS) as usize
        };
        if i < self.bins.len() {
            self.bins[i] = self.bins[i].saturating_add(1);
        } else {
            self.overflow += 1;
        }
        self.count += 1;
        self.sum_ns += ns as u128;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    fn upper_edge_ns(i: usize) -> u64 {
        if i < SOJOURN_FINE_BINS {
            (i as u64 + 1) * SOJOURN_FINE_NS
        } else {
            SOJOURN_FINE_NS * SOJOURN_FINE_BINS as u64 + (i - SOJOURN_FINE_BINS + 1) as u64 * SOJOURN_COARSE_NS
        }
    }

    /// Upper edge (ms) of the bin holding quantile `q`, at most the maximum; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &c) in self.bins.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return Self::upper_edge_ns(i).min(self.max_ns) as f64 / 1e6;
            }
        }
        self.max_ns as f64 / 1e6
    }

    /// `{count, mean, p50, p90, p99, max}` in ms.
    pub fn to_json(&self) -> Value {
        let mean = if self.count == 0 { 0.0 } else { self.sum_ns as f64 / self.count as f64 / 1e6 };
        json!({
            "count": self.count,
            "mean": round3(mean),
            "p50": round3(self.quantile_ms(0.5)),
            "p90": round3(self.quantile_ms(0.9)),
            "p99": round3(self.quantile_ms(0.99)),
            "max": round3(self.max_ns as f64 / 1e6),
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
    fn sojourn_quantiles_from_fine_and_coarse_bins() {
        let mut h = SojournHistogram::default();
        assert_eq!(h.quantile_ms(0.5), 0.0);
        for i in 0..100u64 {
            h.record(i * 1_000_000 + 10_000); // 0.01, 1.01, ..., 99.01 ms
        }
        h.record(1_234_000_000); // 1.234 s: a coarse bin, the maximum
        assert_eq!(h.count(), 101);
        assert_eq!(h.quantile_ms(0.5), 50.05); // the 51st value 50.01 ms: bin [50, 50.05)
        assert_eq!(h.quantile_ms(1.0), 1234.0);
        let v = h.to_json();
        assert_eq!(v["max"], 1234.0);
        assert_eq!(v["count"], 101);
        let mut g = SojournHistogram::default();
        g.record(20_000_000_000); // beyond 10 s: overflow, reported as the maximum
        assert_eq!(g.quantile_ms(0.5), 20_000.0);
    }
}

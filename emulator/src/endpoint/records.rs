//! Raw per-packet records: fixed-size little-endian rows that Python
//! (`tcpdelay.native.rawrecords`) turns into the `sent` and `received` Parquet parts of
//! `tcpdelay.records`. Written with plain `write(2)` every `FLUSH_NS` and at the end, so a
//! killed endpoint leaves every row up to its last flush (a row is never half-written: Python
//! reads whole rows only).
//!
//! `sent` row (40 B): flow_id u32, connection i16 (-1: dropped), frame_type u8 (b'I', b'P',
//! b'B' or 0), flags u8 (1: frame_last, 2: dropped), seq u64, size_bytes u32, pad u32,
//! send_ns u64 (CLOCK_MONOTONIC), frame_id i64.
//! `received` row (40 B): flow_id u32, connection i16, pad u16, seq u64, size_bytes u32,
//! pad u32, send_ns u64 (from the header), recv_ns u64 (CLOCK_MONOTONIC).

use std::fs::File;
use std::io::Write;

pub const ROW_BYTES: usize = 40;
pub const FLUSH_NS: u64 = 200_000_000;

pub struct RawFile {
    file: File,
    buf: Vec<u8>,
    pub rows: u64,
}

impl RawFile {
    pub fn create(path: &str) -> std::io::Result<RawFile> {
        Ok(RawFile { file: File::create(path)?, buf: Vec::with_capacity(64 * ROW_BYTES), rows: 0 })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn sent(&mut self, flow_id: u32, connection: i16, frame_type: u8, frame_last: bool, dropped: bool,
                seq: u64, size: u32, send_ns: u64, frame_id: i64) {
        let b = &mut self.buf;
        b.extend_from_slice(&flow_id.to_le_bytes());
        b.extend_from_slice(&connection.to_le_bytes());
        b.push(frame_type);
        b.push(u8::from(frame_last) | (u8::from(dropped) << 1));
        b.extend_from_slice(&seq.to_le_bytes());
        b.extend_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&send_ns.to_le_bytes());
        b.extend_from_slice(&frame_id.to_le_bytes());
        self.rows += 1;
    }

    pub fn received(&mut self, flow_id: u32, connection: i16, seq: u64, size: u32, send_ns: u64, recv_ns: u64) {
        let b = &mut self.buf;
        b.extend_from_slice(&flow_id.to_le_bytes());
        b.extend_from_slice(&connection.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&seq.to_le_bytes());
        b.extend_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&send_ns.to_le_bytes());
        b.extend_from_slice(&recv_ns.to_le_bytes());
        self.rows += 1;
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

/// Percentiles of a sample of non-negative durations (ns), reported in µs as
/// `{"p99": .., "max": .., "count": ..}` (p99: nearest rank).
pub fn summary_us(v: &mut [u64]) -> serde_json::Value {
    if v.is_empty() {
        return serde_json::json!({"p99": null, "max": null, "count": 0});
    }
    v.sort_unstable();
    let n = v.len();
    let rank = (n * 99).div_ceil(100).max(1) - 1;
    serde_json::json!({"p99": v[rank] as f64 / 1e3, "max": v[n - 1] as f64 / 1e3, "count": n})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_is_the_nearest_rank() {
        let mut v: Vec<u64> = (1..=200).map(|i| i * 1000).collect();
        let s = summary_us(&mut v);
        assert_eq!(s["p99"], 198.0);
        assert_eq!(s["max"], 200.0);
        assert_eq!(s["count"], 200);
        assert_eq!(summary_us(&mut [])["count"], 0);
    }
}

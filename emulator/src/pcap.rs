//! A pcap file of the packets a direction delivers.
//!
//! Classic libpcap format (draft-ietf-opsawg-pcap, "PCAP Capture File
//! Format"): a 24-byte file header with magic 0xA1B23C4D (nanosecond
//! timestamps), version 2.4, the snapshot length and link type 101
//! (LINKTYPE_RAW: each packet starts with an IPv4 or IPv6 header, which is what
//! a TUN device without packet information carries); then per packet a 16-byte
//! record header (seconds, nanoseconds, captured length, original length) and
//! the captured bytes. Written in host byte order, as libpcap does; readers
//! recognise the byte order from the magic. Timestamps are wall-clock
//! (CLOCK_REALTIME) times of delivery.

use std::io::{self, Write};

pub const MAGIC_NS: u32 = 0xA1B2_3C4D;
pub const LINKTYPE_RAW: u32 = 101;

pub struct PcapWriter<W: Write> {
    w: W,
    snaplen: u32,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut w: W, snaplen: u32) -> io::Result<PcapWriter<W>> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&MAGIC_NS.to_ne_bytes());
        h[4..6].copy_from_slice(&2u16.to_ne_bytes());
        h[6..8].copy_from_slice(&4u16.to_ne_bytes());
        // thiszone = 0, sigfigs = 0
        h[16..20].copy_from_slice(&snaplen.to_ne_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_RAW.to_ne_bytes());
        w.write_all(&h)?;
        Ok(PcapWriter { w, snaplen })
    }

    /// Appends one packet delivered at `realtime_ns` (ns since the Unix epoch).
    #[inline]
    pub fn write_packet(&mut self, realtime_ns: u64, data: &[u8]) -> io::Result<()> {
        let cap = data.len().min(self.snaplen as usize);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((realtime_ns / 1_000_000_000) as u32).to_ne_bytes());
        h[4..8].copy_from_slice(&((realtime_ns % 1_000_000_000) as u32).to_ne_bytes());
        h[8..12].copy_from_slice(&(cap as u32).to_ne_bytes());
        h[12..16].copy_from_slice(&(data.len() as u32).to_ne_bytes());
        self.w.write_all(&h)?;
        self.w.write_all(&data[..cap])
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], off: usize) -> u32 {
        u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
    }

    #[test]
    fn header_and_records_round_trip() {
        let mut p = PcapWriter::new(Vec::new(), 64).unwrap();
        let pkt: Vec<u8> = (0..100u8).collect();
        p.write_packet(1_700_000_000_123_456_789, &pkt).unwrap();
        p.write_packet(1_700_000_001_000_000_001, &pkt[..20]).unwrap();
        let b = p.into_inner();
        assert_eq!(u32_at(&b, 0), 0xA1B2_3C4D);
        assert_eq!(u16::from_ne_bytes([b[4], b[5]]), 2);
        assert_eq!(u16::from_ne_bytes([b[6], b[7]]), 4);
        assert_eq!(u32_at(&b, 16), 64);
        assert_eq!(u32_at(&b, 20), 101);
        // first record: truncated to the snap length
        assert_eq!(u32_at(&b, 24), 1_700_000_000);
        assert_eq!(u32_at(&b, 28), 123_456_789);
        assert_eq!(u32_at(&b, 32), 64);
        assert_eq!(u32_at(&b, 36), 100);
        assert_eq!(&b[40..104], &pkt[..64]);
        // second record
        assert_eq!(u32_at(&b, 104), 1_700_000_001);
        assert_eq!(u32_at(&b, 108), 1);
        assert_eq!(u32_at(&b, 112), 20);
        assert_eq!(b.len(), 104 + 16 + 20);
    }
}

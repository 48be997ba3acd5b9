//! Whole GSO super-packets on delay-only links (docs/emulator.md "Segmentation offload").
//!
//! A link whose two directions only delay (no loss, rate, trace, AQM, outage or jitter) and
//! that writes no per-packet file (events, pcap) attaches to its TUN devices with
//! `IFF_VNET_HDR` and turns on `TUNSETOFFLOAD` (checksum, TSO4/6, TSO-ECN): the kernel then
//! hands the emulator a TCP send's GSO super-packet (up to 64 KiB) in one read, prefixed by a
//! `struct virtio_net_hdr` (include/uapi/linux/virtio_net.h), and the emulator writes it to
//! the other TUN with the same header, so the kernel there takes it as the segments it stands
//! for (as from a NIC's GRO). On such a link every segment of a super-packet has the same
//! fate and the same due time, whichever way it is cut — arrival time plus the fixed delay —
//! so keeping it whole loses nothing; the counters count the segments (`shape`). Any
//! per-packet decision (a loss draw, a bottleneck's schedule, a queue limit that could be
//! reached, a jitter draw) or per-packet record makes a link keep one packet per read.

use crate::aqm::AqmSpec;
use crate::config::{DirectionConfig, LinkConfig};
use crate::loss::LossSpec;

/// `sizeof(struct virtio_net_hdr)`, the TUN's default vnet header.
pub const VNET_HDR_BYTES: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: `csum_start` is the transport header's offset.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`; the ECN bit (0x80) is masked off before comparing.
const GSO_NONE: u8 = 0;
/// The largest packet a TUN hands over with offloads on (the device's `gso_max_size`,
/// 64 KiB) plus its vnet header.
pub const MAX_SUPER_PACKET_BYTES: usize = 65_536 + VNET_HDR_BYTES + 64;

/// Whether a direction makes no per-packet decision: its segments' fates are all the same.
pub fn direction_delays_only(d: &DirectionConfig) -> bool {
    d.jitter_ns == 0
        && matches!(d.loss, LossSpec::None)
        && d.rate_bps.is_none()
        && d.trace.is_none()
        && d.outages.is_empty()
        && matches!(d.aqm, AqmSpec::DropTail)
        && d.pcap_file.is_none()
}

/// Whether link `l` passes super-packets whole (both directions only delay, no event stream).
pub fn link_passes_whole(l: &LinkConfig) -> bool {
    l.events_file.is_none() && direction_delays_only(&l.a_to_b) && direction_delays_only(&l.b_to_a)
}

/// The segments a packet read with its vnet header stands for: (count, bytes on the wire).
/// `hdr` is the vnet header, `pkt` the IP packet after it. A packet without GSO is one
/// segment of its own length; a super-packet of `gso_size`-byte payloads is
/// ceil(payload / gso_size) segments, each carrying a copy of its IP and TCP headers.
/// A header that does not parse counts as one packet.
pub fn shape(hdr: &[u8], pkt: &[u8]) -> (u32, u64) {
    let whole = (1, pkt.len() as u64);
    if hdr.len() < VNET_HDR_BYTES || hdr[1] & 0x7f == GSO_NONE {
        return whole;
    }
    let gso_size = u16::from_le_bytes([hdr[4], hdr[5]]) as usize;
    let csum_start = u16::from_le_bytes([hdr[6], hdr[7]]) as usize;
    let l4 = if hdr[0] & F_NEEDS_CSUM != 0 {
        csum_start
    } else {
        match pkt.first().map(|b| b >> 4) {
            Some(4) => (pkt[0] & 0x0f) as usize * 4,
            Some(6) => 40,
            _ => return whole,
        }
    };
    let Some(&doff) = pkt.get(l4 + 12) else { return whole };
    let headers = l4 + (doff >> 4) as usize * 4;
    if gso_size == 0 || headers >= pkt.len() {
        return whole;
    }
    let segs = (pkt.len() - headers).div_ceil(gso_size);
    (segs as u32, pkt.len() as u64 + (segs as u64 - 1) * headers as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vnet(gso_type: u8, gso_size: u16, csum_start: Option<u16>) -> [u8; VNET_HDR_BYTES] {
        let mut h = [0u8; VNET_HDR_BYTES];
        h[1] = gso_type;
        h[4..6].copy_from_slice(&gso_size.to_le_bytes());
        if let Some(c) = csum_start {
            h[0] = F_NEEDS_CSUM;
            h[6..8].copy_from_slice(&c.to_le_bytes());
        }
        h
    }

    /// An IPv4 + TCP packet (20 + 32 bytes of headers) with `payload` bytes.
    fn tcp4(payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 52 + payload];
        p[0] = 0x45;
        p[20 + 12] = 8 << 4; // data offset 8 words = 32 bytes
        p
    }

    #[test]
    fn a_packet_without_gso_is_one_segment() {
        let p = tcp4(1448);
        assert_eq!(shape(&vnet(0, 0, None), &p), (1, 1500));
    }

    #[test]
    fn a_super_packet_counts_its_segments_and_their_headers() {
        // 45 full segments of 1448 bytes and one of 100: 46 segments, 52 header bytes each.
        let p = tcp4(45 * 1448 + 100);
        let (segs, wire) = shape(&vnet(1, 1448, Some(20)), &p);
        assert_eq!(segs, 46);
        assert_eq!(wire, 45 * 1500 + 152);
        // the same found from the IP header when the checksum is complete
        assert_eq!(shape(&vnet(1, 1448, None), &p), (46, 45 * 1500 + 152));
        // the ECN flag does not change the count
        assert_eq!(shape(&vnet(0x81, 1448, Some(20)), &p).0, 46);
    }

    #[test]
    fn a_header_that_does_not_parse_counts_as_one_packet() {
        assert_eq!(shape(&vnet(1, 1448, Some(60_000)), &tcp4(3000)), (1, 3052));
        assert_eq!(shape(&vnet(1, 0, Some(20)), &tcp4(3000)), (1, 3052));
    }

    #[test]
    fn only_delay_only_links_pass_super_packets_whole() {
        let mut d = DirectionConfig { delay_ns: 1_000_000, ..DirectionConfig::default() };
        assert!(direction_delays_only(&d));
        d.rate_bps = Some(10_000_000);
        assert!(!direction_delays_only(&d));
        d.rate_bps = None;
        d.loss = LossSpec::Bernoulli { p: 0.01 };
        assert!(!direction_delays_only(&d));
        d.loss = LossSpec::None;
        d.jitter_ns = 1000;
        assert!(!direction_delays_only(&d));
    }
}

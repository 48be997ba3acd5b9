//! What the queue disciplines read from and write into an IP packet (a TUN read without
//! packet information: the IP header first).
//!
//! * the ECN field (RFC 3168 §5): the two low bits of IPv4's TOS byte and of IPv6's traffic
//!   class; `00` not-ECT, `10` ECT(0), `01` ECT(1), `11` CE;
//! * the 5-tuple's hash, FQ-CoDel's flow (RFC 8290 §4.1.1): addresses, protocol and, for TCP
//!   and UDP, the ports, hashed with FNV-1a 64 perturbed by the link's seed;
//! * marking CE (RFC 3168 §5): IPv4's header checksum is updated incrementally
//!   (RFC 1624 eqn 3, `HC' = ~(~HC + ~m + m')`), IPv6 has none.

/// The ECN field of a packet, or None when it is neither IPv4 nor IPv6.
pub fn ecn_field(pkt: &[u8]) -> Option<u8> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => Some(pkt[1] & 0x03),
        6 if pkt.len() >= 40 => Some((pkt[1] >> 4) & 0x03),
        _ => None,
    }
}

/// Whether the packet is ECN-capable (ECT(0), ECT(1) or already CE), so may be marked.
pub fn is_ect(pkt: &[u8]) -> bool {
    matches!(ecn_field(pkt), Some(1..=3))
}

/// Sets the ECN field to CE (an ECN-capable IPv4 or IPv6 packet), updating IPv4's header
/// checksum; returns whether the packet is now CE. A not-ECT packet is left alone (false).
pub fn set_ce(pkt: &mut [u8]) -> bool {
    match ecn_field(pkt) {
        Some(3) => true,
        Some(1) | Some(2) => {
            if pkt[0] >> 4 == 4 {
                let old = u16::from_be_bytes([pkt[0], pkt[1]]);
                pkt[1] |= 0x03;
                let new = u16::from_be_bytes([pkt[0], pkt[1]]);
                let hc = u16::from_be_bytes([pkt[10], pkt[11]]);
                // RFC 1624 eqn 3 in one's-complement arithmetic.
                let mut sum = (!hc) as u32 + (!old) as u32 + new as u32;
                while sum > 0xffff {
                    sum = (sum & 0xffff) + (sum >> 16);
                }
                let hc2 = !(sum as u16);
                pkt[10..12].copy_from_slice(&hc2.to_be_bytes());
            } else {
                pkt[1] |= 0x30;
            }
            true
        }
        _ => false,
    }
}

/// The IPv4 header checksum (RFC 791) of `hdr` with its checksum field as it is: 0 when the
/// header is intact.
pub fn ipv4_header_checksum(hdr: &[u8]) -> u16 {
    let ihl = ((hdr[0] & 0x0f) as usize) * 4;
    let mut sum: u32 = 0;
    for w in hdr[..ihl].chunks(2) {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// The hash of the packet's 5-tuple (addresses, protocol, TCP/UDP ports), perturbed by
/// `seed`; a packet that is not IP hashes its first bytes.
pub fn flow_hash(pkt: &[u8], seed: u64) -> u64 {
    let h0 = fnv1a(0xcbf2_9ce4_8422_2325, &seed.to_le_bytes());
    let (proto, addrs, l4) = match pkt.first().map(|b| b >> 4) {
        Some(4) if pkt.len() >= 20 => {
            let ihl = ((pkt[0] & 0x0f) as usize) * 4;
            (pkt[9], &pkt[12..20], ihl)
        }
        Some(6) if pkt.len() >= 40 => (pkt[6], &pkt[8..40], 40),
        _ => return fnv1a(h0, &pkt[..pkt.len().min(20)]),
    };
    let mut h = fnv1a(h0, addrs);
    h = fnv1a(h, &[proto]);
    if (proto == 6 || proto == 17) && pkt.len() >= l4 + 4 {
        h = fnv1a(h, &pkt[l4..l4 + 4]);
    }
    h
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A minimal IPv4 TCP packet from 10.0.0.1:src_port to 10.0.0.2:80 with the given ECN
    /// field and a valid header checksum.
    pub fn ipv4_tcp(ecn: u8, src_port: u16) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[1] = 0xb8 | ecn; // DSCP EF + ECN
        p[2..4].copy_from_slice(&40u16.to_be_bytes());
        p[8] = 64;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..22].copy_from_slice(&src_port.to_be_bytes());
        p[22..24].copy_from_slice(&80u16.to_be_bytes());
        let c = ipv4_header_checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(ipv4_header_checksum(&p[..20]), 0);
        p
    }

    #[test]
    fn ce_marking_keeps_the_ipv4_checksum_valid() {
        for ecn in [1u8, 2] {
            for port in [1u16, 5000, 65535] {
                let mut p = ipv4_tcp(ecn, port);
                assert!(is_ect(&p));
                assert!(set_ce(&mut p));
                assert_eq!(ecn_field(&p), Some(3));
                assert_eq!(p[1] >> 2, 0xb8 >> 2, "DSCP kept");
                assert_eq!(ipv4_header_checksum(&p[..20]), 0, "checksum after marking ECT({})", 2 - ecn);
                // the checksum equals one computed from scratch
                let mut q = p.clone();
                q[10] = 0;
                q[11] = 0;
                let c = ipv4_header_checksum(&q[..20]);
                assert_eq!(u16::from_be_bytes([p[10], p[11]]), c);
            }
        }
        let mut not_ect = ipv4_tcp(0, 1);
        let before = not_ect.clone();
        assert!(!is_ect(&not_ect));
        assert!(!set_ce(&mut not_ect));
        assert_eq!(not_ect, before);
        let mut ce = ipv4_tcp(3, 1);
        let before = ce.clone();
        assert!(set_ce(&mut ce));
        assert_eq!(ce, before);
    }

    #[test]
    fn ce_marking_of_ipv6_sets_the_traffic_class_ecn_bits() {
        let mut p = vec![0u8; 60];
        // version 6, traffic class 0xb9 (DSCP EF, ECT(1)), flow label 0x12345
        p[0] = 0x6b;
        p[1] = 0x91;
        p[2] = 0x23;
        p[3] = 0x45;
        p[6] = 17;
        assert_eq!(ecn_field(&p), Some(1));
        assert!(set_ce(&mut p));
        assert_eq!(ecn_field(&p), Some(3));
        assert_eq!(&p[..4], &[0x6b, 0xb1, 0x23, 0x45]); // DSCP and flow label unchanged
        p[1] = 0x81; // ECN 00
        assert!(!set_ce(&mut p));
    }

    #[test]
    fn flows_hash_by_five_tuple() {
        let a = ipv4_tcp(0, 1000);
        let b = ipv4_tcp(2, 1000); // ECN differs: same flow
        let c = ipv4_tcp(0, 1001);
        assert_eq!(flow_hash(&a, 7), flow_hash(&b, 7));
        assert_ne!(flow_hash(&a, 7), flow_hash(&c, 7));
        assert_ne!(flow_hash(&a, 7), flow_hash(&a, 8));
    }
}

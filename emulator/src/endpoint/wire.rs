//! The media wire format of `tcpdelay.transport.framing` (wire version 2), in Rust:
//! RTP (RFC 3550 §5.1) with the 20-byte tcpdelay media header in its payload, framed for TCP by
//! RFC 4571 §2 (a 16-bit length before each RTP packet). The header check is the low 16 bits
//! of zlib's CRC-32 over the packet's length (u16, network order) and its first 30 bytes.

pub const RTP_VERSION: u8 = 2;
pub const RTP_HEADER_BYTES: usize = 12;
pub const MEDIA_HEADER_BYTES: usize = 20;
pub const MIN_MEDIA_RTP_BYTES: usize = RTP_HEADER_BYTES + MEDIA_HEADER_BYTES;
pub const RFC4571_MAX_BYTES: usize = 0xFFFF;
pub const PT_MEDIA: u8 = 96;
pub const PT_KEEPALIVE: u8 = 127;
pub const RTP_CLOCK_HZ: u64 = 90_000;
const CHECKED_BYTES: usize = MIN_MEDIA_RTP_BYTES - 2;

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}
static CRC: [u32; 256] = crc_table();

/// zlib's CRC-32 of `data` continuing from `crc` (0 to start), as `zlib.crc32(data, crc)`.
pub fn crc32(data: &[u8], crc: u32) -> u32 {
    let mut c = !crc;
    for &b in data {
        c = CRC[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

/// The header check of a media RTP packet of `n` bytes whose first 30 bytes are `first30`.
pub fn header_check(n: usize, first30: &[u8]) -> u16 {
    let len = (n as u16).to_be_bytes();
    (crc32(&first30[..CHECKED_BYTES], crc32(&len, 0)) & 0xFFFF) as u16
}

/// Appends the RTP packet (`size` bytes) of one media piece to `out`.
#[allow(clippy::too_many_arguments)]
pub fn encode_media(out: &mut Vec<u8>, flow_id: u32, rtp_seq: u16, rtp_ts: u32, marker: bool, seq: u64,
                    send_ns: u64, piece: u8, pieces: u8, size: usize) {
    let start = out.len();
    out.push(RTP_VERSION << 6);
    out.push(if marker { 0x80 } else { 0 } | PT_MEDIA);
    out.extend_from_slice(&rtp_seq.to_be_bytes());
    out.extend_from_slice(&rtp_ts.to_be_bytes());
    out.extend_from_slice(&flow_id.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&send_ns.to_be_bytes());
    out.push(piece);
    out.push(pieces);
    let check = header_check(size, &out[start..start + CHECKED_BYTES]);
    out.extend_from_slice(&check.to_be_bytes());
    out.resize(start + size, 0);
}

/// Appends a 12-byte keep-alive RTP packet (payload type 127, RFC 6263 §4.3).
pub fn encode_keepalive(out: &mut Vec<u8>, flow_id: u32, rtp_seq: u16, rtp_ts: u32) {
    out.push(RTP_VERSION << 6);
    out.push(PT_KEEPALIVE);
    out.extend_from_slice(&rtp_seq.to_be_bytes());
    out.extend_from_slice(&rtp_ts.to_be_bytes());
    out.extend_from_slice(&flow_id.to_be_bytes());
}

/// One RTP packet as read from the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    Media { flow_id: u32, seq: u64, send_ns: u64, piece: u8, pieces: u8, size: usize },
    KeepAlive { flow_id: u32 },
}

fn be16(b: &[u8], at: usize) -> u16 { u16::from_be_bytes([b[at], b[at + 1]]) }
fn be32(b: &[u8], at: usize) -> u32 { u32::from_be_bytes(b[at..at + 4].try_into().unwrap()) }
fn be64(b: &[u8], at: usize) -> u64 { u64::from_be_bytes(b[at..at + 8].try_into().unwrap()) }

/// Checks the header of an RTP packet of `n` bytes whose first `min(n, 32)` bytes `p` holds
/// (framing.py's `_head`); with `flow`, the SSRC must be that.
pub fn head(p: &[u8], n: usize, flow: Option<u32>) -> Result<Msg, String> {
    if n < RTP_HEADER_BYTES {
        return Err(format!("RTP packet of {n} B is shorter than the {RTP_HEADER_BYTES}-byte header"));
    }
    let (b0, b1, ssrc) = (p[0], p[1], be32(p, 8));
    if b0 >> 6 != RTP_VERSION {
        return Err(format!("RTP version {}, expected {RTP_VERSION}", b0 >> 6));
    }
    if b0 & 0x3F != 0 {
        return Err(format!("RTP padding, extension and CSRCs are not used by tcpdelay (first byte {b0:#04x})"));
    }
    if let Some(f) = flow {
        if ssrc != f {
            return Err(format!("RTP SSRC {ssrc} is not this flow's ({f})"));
        }
    }
    let pt = b1 & 0x7F;
    if pt == PT_KEEPALIVE {
        if n != RTP_HEADER_BYTES {
            return Err(format!("keep-alive of {n} B, expected {RTP_HEADER_BYTES}"));
        }
        return Ok(Msg::KeepAlive { flow_id: ssrc });
    }
    if pt != PT_MEDIA {
        return Err(format!("RTP payload type {pt}, expected {PT_MEDIA} (media) or {PT_KEEPALIVE} (keep-alive)"));
    }
    if n < MIN_MEDIA_RTP_BYTES {
        return Err(format!("media RTP packet of {n} B is shorter than {MIN_MEDIA_RTP_BYTES} B"));
    }
    let (piece, pieces, check) = (p[28], p[29], be16(p, 30));
    if pieces == 0 || piece >= pieces {
        return Err(format!("bad media header: piece {piece} of {pieces}"));
    }
    let want = header_check(n, p);
    if check != want {
        return Err(format!("header check {check:#06x} does not match the {n}-byte packet's {want:#06x}: \
                            corrupted or not tcpdelay media"));
    }
    Ok(Msg::Media { flow_id: ssrc, seq: be64(p, 12), send_ns: be64(p, 20), piece, pieces, size: n })
}

/// Decodes one whole RTP packet (header, check and zero filler), as framing.py's `decode`.
pub fn decode(p: &[u8], flow: Option<u32>) -> Result<Msg, String> {
    let n = p.len();
    let m = head(&p[..n.min(MIN_MEDIA_RTP_BYTES)], n, flow)?;
    if let Msg::Media { .. } = m {
        if n > MIN_MEDIA_RTP_BYTES && p[MIN_MEDIA_RTP_BYTES..].iter().any(|&b| b != 0) {
            return Err(format!("the filler of a {n}-byte media packet is not zeros: corrupted"));
        }
    }
    Ok(m)
}

/// Incremental RFC 4571 de-framer with a bounded message size (framing.py's `FrameParser`):
/// holds at most one incomplete message; checks its header as soon as its first 32 bytes are
/// in; unusable after an error.
pub struct Parser {
    max: usize,
    flow: u32,
    partial: Vec<u8>,
    need: usize,
    head_ok: bool,
    failed: Option<String>,
}

impl Parser {
    pub fn new(max_message_bytes: usize, flow: u32) -> Parser {
        Parser { max: max_message_bytes.clamp(RTP_HEADER_BYTES, RFC4571_MAX_BYTES), flow, partial: Vec::new(),
                 need: 0, head_ok: false, failed: None }
    }

    fn length(&mut self, b: &[u8], at: usize) -> Result<usize, String> {
        let n = be16(b, at) as usize;
        if n < RTP_HEADER_BYTES || n > self.max {
            return Err(format!("RFC 4571 length {n} is outside [{RTP_HEADER_BYTES}, {}]", self.max));
        }
        Ok(n)
    }

    fn check_partial_head(&mut self) -> Result<(), String> {
        if self.head_ok || self.need == 0 {
            return Ok(());
        }
        let n = self.need - 2;
        let want = n.min(MIN_MEDIA_RTP_BYTES);
        if self.partial.len() - 2 < want {
            return Ok(());
        }
        head(&self.partial[2..2 + want], n, Some(self.flow))?;
        self.head_ok = true;
        Ok(())
    }

    /// Feeds a chunk of the stream; the messages it completes go to `out` (also those before
    /// an error, which is returned after them).
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<Msg>) -> Result<(), String> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.feed_inner(data, out);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
            self.partial = Vec::new();
        }
        r
    }

    fn feed_inner(&mut self, data: &[u8], out: &mut Vec<Msg>) -> Result<(), String> {
        let end = data.len();
        let mut at = 0;
        if !self.partial.is_empty() {
            while self.partial.len() < 2 && at < end {
                self.partial.push(data[at]);
                at += 1;
            }
            if self.partial.len() < 2 {
                return Ok(());
            }
            if self.need == 0 {
                let p = std::mem::take(&mut self.partial);
                let n = self.length(&p, 0);
                self.partial = p;
                self.need = 2 + n?;
            }
            let take = (self.need - self.partial.len()).min(end - at);
            self.partial.extend_from_slice(&data[at..at + take]);
            at += take;
            if self.partial.len() < self.need {
                return self.check_partial_head();
            }
            out.push(decode(&self.partial[2..], Some(self.flow))?);
            self.partial.clear();
            self.need = 0;
            self.head_ok = false;
        }
        while end - at >= 2 {
            let n = self.length(data, at)?;
            if end - at - 2 < n {
                break;
            }
            out.push(decode(&data[at + 2..at + 2 + n], Some(self.flow))?);
            at += 2 + n;
        }
        if at < end {
            self.partial.extend_from_slice(&data[at..end]);
            self.need = if end - at >= 2 { 2 + self.length(data, at)? } else { 0 };
            self.head_ok = false;
            self.check_partial_head()?;
        }
        Ok(())
    }

    /// The stream ended: an error if it ended inside a message.
    pub fn finish(&mut self) -> Result<(), String> {
        if self.failed.is_none() && !self.partial.is_empty() {
            let n = self.partial.len();
            self.partial.clear();
            return Err(format!("stream truncated: it ends {n} B into an incomplete message"));
        }
        Ok(())
    }
}

/// Sizes of split-N's pieces (framing.py's `split_sizes`; the caller keeps pieces ≥ 32 B).
pub fn split_sizes(size: usize, pieces: usize, out: &mut Vec<usize>) {
    out.clear();
    let (base, extra) = (size / pieces, size % pieces);
    for i in 0..pieces {
        out.push(base + usize::from(i < extra));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    // Made by Python's tcpdelay.transport.framing (wire version 2):
    // encode_media(flow_id=7, rtp_seq=65535, rtp_timestamp=123456, marker=True, seq=2**40+5,
    //              send_time_ns=1234567890123, piece=1, pieces=3, size_bytes=40)
    const MEDIA: &str = "80e0ffff0001e2400000000700000100000000050000011f71fb04cb010355f20000000000000000";
    // encode_keepalive(flow_id=7, rtp_seq=3, rtp_timestamp=99)
    const KEEPALIVE: &str = "807f00030000006300000007";

    #[test]
    fn crc32_is_zlibs() {
        assert_eq!(crc32(b"123456789", 0), 0xCBF4_3926);
    }

    #[test]
    fn encodes_as_python_does() {
        let mut out = Vec::new();
        encode_media(&mut out, 7, 65535, 123456, true, (1 << 40) + 5, 1234567890123, 1, 3, 40);
        assert_eq!(out, unhex(MEDIA));
        let mut ka = Vec::new();
        encode_keepalive(&mut ka, 7, 3, 99);
        assert_eq!(ka, unhex(KEEPALIVE));
    }

    #[test]
    fn decodes_pythons_packets() {
        let m = decode(&unhex(MEDIA), Some(7)).unwrap();
        assert_eq!(m, Msg::Media { flow_id: 7, seq: (1 << 40) + 5, send_ns: 1234567890123, piece: 1, pieces: 3, size: 40 });
        assert_eq!(decode(&unhex(KEEPALIVE), None).unwrap(), Msg::KeepAlive { flow_id: 7 });
        assert!(decode(&unhex(MEDIA), Some(8)).unwrap_err().contains("not this flow's (8)"));
    }

    #[test]
    fn every_altered_header_byte_or_filler_byte_is_caught() {
        let good = unhex(MEDIA);
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            assert!(decode(&bad, Some(7)).is_err(), "byte {i} altered and not caught");
        }
        assert!(decode(&good[..39], Some(7)).is_err(), "a cut packet is caught by the check");
    }

    #[test]
    fn parser_reassembles_any_chunking_and_catches_a_made_up_length_at_once() {
        let mut stream = Vec::new();
        for seq in 0..5u64 {
            let mut p = Vec::new();
            encode_media(&mut p, 7, seq as u16, 0, false, seq, 1000 + seq, 0, 1, 32 + seq as usize * 100);
            stream.extend_from_slice(&(p.len() as u16).to_be_bytes());
            stream.extend_from_slice(&p);
            let mut k = Vec::new();
            encode_keepalive(&mut k, 7, 9, 0);
            stream.extend_from_slice(&(k.len() as u16).to_be_bytes());
            stream.extend_from_slice(&k);
        }
        for chunk in [1, 2, 3, 7, 31, 33, 100, 5000] {
            let mut p = Parser::new(RFC4571_MAX_BYTES, 7);
            let mut out = Vec::new();
            for c in stream.chunks(chunk) {
                p.feed(c, &mut out).unwrap();
            }
            p.finish().unwrap();
            assert_eq!(out.len(), 10, "chunk {chunk}");
            assert_eq!(out[8], Msg::Media { flow_id: 7, seq: 4, send_ns: 1004, piece: 0, pieces: 1, size: 432 });
        }
        // a length prefix of 60000 B followed by a bad header: caught after 32 bytes, not 60000
        let mut p = Parser::new(RFC4571_MAX_BYTES, 7);
        let mut out = Vec::new();
        let mut bad = vec![0xEA, 0x60];
        bad.extend_from_slice(&[0x80u8; 40]);
        assert!(p.feed(&bad, &mut out).is_err());
        assert!(p.feed(&stream, &mut out).is_err(), "unusable after an error");
        // a stream that stops inside a message is truncated
        let mut p = Parser::new(RFC4571_MAX_BYTES, 7);
        p.feed(&stream[..50], &mut out).unwrap();
        assert!(p.finish().unwrap_err().contains("truncated"));
    }

    #[test]
    fn split_sizes_add_up() {
        let mut v = Vec::new();
        split_sizes(1001, 3, &mut v);
        assert_eq!(v, vec![334, 334, 333]);
    }
}

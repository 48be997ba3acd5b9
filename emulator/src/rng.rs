//! Seeded pseudo-random numbers: xoshiro256** seeded through SplitMix64.
//!
//! Reference: D. Blackman and S. Vigna, "Scrambled Linear Pseudorandom Number
//! Generators", ACM TOMS 47(4), 2021 (xoshiro256**), and G. Steele, D. Lea,
//! C. Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014
//! (SplitMix64, used here only to expand a 64-bit seed into 256 bits of state).
//!
//! Every random process of the emulator (loss per direction, jitter per direction)
//! draws from its own stream derived from the one configured `seed` and a fixed
//! stream number, so changing one direction's settings never changes the other
//! direction's random sequence.

/// One step of SplitMix64: advances `state` and returns the next output.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Stream numbers: which process a generator feeds.
pub mod stream {
    pub const LOSS_A_TO_B: u64 = 1;
    pub const LOSS_B_TO_A: u64 = 2;
    pub const JITTER_A_TO_B: u64 = 3;
    pub const JITTER_B_TO_A: u64 = 4;
    /// PIE's random drops (`crate::aqm::pie`).
    pub const AQM_A_TO_B: u64 = 5;
    pub const AQM_B_TO_A: u64 = 6;
}

/// xoshiro256** generator.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator for `stream` derived from `seed`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut sm = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut s = [0u64; 4];
        for w in s.iter_mut() {
            *w = splitmix64(&mut sm);
        }
        if s == [0; 4] {
            s[0] = 1; // the all-zero state is the one fixed point; never reached via SplitMix64, but be safe
        }
        Rng { s }
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (p in [0, 1]); p = 0 is never, p = 1 always.
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // First outputs of SplitMix64 from state 0 (reference implementation by Vigna).
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut s), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn same_seed_same_stream_is_reproducible_and_streams_differ() {
        let mut a = Rng::new(7, stream::LOSS_A_TO_B);
        let mut b = Rng::new(7, stream::LOSS_A_TO_B);
        let mut c = Rng::new(7, stream::LOSS_B_TO_A);
        let xa: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn uniform_mean_and_range() {
        let mut r = Rng::new(1, 0);
        let n = 200_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        let mean = sum / n as f64;
        // sd of the mean = sqrt(1/12/n) ~ 0.00065; allow 5 sd.
        assert!((mean - 0.5).abs() < 0.0033, "mean {mean}");
    }
}

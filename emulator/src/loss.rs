//! Random loss processes: Bernoulli (independent) and Gilbert–Elliott (bursty).
//!
//! Gilbert–Elliott follows the standard four-parameter definition used by Linux
//! netem (`loss gemodel p r 1-h 1-k`) and by G. Hasslinger and O. Hohlfeld, "The
//! Gilbert-Elliott Model for Packet Loss in Real Time Services on the Internet",
//! MMB 2008:
//!
//! * a two-state Markov chain with states Good and Bad, stepped once per packet;
//! * `p` = P(Good -> Bad), `r` = P(Bad -> Good);
//! * in Good a packet is delivered with probability `k` (lost with `1 - k`),
//!   in Bad it is delivered with probability `h` (lost with `1 - h`).
//!
//! The state in which a packet arrives decides its fate; the chain then steps.
//! With `k = 1, h = 0` (Gilbert's original model) every Bad sojourn is one loss
//! burst, geometric with mean length `1 / r`; the stationary loss ratio is
//! `(p (1 - h) + r (1 - k)) / (p + r)`.

use crate::rng::Rng;

/// Parameters of a loss process (validated by `config`).
#[derive(Clone, Debug, PartialEq)]
pub enum LossSpec {
    None,
    Bernoulli { p: f64 },
    GilbertElliott { p: f64, r: f64, k: f64, h: f64 },
}

impl LossSpec {
    /// Long-run fraction of packets lost.
    pub fn stationary_loss(&self) -> f64 {
        match *self {
            LossSpec::None => 0.0,
            LossSpec::Bernoulli { p } => p,
            LossSpec::GilbertElliott { p, r, k, h } => {
                if p + r == 0.0 {
                    1.0 - k // never leaves Good
                } else {
                    (p * (1.0 - h) + r * (1.0 - k)) / (p + r)
                }
            }
        }
    }
}

/// Gilbert–Elliott chain state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeState {
    Good,
    Bad,
}

/// A running loss process.
#[derive(Clone, Debug)]
pub struct LossProcess {
    spec: LossSpec,
    state: GeState,
    rng: Rng,
}

impl LossProcess {
    pub fn new(spec: LossSpec, rng: Rng) -> LossProcess {
        LossProcess { spec, state: GeState::Good, rng }
    }

    pub fn state(&self) -> GeState {
        self.state
    }

    /// Decides the fate of the next packet: `true` = lose it.
    #[inline]
    pub fn lose(&mut self) -> bool {
        match self.spec {
            LossSpec::None => false,
            LossSpec::Bernoulli { p } => self.rng.chance(p),
            LossSpec::GilbertElliott { p, r, k, h } => {
                let lost = match self.state {
                    GeState::Good => !self.rng.chance(k),
                    GeState::Bad => !self.rng.chance(h),
                };
                self.state = match self.state {
                    GeState::Good if self.rng.chance(p) => GeState::Bad,
                    GeState::Bad if self.rng.chance(r) => GeState::Good,
                    s => s,
                };
                lost
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(spec: LossSpec, n: usize, seed: u64) -> Vec<bool> {
        let mut l = LossProcess::new(spec, Rng::new(seed, 1));
        (0..n).map(|_| l.lose()).collect()
    }

    /// Mean lengths of runs of consecutive losses.
    fn mean_burst(v: &[bool]) -> f64 {
        let (mut bursts, mut lost, mut prev) = (0usize, 0usize, false);
        for &x in v {
            if x {
                lost += 1;
                if !prev {
                    bursts += 1;
                }
            }
            prev = x;
        }
        lost as f64 / bursts as f64
    }

    #[test]
    fn none_never_loses() {
        assert!(run(LossSpec::None, 10_000, 1).iter().all(|&x| !x));
    }

    #[test]
    fn bernoulli_ratio_inside_binomial_interval() {
        // 99.9 % normal-approximation interval of Binomial(n, p) / n.
        for &(p, seed) in &[(0.01, 1u64), (0.1, 2), (0.5, 3)] {
            let n = 200_000;
            let lost = run(LossSpec::Bernoulli { p }, n, seed).iter().filter(|&&x| x).count();
            let ratio = lost as f64 / n as f64;
            let half = 3.29 * (p * (1.0 - p) / n as f64).sqrt();
            assert!((ratio - p).abs() < half, "p={p}: measured {ratio}, allowed ±{half}");
        }
    }

    #[test]
    fn bernoulli_extremes() {
        assert!(run(LossSpec::Bernoulli { p: 0.0 }, 10_000, 1).iter().all(|&x| !x));
        assert!(run(LossSpec::Bernoulli { p: 1.0 }, 10_000, 1).iter().all(|&x| x));
    }

    #[test]
    fn bernoulli_losses_are_independent() {
        // P(loss | previous loss) must equal p (no bursts).
        let v = run(LossSpec::Bernoulli { p: 0.2 }, 200_000, 4);
        let (mut both, mut prev_lost) = (0usize, 0usize);
        for w in v.windows(2) {
            if w[0] {
                prev_lost += 1;
                if w[1] {
                    both += 1;
                }
            }
        }
        let cond = both as f64 / prev_lost as f64;
        assert!((cond - 0.2).abs() < 0.01, "P(loss|loss) = {cond}");
    }

    #[test]
    fn gilbert_mean_burst_is_one_over_r() {
        for &(p, r) in &[(0.01, 0.25), (0.02, 0.5), (0.005, 0.1)] {
            let spec = LossSpec::GilbertElliott { p, r, k: 1.0, h: 0.0 };
            let v = run(spec.clone(), 2_000_000, 9);
            let mb = mean_burst(&v);
            let want = 1.0 / r;
            assert!((mb - want).abs() / want < 0.05, "p={p} r={r}: mean burst {mb}, want {want}");
            let ratio = v.iter().filter(|&&x| x).count() as f64 / v.len() as f64;
            let stat = spec.stationary_loss();
            assert!((ratio - stat).abs() / stat < 0.08, "loss ratio {ratio}, stationary {stat}");
        }
    }

    #[test]
    fn gilbert_elliott_four_parameters_stationary_ratio() {
        let spec = LossSpec::GilbertElliott { p: 0.05, r: 0.3, k: 0.99, h: 0.4 };
        let v = run(spec.clone(), 2_000_000, 11);
        let ratio = v.iter().filter(|&&x| x).count() as f64 / v.len() as f64;
        let stat = spec.stationary_loss(); // (0.05*0.6 + 0.3*0.01)/0.35 = 0.0942857
        assert!((stat - 0.094_285_7).abs() < 1e-6);
        assert!((ratio - stat).abs() < 0.003, "ratio {ratio} vs {stat}");
    }

    #[test]
    fn gilbert_is_burstier_than_bernoulli_at_same_ratio() {
        let ge = LossSpec::GilbertElliott { p: 0.01, r: 0.2, k: 1.0, h: 0.0 };
        let p = ge.stationary_loss();
        let vb = run(LossSpec::Bernoulli { p }, 1_000_000, 5);
        let vg = run(ge, 1_000_000, 5);
        assert!(mean_burst(&vg) > 3.0 * mean_burst(&vb));
    }

    #[test]
    fn same_seed_same_losses() {
        let spec = LossSpec::GilbertElliott { p: 0.1, r: 0.3, k: 0.9, h: 0.2 };
        assert_eq!(run(spec.clone(), 5000, 42), run(spec.clone(), 5000, 42));
        assert_ne!(run(spec.clone(), 5000, 42), run(spec, 5000, 43));
    }
}

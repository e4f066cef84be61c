//! A probability, stored as a fixed-point fraction so that sampling it is an
//! integer comparison (identical on every platform).

use rand_chacha::rand_core::RngCore;
use std::fmt;

/// A probability in `[0, 1]`.
///
/// Stored as `p · 2^63` in a `u64`; [`Probability::sample`] compares the top
/// 63 bits of one `u64` draw against it, so `ONE` is always true and `ZERO`
/// never, and no float is involved after construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Probability {
    scaled: u64,
}

const ONE_SCALED: u64 = 1 << 63;

/// A value given as a probability was not a number in `[0, 1]`.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("probability must be a number in [0, 1], got {0}")]
pub struct InvalidProbability(pub f64);

impl Probability {
    /// Never.
    pub const ZERO: Probability = Probability { scaled: 0 };
    /// Always.
    pub const ONE: Probability = Probability { scaled: ONE_SCALED };

    /// `p`, which must be in `[0, 1]` (NaN is rejected).
    pub fn new(p: f64) -> Result<Probability, InvalidProbability> {
        if !(0.0..=1.0).contains(&p) {
            return Err(InvalidProbability(p));
        }
        // Multiplying by a power of two is exact; the cast truncates.
        let scaled = (p * ONE_SCALED as f64) as u64;
        Ok(Probability {
            scaled: scaled.min(ONE_SCALED),
        })
    }

    /// The probability as a float, for reports.
    pub fn as_f64(self) -> f64 {
        self.scaled as f64 / ONE_SCALED as f64
    }

    /// From a fraction of 2^32 (the kernel's fixed-point probabilities).
    pub(crate) fn from_q32(q: u32) -> Probability {
        Probability {
            scaled: u64::from(q) << 31,
        }
    }

    /// Whether this is exactly zero.
    pub fn is_zero(self) -> bool {
        self.scaled == 0
    }

    /// One Bernoulli trial: true with this probability. Consumes one `u64`
    /// from `rng` (also for `ZERO` and `ONE`, so that changing a probability
    /// does not shift the random stream of later draws).
    pub fn sample(self, rng: &mut impl RngCore) -> bool {
        (rng.next_u64() >> 1) < self.scaled
    }
}

/// A uniform draw in (0, 1] from the top 53 bits of one `u64`: never 0,
/// so its logarithm is finite (exponential gaps, Box–Muller).
pub fn unit_open_below(rng: &mut impl RngCore) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
}

impl fmt::Display for Probability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.as_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_chacha::rand_core::SeedableRng;

    #[test]
    fn bounds() {
        assert!(Probability::new(-0.1).is_err());
        assert!(Probability::new(1.5).is_err());
        assert!(Probability::new(f64::NAN).is_err());
        assert_eq!(Probability::new(1.0).unwrap(), Probability::ONE);
        assert_eq!(Probability::new(0.0).unwrap(), Probability::ZERO);
        assert_eq!(Probability::new(0.25).unwrap().as_f64(), 0.25);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..1000 {
            assert!(Probability::ONE.sample(&mut rng));
            assert!(!Probability::ZERO.sample(&mut rng));
        }
    }
}

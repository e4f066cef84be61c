//! Chunk sizes: constant bitrate, or a VBR encoding's sizes varying with
//! the scene (docs/proteus.md, "Variable chunk sizes").
//!
//! A VBR chunk `i` of a level has `bitrate × chunk × m_i` bytes, with one
//! multiplier `m_i` per chunk index shared by every level (a complex scene
//! is large at every bitrate). `m_i` is lognormal with mean 1 and the
//! given coefficient of variation, clamped at the peak ratio (a capped
//! encoder's cap binds on the most complex scenes).

use netsim::{Seed, SimRng};
use rand_chacha::rand_core::RngCore;

/// How chunk sizes vary about `bitrate × chunk`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChunkVariability {
    /// Every chunk exactly `bitrate × chunk` (the default).
    Constant,
    /// Lognormal multipliers with mean 1 before the clamp.
    Lognormal {
        /// Coefficient of variation (standard deviation over mean).
        cv: f64,
        /// The largest multiplier: the peak-to-average ratio.
        peak: f64,
        /// Seeds the video's sequence of multipliers.
        seed: Seed,
    },
}

/// The multipliers of one video's chunks, drawn in chunk order as needed,
/// so chunk `i`'s multiplier depends only on the seed and `i`.
#[derive(Clone, Debug)]
pub(crate) struct ChunkSizes {
    /// `(σ, peak, generator)`, or `None` for constant bitrate.
    draw: Option<(f64, f64, SimRng)>,
    drawn: Vec<f64>,
}

impl ChunkSizes {
    pub(crate) fn new(variability: ChunkVariability) -> ChunkSizes {
        let draw = match variability {
            ChunkVariability::Constant => None,
            ChunkVariability::Lognormal { cv, peak, seed } => {
                let sigma = (1.0 + cv * cv).ln().sqrt();
                Some((sigma, peak, seed.rng("video/chunk-sizes")))
            }
        };
        ChunkSizes {
            draw,
            drawn: Vec::new(),
        }
    }

    /// Chunk `index`'s multiplier.
    pub(crate) fn multiplier(&mut self, index: usize) -> f64 {
        let Some((sigma, peak, rng)) = &mut self.draw else {
            return 1.0;
        };
        while self.drawn.len() <= index {
            let m = (-*sigma * *sigma / 2.0 + *sigma * standard_normal(rng)).exp();
            self.drawn.push(m.min(*peak));
        }
        self.drawn[index]
    }
}

/// A standard normal draw (Box–Muller, its cosine half) from two uniforms
/// in (0, 1].
fn standard_normal(rng: &mut impl RngCore) -> f64 {
    let u1 = netsim::unit_open_below(rng);
    let u2 = netsim::unit_open_below(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lognormal(seed: u64) -> ChunkSizes {
        ChunkSizes::new(ChunkVariability::Lognormal {
            cv: 0.37,
            peak: 2.0,
            seed: Seed::new(seed),
        })
    }

    #[test]
    fn constant_bitrate_is_one() {
        let mut sizes = ChunkSizes::new(ChunkVariability::Constant);
        assert!((0..100).all(|i| sizes.multiplier(i) == 1.0));
    }

    #[test]
    fn the_mean_cv_and_cap_hold_over_many_chunks() {
        let mut sizes = lognormal(7);
        let n = 200_000;
        let all: Vec<f64> = (0..n).map(|i| sizes.multiplier(i)).collect();
        let mean = all.iter().sum::<f64>() / n as f64;
        let sd = (all.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        let capped = all.iter().filter(|&&m| m == 2.0).count() as f64 / n as f64;
        assert!(all.iter().all(|&m| m > 0.0 && m <= 2.0));
        // The clamp at 2 takes the mean from 1 to 0.995 and the share at
        // the cap is 1/60 (docs/proteus.md).
        assert!((mean - 0.995).abs() < 0.003, "mean {mean}");
        assert!((capped - 1.0 / 60.0).abs() < 0.002, "at the cap {capped}");
        // Below 0.37: the clamp trims the upper tail.
        assert!(sd / mean > 0.32 && sd / mean < 0.37, "cv {}", sd / mean);
    }

    #[test]
    fn a_seed_gives_the_same_sizes_in_any_order_of_asking() {
        let mut a = lognormal(3);
        let mut b = lognormal(3);
        let late = b.multiplier(40);
        let forward: Vec<f64> = (0..=40).map(|i| a.multiplier(i)).collect();
        assert_eq!(forward[40], late);
        assert_eq!(
            forward,
            (0..=40).map(|i| b.multiplier(i)).collect::<Vec<_>>()
        );
        let mut c = lognormal(4);
        assert_ne!(
            forward,
            (0..=40).map(|i| c.multiplier(i)).collect::<Vec<_>>()
        );
    }
}

//! Order statistics across trials.

use serde::{Deserialize, Serialize};

/// A metric's spread across the trials of one variant.
///
/// Quantiles interpolate linearly between order statistics (NumPy's
/// default, "type 7"): the `q` quantile of sorted `x[0..n]` is
/// `x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋])` with `h = q·(n − 1)`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The 25th percentile.
    pub p25: f64,
    /// The 75th percentile.
    pub p75: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// How many trials had the metric.
    pub n: usize,
}

impl Spread {
    /// The spread of `values`; `None` if there are none. NaNs are ignored.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        Some(Spread {
            median: quantile(&sorted, 0.5),
            p25: quantile(&sorted, 0.25),
            p75: quantile(&sorted, 0.75),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            n: sorted.len(),
        })
    }
}

/// The `q` quantile (0..=1) of sorted, non-empty values, interpolated.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let h = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let low = h.floor() as usize;
    let high = (low + 1).min(sorted.len() - 1);
    sorted[low] + (h - low as f64) * (sorted[high] - sorted[low])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.min, s.max, s.n), (1.0, 4.0, 4));
        assert_eq!(s.median, 2.5);
        assert_eq!(s.p25, 1.75);
        assert_eq!(s.p75, 3.25);
        let one = Spread::of(&[7.0]).unwrap();
        assert_eq!((one.median, one.p25, one.p75), (7.0, 7.0, 7.0));
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN, 2.0]).unwrap().n, 1);
    }
}

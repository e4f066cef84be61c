//! RTT noise as a sender sees it: a flow's RTT samples grouped into
//! consecutive intervals of send time, and per interval the RTT deviation
//! (the population standard deviation) and the RTT gradient (the
//! least-squares slope of RTT against send time), both from the PCC
//! core's one regression ([`cc::pcc::monitor::Regression`]). This is the
//! Proteus paper's §3 measurement (Figure 2: a constant-rate probe's
//! samples in 1.5-RTT intervals), asked for with `measure.rtt_intervals`.
//!
//! Per flow (bulk workloads and the UDP probe; the data sender's
//! samples), and per phase of the window when there are phases (else over
//! the whole window): the distributions `rtt_deviation_ms[_<phase>]` and
//! `rtt_gradient_abs[_<phase>]`, and for each phase after the first the
//! *confusion probability* of each metric against the first phase, in
//! percent: over all pairs of one interval of the first phase (calm) and
//! one of this phase (busy), the probability that the busy interval has
//! the smaller value, a tie counting half
//! (`rtt_confusion_deviation_pct_<phase>`,
//! `rtt_confusion_gradient_pct_<phase>`); the share of ties
//! (`rtt_ties_deviation_pct_<phase>`, `_gradient_`); and the deviation's
//! confusion over the gradient's (`rtt_confusion_ratio_<phase>`).
//!
//! The paper counts the pairs in which the busy value is "smaller"; its
//! testbed's RTTs were noisy, so it had no ties. A simulator's idle path
//! has no noise at all, so ties are common, and they are decided at the
//! resolution of the RTT measurement (`measure.rtt_resolution`; full
//! resolution by default). At the simulator's nanoseconds two idle
//! intervals differ by a few nanoseconds and one is "smaller" by chance;
//! an instrument that measures RTTs to the microsecond, as Linux and
//! PCC-Uspace do, sees them equal. With a resolution r, deviations closer
//! than r are equal, and so are gradients closer than r over the
//! interval's length L (a slope fitted to samples known to r over L is
//! not known better than about r/L). A tie counts half, as if noise below
//! the resolution broke it at random: counting ties as "not smaller"
//! would make every idle interval a success that noise would make a coin
//! flip. Without ties this is the paper's definition.

use crate::outcome::{FlowNames, Phase, RttIntervals, TrialResult, Window};
use cc::pcc::monitor::Regression;
use std::time::Duration;

/// What one interval measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct IntervalStats {
    /// The RTT deviation, seconds.
    pub deviation_s: f64,
    /// The RTT gradient (seconds of RTT per second of send time).
    pub gradient: f64,
}

/// The statistics of each whole interval of `length` from `from` to
/// `until` (send times since the RTT window's start) over `samples`
/// (send time, RTT); intervals with fewer than two samples are left out.
pub(crate) fn intervals(
    samples: &[(Duration, Duration)],
    from: Duration,
    until: Duration,
    length: Duration,
) -> Vec<IntervalStats> {
    if length.is_zero() || until <= from {
        return Vec::new();
    }
    let count = ((until - from).as_nanos() / length.as_nanos()) as usize;
    let mut regressions = vec![Regression::default(); count];
    for &(sent, rtt) in samples {
        let Some(offset) = sent.checked_sub(from) else {
            continue;
        };
        let k = (offset.as_nanos() / length.as_nanos()) as usize;
        if let Some(regression) = regressions.get_mut(k) {
            let at = (offset - length * k as u32).as_secs_f64();
            regression.add(at, rtt.as_secs_f64());
        }
    }
    regressions
        .into_iter()
        .filter(|r| r.len() >= 2)
        .map(|r| IntervalStats {
            deviation_s: r.deviation_y(),
            gradient: r.slope(),
        })
        .collect()
}

/// Over all pairs (one of `calm`, one of `busy`): the fraction in which
/// the busy value is smaller by more than `resolution`, and the fraction
/// in which the two are within it of each other, i.e. equal (`None` if
/// either is empty).
pub(crate) fn confusion(calm: &[f64], busy: &[f64], resolution: f64) -> Option<(f64, f64)> {
    if calm.is_empty() || busy.is_empty() {
        return None;
    }
    let mut sorted = calm.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (mut smaller, mut equal) = (0u64, 0u64);
    for &b in busy {
        // Calm values above b, and equal to it.
        let at_most = sorted.partition_point(|&c| c <= b + resolution);
        let below = sorted.partition_point(|&c| c < b - resolution);
        smaller += (sorted.len() - at_most) as u64;
        equal += (at_most - below) as u64;
    }
    let pairs = (calm.len() * busy.len()) as f64;
    Some((smaller as f64 / pairs, equal as f64 / pairs))
}

/// Adds a flow's interval metrics (see the module) from its data
/// sender's RTT `samples` of the packets it sent in `window`: (send time
/// since the window's start, RTT).
pub(crate) fn add(
    result: &mut TrialResult,
    names: &FlowNames,
    samples: &[(Duration, Duration)],
    window: Window,
    phases: &[Phase],
    grouping: RttIntervals,
) {
    let RttIntervals { length, resolution } = grouping;
    // The values are compared in the units they are reported in: the
    // deviation in milliseconds, the gradient as a ratio (module docs).
    let deviation_resolution = resolution.as_secs_f64() * 1000.0;
    let gradient_resolution = resolution.as_secs_f64() / length.as_secs_f64();
    let since = |t: netsim::Time| t.saturating_duration_since(window.from);
    let parts: Vec<(Option<&str>, Window)> = if phases.is_empty() {
        vec![(None, window)]
    } else {
        phases
            .iter()
            .map(|p| (Some(p.name.as_str()), p.window))
            .collect()
    };
    let mut calm: Option<(Vec<f64>, Vec<f64>)> = None;
    for (phase, part) in parts {
        let stats = intervals(samples, since(part.from), since(part.until), length);
        let deviations: Vec<f64> = stats.iter().map(|s| s.deviation_s * 1000.0).collect();
        let gradients: Vec<f64> = stats.iter().map(|s| s.gradient.abs()).collect();
        let named = |what: &str| match phase {
            Some(phase) => names.metric(&format!("{what}_{phase}")),
            None => names.metric(what),
        };
        result.set(named("rtt_intervals"), stats.len() as f64);
        if let Some((calm_deviations, calm_gradients)) = &calm {
            let pairs = [
                (
                    "deviation",
                    confusion(calm_deviations, &deviations, deviation_resolution),
                ),
                (
                    "gradient",
                    confusion(calm_gradients, &gradients, gradient_resolution),
                ),
            ];
            // A tie counts half (module docs).
            let probability = |(smaller, equal): (f64, f64)| smaller + equal / 2.0;
            // The deviation's confusion over the gradient's (the paper's
            // claim is that the first is far smaller: 0.6% against 8.0%).
            if let [(_, Some(deviation)), (_, Some(gradient))] = pairs
                && probability(gradient) > 0.0
            {
                result.set(
                    named("rtt_confusion_ratio"),
                    probability(deviation) / probability(gradient),
                );
            }
            for (metric, found) in pairs {
                if let Some((smaller, equal)) = found {
                    result.set(
                        named(&format!("rtt_confusion_{metric}_pct")),
                        100.0 * probability((smaller, equal)),
                    );
                    result.set(named(&format!("rtt_ties_{metric}_pct")), 100.0 * equal);
                }
            }
        }
        result
            .distributions
            .insert(named("rtt_deviation_ms"), deviations.clone());
        result
            .distributions
            .insert(named("rtt_gradient_abs"), gradients.clone());
        calm.get_or_insert((deviations, gradients));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(m: f64) -> Duration {
        Duration::from_secs_f64(m / 1000.0)
    }

    #[test]
    fn each_interval_has_its_own_deviation_and_gradient() {
        // Samples every 10 ms of send time over 0–300 ms: flat 60 ms in the
        // first 100 ms, rising 1 ms per 10 ms in the second, alternating
        // 60/62 ms in the third; intervals of 100 ms from 0 to 300 ms.
        let mut samples = Vec::new();
        for i in 0..30u32 {
            let sent = f64::from(i) * 10.0;
            let rtt = match i / 10 {
                0 => 60.0,
                1 => 60.0 + f64::from(i - 10),
                _ => 60.0 + 2.0 * f64::from(i % 2),
            };
            samples.push((ms(sent), ms(rtt)));
        }
        // A sample before the start and one past the end are left out.
        samples.push((ms(350.0), ms(500.0)));
        let stats = intervals(&samples, ms(0.0), ms(300.0), ms(100.0));
        assert_eq!(stats.len(), 3);
        assert!(stats[0].deviation_s.abs() < 1e-12 && stats[0].gradient.abs() < 1e-9);
        // 0..9 ms over 90 ms: slope 0.1, deviation √8.25 ms.
        assert!((stats[1].gradient - 0.1).abs() < 1e-9, "{:?}", stats[1]);
        assert!((stats[1].deviation_s - 8.25f64.sqrt() / 1000.0).abs() < 1e-9);
        // Alternating ±1 ms: deviation 1 ms, a slope near zero.
        assert!((stats[2].deviation_s - 0.001).abs() < 1e-9);
        assert!(stats[2].gradient.abs() < 0.01, "{:?}", stats[2]);
        // From 50 ms: intervals 50–150 and 150–250 only.
        assert_eq!(intervals(&samples, ms(50.0), ms(300.0), ms(100.0)).len(), 2);
    }

    #[test]
    fn confusion_counts_pairs_where_the_busy_value_is_smaller() {
        let calm = [1.0, 2.0, 3.0];
        let busy = [0.5, 2.0, 4.0, 5.0];
        // Pairs with busy < calm: 0.5 under all three; 2.0 under 3.0: 4 of
        // 12. Equal: (2.0, 2.0): 1 of 12.
        let (smaller, equal) = confusion(&calm, &busy, 0.0).unwrap();
        assert!((smaller - 4.0 / 12.0).abs() < 1e-12);
        assert!((equal - 1.0 / 12.0).abs() < 1e-12);
        assert_eq!(confusion(&calm, &[], 0.0), None);
        // Every busy value above every calm one: no confusion.
        assert_eq!(confusion(&calm, &[9.0, 10.0], 0.0), Some((0.0, 0.0)));
    }

    #[test]
    fn values_within_the_resolution_are_equal_not_smaller() {
        // Idle intervals a few nanoseconds apart (in ms), and one busy
        // interval clearly above them.
        let calm = [0.290_43, 0.290_47, 0.290_50];
        let busy = [0.290_44, 0.290_48, 0.45];
        // At full resolution 0.29044 is under two calm values and 0.29048
        // under one: 3 of 9 pairs "smaller"; no ties.
        let (smaller, equal) = confusion(&calm, &busy, 0.0).unwrap();
        assert!((smaller - 3.0 / 9.0).abs() < 1e-12);
        assert_eq!(equal, 0.0);
        // At 1 µs (0.001 ms) the six idle pairs are ties, none smaller.
        let (smaller, equal) = confusion(&calm, &busy, 0.001).unwrap();
        assert_eq!(smaller, 0.0);
        assert!((equal - 6.0 / 9.0).abs() < 1e-12);
        // A busy value smaller by more than the resolution still counts.
        let (smaller, _) = confusion(&calm, &[0.2885], 0.001).unwrap();
        assert_eq!(smaller, 1.0);
    }
}

//! PCC Vivace's rate control (NSDI'18, as PCC-Uspace's
//! `PccVivaceSender` runs it), shared by Vivace and every Proteus mode.
//!
//! It chooses each monitor interval's rate when the MI opens
//! ([`RateControl::next_interval`]) and learns from each MI's utility when
//! the MI completes ([`RateControl::on_result`]), in MI order:
//!
//! * **Starting**: every MI is sent at the current rate; each result that
//!   beats the previous one doubles the rate; the first that does not
//!   returns to the best rate so far and starts probing. (Results of MIs
//!   sent before the last doubling, at a rate already judged, are
//!   skipped.)
//! * **Probing**: pairs of MIs at r·(1 ± ε), ε = 0.05, each pair in an
//!   order drawn from the seeded random source; two pairs that must agree
//!   (Vivace), or three decided by majority (Proteus's majority rule).
//!   Each pair votes "up" when its higher rate had the higher utility.
//!   Without a decision, probing repeats around the same rate.
//! * **Moving**: from the winning probe rate, steps of θ·γ·m Mbit/s, where
//!   γ is the utility gradient (utility per Mbit/s; averaged over the
//!   agreeing pairs, then between consecutive steps), θ = 1 and m the
//!   confidence amplifier ⌊(k+1)/2⌋^1.2 after k steps; each step is at
//!   least 0.5 Mbit/s and at most ω·r, with the dynamic boundary
//!   ω = 0.05 + 0.05·j (j rises when a step is clipped and falls when it
//!   is not). One MI per step; MIs sent while its result is pending are
//!   not used. It moves on while each step's utility beats the last, and
//!   otherwise steps back and probes.
//!
//! Rates never go below 0.5 Mbit/s; reaching it while probing starts over.
//!
//! A change of utility ([`RateControl::restart_probing`]) starts a new
//! probing round around the current rate: results judged under the old
//! utility are not compared with new ones, and the next move starts with
//! the first step's amplifier and boundary (PCC-Uspace changes a sender's
//! effective utility only as a probing round starts).

use netsim::Rate;
use rand_chacha::rand_core::RngCore;
use std::collections::BTreeMap;

/// The probing step ε.
pub const PROBE_STEP: f64 = 0.05;
/// The smallest rate, and the smallest rate change, Mbit/s.
pub const MIN_RATE_MBPS: f64 = 0.5;
/// θ: Mbit/s of rate change per unit of utility gradient.
pub const THETA: f64 = 1.0;
/// The dynamic boundary's first value and its step.
pub const BOUNDARY: (f64, f64) = (0.05, 0.05);

/// How probing decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Two pairs that must agree (Vivace).
    TwoAgree,
    /// The majority of three pairs (Proteus).
    MajorityOfThree,
}

impl Decision {
    fn pairs(self) -> usize {
        match self {
            Decision::TwoAgree => 2,
            Decision::MajorityOfThree => 3,
        }
    }
}

/// The state of the rate control.
#[derive(Clone, Debug, PartialEq)]
enum State {
    Starting {
        /// The best (rate, utility) so far.
        best: Option<(f64, f64)>,
    },
    Probing {
        center: f64,
        /// Probe rates not yet handed to an MI.
        planned: Vec<f64>,
        /// Probe MIs: id → (rate, utility once known).
        probes: BTreeMap<u64, (f64, Option<f64>)>,
        /// A probe MI's result could not be used.
        spoiled: bool,
    },
    Moving {
        /// +1 up, −1 down.
        direction: f64,
        /// Steps taken so far.
        steps: u32,
        /// The last step's rate and utility (the reference point).
        last: (f64, f64),
        /// The step MI in flight, if any.
        pending: Option<u64>,
        /// The rate of the next step's MI.
        next: f64,
        /// The dynamic boundary's count j.
        boundary: u32,
    },
}

/// What the rate control did, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateStats {
    /// Probing rounds that reached a decision.
    pub decisions: u64,
    /// ... of which to go up.
    pub ups: u64,
    /// Probing rounds without one (repeated).
    pub undecided: u64,
    /// Steps of the moving state.
    pub steps: u64,
    /// Steps clipped by the dynamic boundary.
    pub clipped: u64,
}

/// Vivace's rate control.
#[derive(Clone, Debug)]
pub struct RateControl<R> {
    state: State,
    /// The rate MIs are sent at outside probes, Mbit/s.
    rate: f64,
    decision: Decision,
    rng: R,
    /// Target rate of each MI whose result is awaited in Starting.
    starting_rates: BTreeMap<u64, f64>,
    stats: RateStats,
}

impl<R: RngCore> RateControl<R> {
    /// Starts at `initial` with `decision`'s probing, drawing probe orders
    /// from `rng`.
    pub fn new(initial: Rate, decision: Decision, rng: R) -> RateControl<R> {
        RateControl {
            state: State::Starting { best: None },
            rate: mbps(initial).max(MIN_RATE_MBPS),
            decision,
            rng,
            starting_rates: BTreeMap::new(),
            stats: RateStats::default(),
        }
    }

    /// The current rate.
    pub fn rate(&self) -> Rate {
        rate(self.rate)
    }

    /// Whether it is still in its starting phase.
    pub fn is_starting(&self) -> bool {
        matches!(self.state, State::Starting { .. })
    }

    /// Scales the rate before any result (PCC-Uspace scales its initial
    /// rate when the first RTT sample arrives).
    pub fn rescale_initial(&mut self, initial: Rate) {
        if let State::Starting { best: None } = self.state {
            self.rate = mbps(initial).max(MIN_RATE_MBPS);
        }
    }

    /// The utility changed: drops every result judged under the old one
    /// (the probes so far, the last step's reference, the best starting
    /// rate) and probes around the current rate (a start that has a best
    /// rate probes around that). A start with nothing judged goes on.
    pub fn restart_probing(&mut self) {
        match self.state {
            State::Starting { best: None } => return,
            State::Starting {
                best: Some((best_rate, _)),
            } => self.rate = best_rate,
            State::Probing { .. } | State::Moving { .. } => {}
        }
        self.starting_rates.clear();
        self.enter_probing();
    }

    /// What it did so far.
    pub fn stats(&self) -> RateStats {
        self.stats
    }

    /// The rate of MI `id`, opening now, and whether its utility will be
    /// used.
    pub fn next_interval(&mut self, id: u64) -> (Rate, bool) {
        let rate_now = self.rate;
        match &mut self.state {
            State::Starting { .. } => {
                self.starting_rates.insert(id, rate_now);
                (rate(rate_now), true)
            }
            State::Probing {
                planned, probes, ..
            } => match planned.pop() {
                Some(probe) => {
                    probes.insert(id, (probe, None));
                    (rate(probe), true)
                }
                None => (rate(rate_now), false),
            },
            State::Moving { pending, next, .. } => {
                if pending.is_none() {
                    *pending = Some(id);
                    self.rate = *next;
                    (rate(*next), true)
                } else {
                    (rate(rate_now), false)
                }
            }
        }
    }

    /// The utility of MI `id`, or `None` if its measurement cannot be used
    /// (too few samples, sent below its rate).
    pub fn on_result(&mut self, id: u64, utility: Option<f64>) {
        match &mut self.state {
            State::Starting { best } => {
                let Some(sent_at) = self.starting_rates.remove(&id) else {
                    return;
                };
                let Some(utility) = utility else {
                    return;
                };
                match *best {
                    // A rate already judged (sent before the last doubling).
                    Some((best_rate, _)) if sent_at <= best_rate => {}
                    Some((best_rate, best_utility)) if utility <= best_utility => {
                        self.starting_rates.clear();
                        self.rate = best_rate;
                        self.enter_probing();
                    }
                    _ => {
                        *best = Some((sent_at, utility));
                        self.rate = 2.0 * sent_at;
                    }
                }
            }
            State::Probing {
                probes, spoiled, ..
            } => {
                let Some(probe) = probes.get_mut(&id) else {
                    return;
                };
                match utility {
                    Some(u) => probe.1 = Some(u),
                    None => {
                        probe.1 = Some(f64::NAN);
                        *spoiled = true;
                    }
                }
                self.after_probe();
            }
            State::Moving { pending, .. } => {
                if *pending != Some(id) {
                    return;
                }
                *pending = None;
                match utility {
                    Some(u) => self.after_step(u),
                    // The step cannot be judged: probe again from here.
                    None => self.enter_probing(),
                }
            }
        }
    }

    fn enter_probing(&mut self) {
        self.rate = self.rate.max(MIN_RATE_MBPS);
        let center = self.rate;
        let mut planned = Vec::with_capacity(2 * self.decision.pairs());
        for _ in 0..self.decision.pairs() {
            let (hi, lo) = (center * (1.0 + PROBE_STEP), center * (1.0 - PROBE_STEP));
            // Handed out from the back: the pair's first MI is pushed last.
            if self.rng.next_u32() & 1 == 0 {
                planned.extend([lo, hi]);
            } else {
                planned.extend([hi, lo]);
            }
        }
        planned.reverse();
        self.state = State::Probing {
            center,
            planned,
            probes: BTreeMap::new(),
            spoiled: false,
        };
    }

    /// Once every probe has its result: decide, or probe again.
    fn after_probe(&mut self) {
        let State::Probing {
            center,
            planned,
            probes,
            spoiled,
        } = &self.state
        else {
            return;
        };
        if !planned.is_empty() || probes.values().any(|p| p.1.is_none()) {
            return;
        }
        let center = *center;
        if *spoiled {
            self.stats.undecided += 1;
            self.enter_probing();
            return;
        }
        // Pairs in the order their MIs were sent.
        let results: Vec<(f64, f64)> = probes
            .values()
            .map(|&(r, u)| (r, u.unwrap_or(0.0)))
            .collect();
        let pairs: Vec<(f64, f64)> = results
            .chunks(2)
            .filter_map(|pair| match pair {
                [a, b] => {
                    let (hi, lo) = if a.0 > b.0 { (a, b) } else { (b, a) };
                    Some(((hi.1 - lo.1) / (hi.0 - lo.0), hi.0 - lo.0))
                }
                _ => None,
            })
            .collect();
        let ups = pairs.iter().filter(|(gradient, _)| *gradient > 0.0).count();
        let direction = match self.decision {
            Decision::TwoAgree if ups == pairs.len() => Some(1.0),
            Decision::TwoAgree if ups == 0 => Some(-1.0),
            Decision::TwoAgree => None,
            Decision::MajorityOfThree => Some(if 2 * ups > pairs.len() { 1.0 } else { -1.0 }),
        };
        let Some(direction) = direction else {
            self.stats.undecided += 1;
            self.enter_probing();
            return;
        };
        let agreeing: Vec<f64> = pairs
            .iter()
            .map(|(gradient, _)| *gradient)
            .filter(|gradient| (*gradient > 0.0) == (direction > 0.0))
            .collect();
        let gradient = agreeing.iter().sum::<f64>() / agreeing.len().max(1) as f64;
        self.stats.decisions += 1;
        self.stats.ups += u64::from(direction > 0.0);
        // The winning probe rate and its mean utility are the reference.
        let winner = center * (1.0 + direction * PROBE_STEP);
        let winning: Vec<f64> = results
            .iter()
            .filter(|(r, _)| (*r > center) == (direction > 0.0))
            .map(|(_, u)| *u)
            .collect();
        let utility = winning.iter().sum::<f64>() / winning.len().max(1) as f64;
        let mut boundary = 0;
        let change = self.bounded_change(winner, direction, gradient, 1, &mut boundary);
        self.state = State::Moving {
            direction,
            steps: 1,
            last: (winner, utility),
            pending: None,
            next: (winner + change).max(MIN_RATE_MBPS),
            boundary,
        };
    }

    /// The step from `from`: θ·|γ|·m(steps) in `direction`, at least the
    /// minimum change, at most the dynamic boundary.
    fn bounded_change(
        &mut self,
        from: f64,
        direction: f64,
        gradient: f64,
        steps: u32,
        boundary: &mut u32,
    ) -> f64 {
        // PCC-Uspace's integer ⌊(k + 1)/2⌋: 1, 1, 2, 2, 3, … before ^1.2.
        let amplifier = f64::from(steps.div_ceil(2).max(1)).powf(1.2);
        let mut change = (THETA * gradient.abs() * amplifier).max(MIN_RATE_MBPS);
        let limit = from * (BOUNDARY.0 + BOUNDARY.1 * f64::from(*boundary));
        if change > limit {
            change = limit;
            *boundary += 1;
            self.stats.clipped += 1;
        } else {
            *boundary = boundary.saturating_sub(1);
        }
        self.stats.steps += 1;
        direction * change
    }

    /// The result of the step MI: go on while the utility improves.
    fn after_step(&mut self, utility: f64) {
        let State::Moving {
            direction,
            steps,
            last,
            next,
            boundary,
            ..
        } = self.state.clone()
        else {
            return;
        };
        let stepped = next;
        if utility > last.1 && stepped != last.0 {
            let gradient = (utility - last.1) / (stepped - last.0);
            let mut boundary = boundary;
            let change =
                self.bounded_change(stepped, direction, gradient, steps + 1, &mut boundary);
            let next = stepped + change;
            if next <= MIN_RATE_MBPS {
                self.rate = MIN_RATE_MBPS;
                self.starting_rates.clear();
                self.state = State::Starting { best: None };
                return;
            }
            self.state = State::Moving {
                direction,
                steps: steps + 1,
                last: (stepped, utility),
                pending: None,
                next,
                boundary,
            };
        } else {
            // Worse: back to the last good rate, and probe.
            self.rate = last.0;
            self.enter_probing();
        }
    }
}

fn mbps(rate: Rate) -> f64 {
    rate.bits_per_sec() as f64 / 1e6
}

fn rate(mbps: f64) -> Rate {
    Rate::from_bps((mbps * 1e6).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generator that always returns `bit` as its low bit.
    struct Fixed(u32);
    impl RngCore for Fixed {
        fn next_u32(&mut self) -> u32 {
            self.0
        }
        fn next_u64(&mut self) -> u64 {
            u64::from(self.0)
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(self.0 as u8);
        }
    }

    /// Hands out MI `id` and returns its rate in Mbit/s.
    fn open(rc: &mut RateControl<Fixed>, id: u64) -> (f64, bool) {
        let (r, useful) = rc.next_interval(id);
        (mbps(r), useful)
    }

    /// Opens the intervals `ids`, one after another; returns their ids.
    fn open_all(rc: &mut RateControl<Fixed>, ids: std::ops::Range<u64>) -> Vec<u64> {
        ids.inspect(|&id| {
            open(rc, id);
        })
        .collect()
    }

    /// A concave utility peaking at 50 Mbit/s.
    fn utility(x: f64) -> f64 {
        x - 0.01 * x * x
    }

    #[test]
    fn starting_doubles_on_each_better_result_then_falls_back_and_probes() {
        let mut rc = RateControl::new(Rate::from_mbps(10), Decision::MajorityOfThree, Fixed(0));
        assert_eq!(open(&mut rc, 0), (10.0, true));
        assert_eq!(open(&mut rc, 1), (10.0, true));
        rc.on_result(0, Some(utility(10.0)));
        assert_eq!(open(&mut rc, 2), (20.0, true));
        // MI 1 was at 10 Mbit/s, already judged: skipped.
        rc.on_result(1, Some(utility(10.0)));
        assert_eq!(rc.rate(), Rate::from_mbps(20));
        rc.on_result(2, Some(utility(20.0)));
        assert_eq!(open(&mut rc, 3), (40.0, true));
        rc.on_result(3, Some(utility(40.0)));
        assert_eq!(open(&mut rc, 4), (80.0, true));
        // 80 Mbit/s is worse than 40: back to 40 and probe.
        rc.on_result(4, Some(utility(80.0)));
        assert!(!rc.is_starting());
        // Fixed(0): each pair low first.
        let rates: Vec<f64> = (5..11).map(|id| open(&mut rc, id).0).collect();
        assert_eq!(rates, [38.0, 42.0, 38.0, 42.0, 38.0, 42.0]);
        // A seventh MI waits at the center, not used.
        assert_eq!(open(&mut rc, 11), (40.0, false));
    }

    /// A rate control probing around 40 Mbit/s.
    fn probing(decision: Decision) -> RateControl<Fixed> {
        let mut rc = RateControl::new(Rate::from_mbps(40), decision, Fixed(1));
        rc.next_interval(0);
        rc.on_result(0, Some(10.0));
        rc.next_interval(1);
        rc.on_result(1, Some(0.0));
        rc
    }

    #[test]
    fn the_majority_of_three_pairs_decides_and_steps_by_the_gradient() {
        let mut rc = probing(Decision::MajorityOfThree);
        // Fixed(1): each pair high first: 42, 38, ...
        let ids: Vec<(u64, f64)> = (2..8).map(|id| (id, open(&mut rc, id).0)).collect();
        assert_eq!(ids[0].1, 42.0);
        // Two pairs say up (gradient +0.5 per Mbit/s), one says down.
        let utilities = [10.0 + 2.0, 10.0, 10.0 + 2.0, 10.0, 10.0 - 4.0, 10.0];
        for ((id, _), u) in ids.iter().zip(utilities) {
            rc.on_result(*id, Some(u));
        }
        assert_eq!(rc.stats().decisions, 1);
        assert_eq!(rc.stats().ups, 1);
        // From the winning probe 42: + max(0.5 · 1, 0.5) = 42.5 Mbit/s.
        assert_eq!(open(&mut rc, 8), (42.5, true));
        assert_eq!(open(&mut rc, 9), (42.5, false), "until the step's result");
    }

    #[test]
    fn two_pairs_must_agree() {
        let mut rc = probing(Decision::TwoAgree);
        let ids = open_all(&mut rc, 2..6);
        for (id, u) in ids.iter().zip([12.0, 10.0, 8.0, 10.0]) {
            rc.on_result(*id, Some(u));
        }
        assert_eq!(rc.stats().undecided, 1);
        assert_eq!(open(&mut rc, 6), (42.0, true), "probing again around 40");
    }

    #[test]
    fn moving_accelerates_while_utility_improves_then_steps_back() {
        let mut rc = probing(Decision::MajorityOfThree);
        let ids = open_all(&mut rc, 2..8);
        // Every pair up by 20 per 4 Mbit/s: gradient 5.
        for (id, u) in ids.iter().zip([30.0, 10.0, 30.0, 10.0, 30.0, 10.0]) {
            rc.on_result(*id, Some(u));
        }
        // Step 1 from 42: 5 Mbit/s > ω = 5% of 42 = 2.1: clipped to 2.1.
        let (r1, _) = open(&mut rc, 8);
        assert!((r1 - 44.1).abs() < 1e-9, "{r1}");
        assert_eq!(rc.stats().clipped, 1);
        // Better by 4.2 over 2.1 Mbit/s: gradient 2, now ω = 10% of 44.1.
        rc.on_result(8, Some(30.0 + 4.2));
        let (r2, _) = open(&mut rc, 9);
        assert!((r2 - 46.1).abs() < 1e-9, "{r2}");
        // Worse: back to 44.1 and probe around it.
        rc.on_result(9, Some(0.0));
        let (probe, useful) = open(&mut rc, 10);
        assert!(useful && (probe - 44.1 * 1.05).abs() < 1e-9, "{probe}");
    }

    #[test]
    fn a_utility_change_drops_old_results_and_probes_around_the_current_rate() {
        let mut rc = probing(Decision::MajorityOfThree);
        let ids = open_all(&mut rc, 2..8);
        // Two probes judged under the old utility, then it changes.
        rc.on_result(ids[0], Some(30.0));
        rc.on_result(ids[1], Some(10.0));
        rc.restart_probing();
        // The old round's remaining results are not used.
        for id in &ids[2..] {
            rc.on_result(*id, Some(1.0));
        }
        assert_eq!(rc.stats().decisions, 0);
        let rates: Vec<f64> = (8..14).map(|id| open(&mut rc, id).0).collect();
        assert_eq!(rates, [42.0, 38.0, 42.0, 38.0, 42.0, 38.0]);

        // Moving: the step in flight is the current rate; the amplifier
        // starts over.
        let mut rc = probing(Decision::MajorityOfThree);
        let ids = open_all(&mut rc, 2..8);
        for (id, u) in ids.iter().zip([30.0, 10.0, 30.0, 10.0, 30.0, 10.0]) {
            rc.on_result(*id, Some(u));
        }
        let (step, _) = open(&mut rc, 8);
        rc.restart_probing();
        rc.on_result(8, Some(100.0));
        let (probe, useful) = open(&mut rc, 9);
        assert!(useful && (probe - step * 1.05).abs() < 1e-9, "{probe}");
    }

    #[test]
    fn a_utility_change_before_any_result_keeps_starting() {
        let mut rc = RateControl::new(Rate::from_mbps(10), Decision::MajorityOfThree, Fixed(0));
        open(&mut rc, 0);
        rc.restart_probing();
        assert!(rc.is_starting());
        rc.on_result(0, Some(utility(10.0)));
        assert_eq!(open(&mut rc, 1), (20.0, true));
        // With a best rate: probing around it.
        rc.restart_probing();
        assert!(!rc.is_starting());
        assert_eq!(open(&mut rc, 2), (9.5, true));
    }

    #[test]
    fn an_unusable_probe_repeats_the_round() {
        let mut rc = probing(Decision::MajorityOfThree);
        let ids = open_all(&mut rc, 2..8);
        rc.on_result(ids[0], None);
        for id in &ids[1..] {
            rc.on_result(*id, Some(1.0));
        }
        assert_eq!(rc.stats().undecided, 1);
        assert!(open(&mut rc, 8).1);
    }
}

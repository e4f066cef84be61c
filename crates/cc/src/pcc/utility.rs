//! The utility functions (Proteus §4) and the handle through which an
//! application changes a running sender's utility (§3: "a simple API
//! call").
//!
//! With x the MI's sending rate in Mbit/s, g its RTT gradient (s/s), L
//! its loss rate and σ its RTT deviation in seconds:
//!
//! * Vivace (NSDI'18): u = x^t − b·x·g − c·x·L (a falling RTT is rewarded);
//! * Proteus-P (eq. 1): u_P = x^t − b·x·max(0, g) − c·x·L;
//! * Proteus-S (eq. 2): u_S = u_P − d·x·σ;
//! * Proteus-H (eq. 3): u_P below a threshold rate, u_S at or above it.
//!
//! t = 0.9, b = 900, c = 11.35 (Vivace's and Proteus-P's defaults) and
//! d = 1500 with σ in seconds (§6; PCC-Uspace writes 0.0015 with σ in
//! µs, the same penalty).

use netsim::Rate;
use std::sync::{Arc, Mutex};

/// The utility constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UtilityParams {
    /// The rate exponent t (0 < t < 1).
    pub t: f64,
    /// The RTT-gradient coefficient b.
    pub b: f64,
    /// The loss coefficient c.
    pub c: f64,
    /// The RTT-deviation coefficient d (per second of deviation).
    pub d: f64,
}

impl UtilityParams {
    /// The paper's: t = 0.9, b = 900, c = 11.35, d = 1500.
    pub const PAPER: UtilityParams = UtilityParams {
        t: 0.9,
        b: 900.0,
        c: 11.35,
        d: 1500.0,
    };
}

impl Default for UtilityParams {
    fn default() -> UtilityParams {
        UtilityParams::PAPER
    }
}

/// Which utility a sender maximises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Utility {
    /// PCC Vivace's.
    Vivace,
    /// Proteus-P, the primary mode.
    Primary,
    /// Proteus-S, the scavenger.
    Scavenger,
    /// Proteus-H: primary below the handle's threshold, scavenger at or
    /// above it (no threshold: primary at every rate, the emergency rule of
    /// §4.4).
    Hybrid,
}

/// What an MI measured, as a utility reads it (after noise tolerance).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Observation {
    /// Sending rate, Mbit/s.
    pub rate_mbps: f64,
    /// RTT gradient (s/s).
    pub gradient: f64,
    /// RTT deviation, seconds.
    pub deviation_s: f64,
    /// Loss rate (0–1).
    pub loss: f64,
}

impl Utility {
    /// The utility of `o`, with Proteus-H's switching `threshold`.
    pub fn value(self, params: &UtilityParams, o: &Observation, threshold: Option<Rate>) -> f64 {
        let x = o.rate_mbps.max(0.0);
        let base = x.powf(params.t) - params.c * x * o.loss;
        let primary = base - params.b * x * o.gradient.max(0.0);
        let scavenger = primary - params.d * x * o.deviation_s.max(0.0);
        match self {
            Utility::Vivace => base - params.b * x * o.gradient,
            Utility::Primary => primary,
            Utility::Scavenger => scavenger,
            Utility::Hybrid => match threshold {
                Some(rate) if x >= rate.bits_per_sec() as f64 / 1e6 => scavenger,
                _ => primary,
            },
        }
    }
}

/// What a handle holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Choice {
    utility: Utility,
    threshold: Option<Rate>,
}

/// The application's handle on a running PCC sender: the utility every
/// later MI is scored with, and Proteus-H's threshold. Clones share one
/// value; the sender reads it once per MI.
#[derive(Clone, Debug)]
pub struct UtilityHandle(Arc<Mutex<Choice>>);

impl UtilityHandle {
    /// A handle starting at `utility`, without a threshold.
    pub fn new(utility: Utility) -> UtilityHandle {
        UtilityHandle(Arc::new(Mutex::new(Choice {
            utility,
            threshold: None,
        })))
    }

    /// The utility now.
    pub fn utility(&self) -> Utility {
        self.0.lock().expect("utility lock").utility
    }

    /// Proteus-H's threshold now (`None`: infinite).
    pub fn threshold(&self) -> Option<Rate> {
        self.0.lock().expect("utility lock").threshold
    }

    /// Both at once.
    pub fn get(&self) -> (Utility, Option<Rate>) {
        let choice = *self.0.lock().expect("utility lock");
        (choice.utility, choice.threshold)
    }

    /// Scores later MIs with `utility` (the mid-flow switch).
    pub fn set_utility(&self, utility: Utility) {
        self.0.lock().expect("utility lock").utility = utility;
    }

    /// Sets Proteus-H's threshold (`None`: infinite). Other utilities do
    /// not read it.
    pub fn set_threshold(&self, threshold: Option<Rate>) {
        self.0.lock().expect("utility lock").threshold = threshold;
    }
}

impl PartialEq for UtilityHandle {
    fn eq(&self, other: &UtilityHandle) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: UtilityParams = UtilityParams::PAPER;

    fn obs(rate_mbps: f64, gradient: f64, deviation_s: f64, loss: f64) -> Observation {
        Observation {
            rate_mbps,
            gradient,
            deviation_s,
            loss,
        }
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn hand_computed_utilities() {
        // 10^0.9 = 7.943282347242815.
        let pow = 7.943_282_347_242_815;
        // 10 Mbit/s, 1% loss: 7.9433 − 11.35·10·0.01 = 6.8083.
        close(
            Utility::Primary.value(&P, &obs(10.0, 0.0, 0.0, 0.01), None),
            pow - 1.135,
        );
        // A gradient of 0.001: 900·10·0.001 = 9 off.
        close(
            Utility::Primary.value(&P, &obs(10.0, 0.001, 0.0, 0.0), None),
            pow - 9.0,
        );
        // A negative gradient: Proteus-P ignores it, Vivace rewards it.
        close(
            Utility::Primary.value(&P, &obs(10.0, -0.001, 0.0, 0.0), None),
            pow,
        );
        close(
            Utility::Vivace.value(&P, &obs(10.0, -0.001, 0.0, 0.0), None),
            pow + 9.0,
        );
        // A deviation of 1 ms: 1500·10·0.001 = 15 off for the scavenger.
        close(
            Utility::Scavenger.value(&P, &obs(10.0, 0.0, 0.001, 0.0), None),
            pow - 15.0,
        );
        close(
            Utility::Primary.value(&P, &obs(10.0, 0.0, 0.001, 0.0), None),
            pow,
        );
    }

    #[test]
    fn hybrid_is_primary_below_its_threshold_and_scavenger_above() {
        let t = Some(Rate::from_mbps(20));
        let h = Utility::Hybrid;
        let below = obs(10.0, 0.0, 0.001, 0.0);
        let above = obs(30.0, 0.0, 0.001, 0.0);
        close(
            h.value(&P, &below, t),
            Utility::Primary.value(&P, &below, t),
        );
        close(
            h.value(&P, &above, t),
            Utility::Scavenger.value(&P, &above, t),
        );
        // No threshold (the emergency rule): primary everywhere.
        close(
            h.value(&P, &above, None),
            Utility::Primary.value(&P, &above, None),
        );
    }

    #[test]
    fn the_handle_is_shared() {
        let handle = UtilityHandle::new(Utility::Primary);
        let sender_side = handle.clone();
        handle.set_utility(Utility::Scavenger);
        assert_eq!(sender_side.utility(), Utility::Scavenger);
        handle.set_threshold(Some(Rate::from_mbps(5)));
        assert_eq!(
            sender_side.get(),
            (Utility::Scavenger, Some(Rate::from_mbps(5)))
        );
    }
}

//! Random loss models: Bernoulli and Gilbert–Elliott.

use crate::Probability;
use rand_chacha::rand_core::RngCore;

/// How a link loses packets at random, independently of congestion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LossModel {
    /// No random loss.
    #[default]
    None,
    /// Each packet is lost independently with this probability.
    Bernoulli(Probability),
    /// Bursty loss from a two-state Markov chain.
    GilbertElliott(GilbertElliott),
}

/// The parameters of a Gilbert–Elliott channel.
///
/// The chain has a good and a bad state. For every packet the link first
/// decides whether the packet is lost, with the loss probability of the
/// current state, then moves: good → bad with probability `p`, bad → good
/// with probability `r`. In the long run the chain is bad a fraction
/// `p / (p + r)` of the packets, so the loss rate is
/// `(r · loss_good + p · loss_bad) / (p + r)`; with `loss_good = 0` and
/// `loss_bad = 1` (the simple Gilbert model) losses come in bursts of mean
/// length `1 / r`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GilbertElliott {
    /// Probability of moving from good to bad, per packet.
    pub p: Probability,
    /// Probability of moving from bad to good, per packet.
    pub r: Probability,
    /// Loss probability in the good state.
    pub loss_good: Probability,
    /// Loss probability in the bad state.
    pub loss_bad: Probability,
}

impl GilbertElliott {
    /// The simple Gilbert model: no loss when good, every packet lost when
    /// bad.
    pub fn gilbert(p: Probability, r: Probability) -> GilbertElliott {
        GilbertElliott {
            p,
            r,
            loss_good: Probability::ZERO,
            loss_bad: Probability::ONE,
        }
    }

    /// The long-run loss rate `(r · loss_good + p · loss_bad) / (p + r)`,
    /// for reports and tests.
    pub fn mean_loss_rate(&self) -> f64 {
        let (p, r) = (self.p.as_f64(), self.r.as_f64());
        if p + r == 0.0 {
            return self.loss_good.as_f64();
        }
        (r * self.loss_good.as_f64() + p * self.loss_bad.as_f64()) / (p + r)
    }
}

/// The running state of a loss model on one link.
#[derive(Clone, Debug)]
pub(crate) struct LossState {
    model: LossModel,
    bad: bool,
}

impl LossState {
    pub(crate) fn new(model: LossModel) -> LossState {
        LossState { model, bad: false }
    }

    /// Decides the fate of one packet: true if it is lost.
    pub(crate) fn lose(&mut self, rng: &mut impl RngCore) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Bernoulli(p) => p.sample(rng),
            LossModel::GilbertElliott(ge) => {
                let lost = if self.bad {
                    ge.loss_bad.sample(rng)
                } else {
                    ge.loss_good.sample(rng)
                };
                let flip = if self.bad { ge.r } else { ge.p };
                if flip.sample(rng) {
                    self.bad = !self.bad;
                }
                lost
            }
        }
    }
}

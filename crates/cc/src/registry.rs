//! The one registry of congestion controllers: every driver (simulated
//! and real-mode trials, the split proxy's legs, competing flows) chooses
//! a controller by name through [`Controller`].
//!
//! A scenario names a controller with its settings,
//! `controller = "cubic"` or `controller = { name = "pacubic", quack_acks =
//! true }`; the variant carries the settings, validated when the file is
//! read. Building one ([`Controller::build`]) takes a
//! [`ControllerContext`]: the seed of the endpoint's randomness, the
//! endpoint's clock, the [`Signals`](crate::Signals) something on the path
//! feeds the controller ([`crate::signals`]) and the utility handle an
//! application drives. What a controller reads ([`Input`]: a kind of
//! signal, or the handle) must be provided to it: [`Controller::requires`]
//! says so at validation time. Its counters come back through
//! [`Built::counters`].
//!
//! Adding a controller is one module (its algorithm and its settings), one
//! variant here and one arm in each `match` below; the compiler finds
//! every place that must learn about it.

use crate::bbr::BbrFactory;
use crate::context::{Built, ControllerContext};
use crate::pcc::settings as pcc;
use crate::pcc::utility::Utility;
use crate::signals::Input;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A congestion controller by name, with its settings.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(tag = "name", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Controller {
    /// noq-proto's CUBIC (the default).
    #[default]
    Cubic,
    /// noq-proto's NewReno.
    Newreno,
    /// Our BBR version 1 ([`crate::Bbr`]), seeded from the scenario: what
    /// the Proteus paper's kernel ran.
    Bbr,
    /// BBR-S (Proteus §7.1): BBR forced into ProbeRTT while the RTT
    /// deviates.
    BbrS,
    /// noq-proto's BBRv3 (its probe randomness comes from the operating
    /// system, so runs with it do not repeat exactly).
    NoqBbr3,
    /// Our own CUBIC (RFC 9438, [`crate::Cubic`]).
    PepkitCubic(crate::cubic::CubicSettings),
    /// Sidekick's path-aware CUBIC ([`crate::Pacubic`]): reads the near
    /// segment's signals.
    Pacubic(crate::pacubic::PacubicSettings),
    /// PCC Vivace (NSDI'18, [`crate::Pcc`] with Vivace's utility).
    Vivace,
    /// PCC Proteus-P, the primary mode.
    ProteusP(crate::pcc::ProteusSettings),
    /// PCC Proteus-S, the scavenger.
    ProteusS(crate::pcc::ProteusSettings),
    /// PCC Proteus-H, the hybrid: reads its threshold from an application's
    /// handle unless its settings fix one.
    ProteusH(crate::pcc::HybridSettings),
    /// Copa (NSDI'18, [`crate::Copa`]).
    Copa(crate::CopaSettings),
    /// LEDBAT (RFC 6817, [`crate::Ledbat`]): one-way delays where the peer
    /// sends QUIC timestamps, RTTs otherwise or with `delay = "rtt"`.
    Ledbat(crate::LedbatSettings),
    /// No congestion control ([`crate::Unlimited`]; for a tunnel whose
    /// inner connections have their own).
    None,
    /// TECC's rate control on the application server ([`crate::Tecc`]):
    /// reads a tunnel's feedback.
    Tecc(crate::tecc::TeccSettings),
    /// No congestion control, paced at a constant rate (a probe, as the
    /// Proteus paper's §3 sends).
    Constant(crate::ConstantSettings),
}

impl Controller {
    /// The name a scenario gives it.
    pub fn name(&self) -> &'static str {
        match self {
            Controller::Cubic => "cubic",
            Controller::Newreno => "newreno",
            Controller::Bbr => "bbr",
            Controller::BbrS => "bbr-s",
            Controller::NoqBbr3 => "noq-bbr3",
            Controller::PepkitCubic(_) => "pepkit-cubic",
            Controller::Pacubic(_) => "pacubic",
            Controller::Vivace => "vivace",
            Controller::ProteusP(_) => "proteus-p",
            Controller::ProteusS(_) => "proteus-s",
            Controller::ProteusH(_) => "proteus-h",
            Controller::Copa(_) => "copa",
            Controller::Ledbat(_) => "ledbat",
            Controller::None => "none",
            Controller::Tecc(_) => "tecc",
            Controller::Constant(_) => "constant",
        }
    }

    /// What it reads from beside its endpoint when given it, if anything.
    pub fn input(&self) -> Option<Input> {
        match self {
            Controller::Cubic
            | Controller::Newreno
            | Controller::Bbr
            | Controller::BbrS
            | Controller::NoqBbr3
            | Controller::PepkitCubic(_)
            | Controller::Copa(_)
            | Controller::Ledbat(_)
            | Controller::None
            | Controller::Constant(_) => None,
            Controller::Pacubic(_) => Some(Input::NearSegment),
            Controller::Tecc(_) => Some(Input::TunnelFeedback),
            Controller::Vivace
            | Controller::ProteusP(_)
            | Controller::ProteusS(_)
            | Controller::ProteusH(_) => Some(Input::UtilityHandle),
        }
    }

    /// Whether it asks for the forward one-way delay: both endpoints of its
    /// connection then offer QUIC timestamps
    /// (`quic::QuicConfig::with_timestamps`).
    pub fn wants_timestamps(&self) -> bool {
        matches!(self, Controller::Ledbat(settings) if settings.delay == crate::LedbatDelay::OneWay)
    }

    /// Whether it sets its endpoint's loss thresholds itself
    /// ([`Built::loss_detection`]).
    pub fn sets_loss_detection(&self) -> bool {
        match self {
            Controller::Tecc(_) => true,
            Controller::Cubic
            | Controller::Newreno
            | Controller::Bbr
            | Controller::BbrS
            | Controller::NoqBbr3
            | Controller::PepkitCubic(_)
            | Controller::Pacubic(_)
            | Controller::Copa(_)
            | Controller::Ledbat(_)
            | Controller::Vivace
            | Controller::ProteusP(_)
            | Controller::ProteusS(_)
            | Controller::ProteusH(_)
            | Controller::None
            | Controller::Constant(_) => false,
        }
    }

    /// What it reads from beside its endpoint, with why, if it cannot run
    /// without it.
    pub fn requires(&self) -> Option<(Input, &'static str)> {
        let why = match self {
            Controller::Tecc(_) => crate::tecc::TeccSettings::REQUIRES,
            Controller::Pacubic(_) => crate::pacubic::PacubicSettings::REQUIRES,
            Controller::ProteusH(settings) if settings.threshold_mbps.is_none() => {
                crate::pcc::HybridSettings::REQUIRES
            }
            // Read their input (if any) only when given it; Proteus-H with
            // a fixed threshold needs no handle.
            Controller::ProteusH(_)
            | Controller::Vivace
            | Controller::ProteusP(_)
            | Controller::ProteusS(_)
            | Controller::Cubic
            | Controller::Newreno
            | Controller::Bbr
            | Controller::BbrS
            | Controller::NoqBbr3
            | Controller::PepkitCubic(_)
            | Controller::Copa(_)
            | Controller::Ledbat(_)
            | Controller::None
            | Controller::Constant(_) => return None,
        };
        Some((self.input()?, why))
    }

    /// Whether it reads `input` when given it (whether or not it needs it).
    pub fn reads(&self, input: Input) -> bool {
        self.input() == Some(input)
    }

    /// Builds it for one endpoint.
    pub fn build(&self, context: &ControllerContext) -> Built {
        use quic::congestion::{Bbr3Config, CubicConfig, NewRenoConfig};
        match self {
            Controller::Cubic => Built::plain(Arc::new(CubicConfig::default())),
            Controller::Newreno => Built::plain(Arc::new(NewRenoConfig::default())),
            Controller::Bbr => Built::plain(Arc::new(BbrFactory::new(false, context.seed))),
            Controller::BbrS => {
                let factory = Arc::new(BbrFactory::new(true, context.seed));
                Built {
                    factory: factory.clone(),
                    counters: Some(factory),
                    loss_detection: None,
                }
            }
            Controller::NoqBbr3 => {
                // Its probe timing draws from the trial's seed, not the OS.
                let seed = context.seed.derive("noq-bbr3");
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&seed.value().to_le_bytes());
                bytes[8..].copy_from_slice(&seed.derive("high").value().to_le_bytes());
                let mut config = Bbr3Config::default();
                config.probe_rng_seed(bytes);
                Built::plain(Arc::new(config))
            }
            Controller::PepkitCubic(settings) => Built::plain(Arc::new(crate::CubicConfig {
                paced: settings.paced,
                ..crate::CubicConfig::default()
            })),
            Controller::Pacubic(settings) => settings.build(context),
            Controller::Vivace => pcc::build(crate::PccConfig::vivace(), context),
            Controller::ProteusP(settings) => {
                pcc::build(pcc::proteus(Utility::Primary, settings), context)
            }
            Controller::ProteusS(settings) => {
                pcc::build(pcc::proteus(Utility::Scavenger, settings), context)
            }
            Controller::ProteusH(settings) => pcc::build(pcc::hybrid(settings), context),
            Controller::Copa(settings) => Built::plain(Arc::new(settings.clone())),
            Controller::Ledbat(settings) => Built::plain(Arc::new(settings.clone())),
            Controller::None => Built::plain(Arc::new(crate::Unlimited)),
            Controller::Tecc(settings) => settings.build(context),
            Controller::Constant(settings) => Built::plain(Arc::new(settings.controller())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_toml_like(pairs: &[(&str, &str)]) -> Result<Controller, String> {
        use serde::de::IntoDeserializer;
        use serde::de::value::{Error, MapDeserializer};
        let map = MapDeserializer::<_, Error>::new(
            pairs.iter().map(|(k, v)| (*k, v.into_deserializer())),
        );
        Controller::deserialize(map).map_err(|e| e.to_string())
    }

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known() {
        for name in [
            "cubic",
            "newreno",
            "bbr",
            "bbr-s",
            "noq-bbr3",
            "pepkit-cubic",
            "pacubic",
            "vivace",
            "proteus-p",
            "proteus-s",
            "proteus-h",
            "copa",
            "ledbat",
            "none",
            "tecc",
        ] {
            let controller = from_toml_like(&[("name", name)]).unwrap();
            assert_eq!(controller.name(), name);
        }
        let error = from_toml_like(&[("name", "cubix")]).unwrap_err();
        assert!(
            error.contains("cubix") && error.contains("pepkit-cubic"),
            "{error}"
        );
    }

    #[test]
    fn only_pacubic_needs_near_segment_signals() {
        assert_eq!(Controller::Cubic.requires(), None);
        let pacubic = from_toml_like(&[("name", "pacubic")]).unwrap();
        assert_eq!(pacubic.requires().unwrap().0, Input::NearSegment);
    }
}

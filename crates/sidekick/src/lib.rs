//! Sidekick (Yuan et al., NSDI 2024): an on-path proxy tells a data sender
//! which of its opaque packets it has seen, with power-sum quACKs, and the
//! sender recovers losses and adapts its congestion control from that.
//!
//! This crate holds the protocol (Robin, §4) as sans-IO engines:
//!
//! * [`wire`]: every message's byte layout, with parsers that return
//!   errors on bad input;
//! * [`proxy`]: the proxy engine, a netsim [`netsim::Middlebox`] that keeps a
//!   quACK per flow that asked for one and forwards base traffic untouched;
//! * [`sender`]: the data-sender engine that logs what the sender sends,
//!   decodes quACKs and says what to retransmit;
//! * [`host`]: the sender engine beside any sender's socket, as a netsim
//!   host;
//! * [`relay`]: the same engines with their roles turned around for a
//!   remote data sender: the proxy's node resends from the data
//!   receiver's quACKs.
//!
//! What the sender learns for its congestion controller it writes as
//! `cc`'s near-segment signals (`cc::signals`: the proxy received or lost
//! these packets, a near RTT sample, a proxy is active or none answered,
//! a reset), pushed to the [`cc::Signals`] queue the controller drains
//! ([`SidekickHost::with_signals`]). `cc` knows nothing of Sidekick; this
//! crate produces its signals.
//!
//! `docs/sidekick.md` describes the design and the choices the paper left
//! open.

mod flow_encoder;
pub mod host;
pub mod proxy;
pub mod relay;
pub mod sender;
pub mod wire;

pub use host::SidekickHost;
pub use proxy::{FlowSummary, ProxyConfig, ProxyStats, SidekickProxy};
pub use relay::{QuackingHost, Relay, RelayStats};
pub use sender::{SenderConfig, SenderStats, SidekickSender};
pub use wire::{Config, Control, Discovery, Interval, ParseError};

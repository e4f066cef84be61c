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
//!   decodes quACKs and says what to retransmit.
//!
//! `docs/sidekick.md` describes the design and the choices the paper left
//! open.

mod flow_encoder;
pub mod host;
pub mod proxy;
pub mod sender;
pub mod wire;

pub use host::{SidekickHost, Signals};
pub use proxy::{FlowSummary, ProxyConfig, ProxyStats, SidekickProxy};
pub use sender::{SenderConfig, SenderEvent, SenderStats, SidekickSender};
pub use wire::{Config, Control, Discovery, Interval, ParseError};

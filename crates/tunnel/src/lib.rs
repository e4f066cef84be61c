//! A MASQUE QUIC-in-QUIC tunnel (TECC, APNet 2023) with TECC's
//! collaborative feedback, as sans-IO engines.
//!
//! (The design notes are completed below as the crate grows.)
//!
//! # TECC's feedback and the controller
//!
//! The tunnel server's [`Sampler`] measures, once per cycle, the tunnel's
//! sending rate, its queue, its retransmission ratio and its minimum RTT
//! ([`Feedback`], on the wire in [`wire::feedback`]). It travels to the
//! tunnel client as TUNNEL_INFO and on to the application server as a
//! QUIC_INFO datagram of the end-to-end connection. There,
//! [`deliver_feedback`] turns each QUIC_INFO the endpoint receives into
//! `cc`'s [`cc::Signal::TunnelFeedback`], the signal the server's
//! controller (`cc::Tecc`) reads: the contract is `cc`'s (`cc::signals`),
//! and this crate produces it; `cc` parses no tunnel wire format.

mod carrier;
mod client;
mod client_host;
pub mod connect_udp;
mod feedback_signal;
mod forward;
mod h3;
mod limits;
mod mode;
mod sampler;
mod sender;
mod server;
mod server_box;
pub mod wire;
mod workers;

pub use carrier::outer_config;
pub use client::{ClientApp, ClientStats, TunnelState};
pub use client_host::{SetupTimes, TunnelClientConfig, TunnelClientHost};
pub use connect_udp::{AllowList, UriTemplate};
pub use feedback_signal::deliver_feedback;
pub use forward::{ClientForwarding, Route, ServerForwarding};
pub use h3::{H3Connection, RequestStream, StreamInput};
pub use limits::{ByteBudget, ConnectionSlots, PortBlocks, ServerLimits};
pub use mode::{Mode, RateSource, SamplerSettings, TunnelSettings};
pub use sampler::Sampler;
pub use sender::{DatagramSender, SenderStats};
pub use server::{ServerApp, ServerSample, ServerShared, ServerStats};
pub use server_box::{ServerHost, TunnelServer, TunnelServerConfig};
pub use wire::feedback::Feedback;
pub use workers::{IoStats, ServerWorkers, WorkerReport, WorkersConfig, available_cores};

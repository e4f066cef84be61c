//! A MASQUE QUIC-in-QUIC tunnel (TECC, APNet 2023) with TECC's
//! collaborative feedback, as sans-IO engines.
//!
//! (The design notes are completed below as the crate grows.)

mod carrier;
mod client;
mod client_host;
pub mod connect_udp;
mod forward;
mod h3;
mod mode;
mod sampler;
mod sender;
mod server;
mod server_box;
pub mod wire;

pub use carrier::outer_config;
pub use client::{ClientApp, ClientStats, TunnelState};
pub use client_host::{SetupTimes, TunnelClientConfig, TunnelClientHost};
pub use connect_udp::{AllowList, UriTemplate};
pub use forward::{ClientForwarding, Route, ServerForwarding};
pub use h3::{H3Connection, RequestStream, StreamInput};
pub use mode::{Mode, RateSource, SamplerSettings, TunnelSettings};
pub use sampler::Sampler;
pub use sender::{DatagramSender, SenderStats};
pub use server::{ServerApp, ServerSample, ServerShared, ServerStats};
pub use server_box::{ServerHost, TunnelServer, TunnelServerConfig};
pub use wire::feedback::Feedback;

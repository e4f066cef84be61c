//! QUIC endpoints for the pepkit simulator: a deterministic adapter around
//! the `noq-proto` state machine (the maintained fork of quinn-proto) with
//! real TLS 1.3 from rustls.
//!
//! # What this crate owns
//!
//! * **Endpoints as netsim hosts.** [`QuicClient`] and [`QuicServer`]
//!   implement [`netsim::Host`]: each owns one `noq_proto::Endpoint` and its
//!   connections and moves datagrams, timers and events between them in
//!   virtual time (`handle_datagram` / `handle_timeout` in, `poll_transmit`
//!   / `poll_timeout` out). The payloads are the real encrypted QUIC
//!   packets, so a netsim capture is a faithful capture of the wire.
//! * **The workload hook.** An [`App`] runs on one connection; the endpoint
//!   calls [`App::drive`] after every input and the application reads and
//!   writes streams through a [`Session`] (our own small facade, so
//!   workloads do not depend on the QUIC library). The server makes one
//!   application per accepted connection with an [`AppFactory`]. The
//!   **bulk** workload ([`BulkClient`], [`BulkServer`], [`BulkReport`]) moves
//!   N bytes up or down one stream and reports goodput and completion time.
//! * **Congestion controllers as factories.** Each endpoint builds its
//!   connections' controllers with the factory in [`QuicConfig::controller`]
//!   (default: noq-proto's CUBIC). Controllers are chosen *by name* one
//!   level up, in the `cc` crate's registry (`cc::Controller`), which every
//!   driver uses; crates with their own controllers implement
//!   [`congestion::ControllerFactory`]
//!   (re-exported here, with the per-packet hooks noq-proto adds:
//!   `on_packet_sent`, `on_packet_lost`, packet numbers on `on_ack`, a
//!   controller-set pacing rate and `on_spurious_congestion_event`).
//! * **Metrics from the endpoint's own API.** Per connection a
//!   [`ConnRecord`]: first packet sent, handshake completion, close, the
//!   connection's counters ([`ConnStats`]) and, when asked
//!   ([`QuicConfig::with_sampling`]), a time series of [`Sample`]s (cwnd,
//!   controller pacing rate, smoothed RTT, bytes in flight, lost packets,
//!   spurious losses) taken at the multiples of the interval (of virtual
//!   time, so the series of all connections line up) while it is open. Bytes in
//!   flight come from a transparent wrapper around the controller (the
//!   in-flight count noq-proto reports at each batch of ACKs, plus packets
//!   sent, minus packets lost since); nothing reads decrypted traffic.
//! * **qlog** (feature `qlog`): `QlogSet` collects each connection's
//!   qlog trace (JSON-SEQ) in memory, with times in milliseconds of virtual
//!   time since the start of the run.
//! * **Split-connection proxy.** [`SplitProxy`] is a netsim middlebox that
//!   transparently terminates the client's QUIC connection (it answers as the
//!   server's address) and relays its streams over its own connection to the
//!   server, each leg with its own controller: the "split CUBIC" reference
//!   of Sidekick appendix A, for QUIC.
//! * **Media workload.** [`MediaSender`] and [`MediaReceiver`] (Sidekick
//!   §5.1): 240 B every 20 ms over UDP, NACKs, a de-jitter buffer and the
//!   de-jitter delay of every packet; see the `media` module docs.
//! * **Pieces for engines that run QUIC themselves** (the tunnel):
//!   [`EmbeddedEndpoint`] is an endpoint to embed in a middlebox or a host
//!   wrapper, its applications reachable between inputs; a [`Session`]
//!   also offers unidirectional streams, stream priorities, QUIC DATAGRAM
//!   frames (RFC 9221), the controller's pacing rate, and, with
//!   [`QuicConfig::with_packet_log`], each packet sent, acknowledged and
//!   lost by number ([`PacketEvent`], from a transparent wrapper around
//!   the controller: noq-proto reports no per-datagram fate) together with
//!   a count of the datagrams sent, read after each packet. A
//!   [`DatagramChannel`] carries datagrams between an endpoint's
//!   connection and something beside it (TECC's end-to-end feedback);
//!   [`QuicConfig::with_alpn`] and [`QuicConfig::with_loss_detection`]
//!   set the TLS application protocol and the loss thresholds.
//! * **TLS key log.** [`KeyLog`] collects the SSLKEYLOGFILE lines of both
//!   endpoints in memory, so a netsim pcap can be decrypted later with
//!   `tshark -o tls.keylog_file:KEYS -r run.pcap`.
//!
//! # Determinism recipe
//!
//! The same scenario and seed give byte-identical datagrams. Every random
//! source derives from the scenario [`netsim::Seed`] and the endpoint's
//! address (label `quic/<addr>/…`):
//!
//! * noq-proto's endpoint RNG: `EndpointConfig::rng_seed`;
//! * a fixed stateless-reset HMAC key and a fixed token key (HKDF +
//!   AES-256-GCM, the construction noq-proto uses internally);
//! * connection IDs from a counter tagged per endpoint, and a fixed initial
//!   destination CID for the client;
//! * time: [`SimClock`] maps virtual [`netsim::Time`] onto the `Instant`s the
//!   state machine takes (`base + time`; the base is an opaque origin that
//!   only ever gets subtracted), and token timestamps use a virtual wall
//!   clock (2025-01-01 plus virtual time) as the server's `TimeSource`;
//! * rustls with the *ring* provider, its `secure_random` replaced by a
//!   seeded ChaCha8 stream and its key-exchange groups by one seeded X25519
//!   group (x25519-dalek; *ring*'s own X25519 draws from the OS). rustls
//!   holds both as `&'static`, so each endpoint leaks two small generators;
//! * an Ed25519 server certificate from a fixed test key ([`TestCertificate`],
//!   made with rcgen; Ed25519 signatures are deterministic), which the
//!   client pins byte for byte, so no certificate validity check reads a
//!   clock.
//!
//! The crypto is real TLS 1.3 (rustls picks TLS_AES_256_GCM_SHA384,
//! X25519 and Ed25519; Initial packets use AES-128-GCM as RFC 9001 says):
//! only the randomness is seeded. tshark 4.0 decrypts a capture with the
//! key log (checked by hand with the ignored test
//! `fingerprint::write_capture_for_tshark`).
//!
//! # What it does not do
//!
//! * **noq-proto's BBRv3 is deterministic only when seeded.** It times its
//!   bandwidth probes from a private PCG, seeded from the OS unless
//!   `Bbr3Config::probe_rng_seed` (a setter pepkit adds, PEPKIT.md item 11)
//!   sets it; the `noq-bbr3` controller seeds it from the trial's seed.
//! * One connection per client (but [`ConnectionArrivals`]); no 0-RTT, resumption, migration, multipath
//!   or ECN (netsim has no ECN field).
//! * No certificate authority: the client trusts exactly the test
//!   certificate. The keys are public test keys; this is a simulator.
//! * Workloads so far: bulk (over QUIC), media ([`MediaSender`] /
//!   [`MediaReceiver`], Sidekick §5.1, plain UDP with an AEAD-sealed
//!   sequence number), rtc ([`RtcSender`] / [`RtcReceiver`], PEMI §6.1.2:
//!   30 fps at 3000 kbit/s from the server, one stream per frame, frame
//!   delay and jitter in an [`RtcReport`]) and short flows
//!   ([`ShortFlowsClient`] / [`ShortFlowsServerFactory`], TECC §6:
//!   request/response exchanges, sequential or Poisson, one stream each,
//!   flow completion times in a [`ShortFlowsReport`]; or one connection
//!   per flow, [`ConnectionArrivals`]). Applications that
//!   keep time of their own ([`AppTimer`]) run inside the [`Timed`] host
//!   wrapper. Video ([`VideoClient`] / [`VideoServerFactory`], Proteus
//!   §6.3): DASH-like chunks with a BOLA-BASIC client and the Proteus-H
//!   threshold policy, the thresholds handed to a hook on the server.
//!
//! # Example
//!
//! ```
//! use netsim::*;
//! use quic::*;
//! use std::time::Duration;
//!
//! let (c, s) = ("10.0.0.1:5000".parse().unwrap(), "10.0.1.1:4433".parse().unwrap());
//! let newreno = std::sync::Arc::new(congestion::NewRenoConfig::default());
//! let config = QuicConfig::new(Seed::new(7)).with_controller(newreno);
//! let client = QuicClient::new(config.clone(), c, s, BulkClient::new(Direction::Download, 200_000));
//! let server = QuicServer::new(config, s, BulkServerFactory);
//! let link = LinkConfig::constant(Duration::from_millis(10), Rate::from_mbps(10));
//! let spec = ChainSpec::new(HostSpec::new("client", c.ip(), client), HostSpec::new("server", s.ip(), server))
//!     .hop(HopConfig::symmetric(link));
//! let mut sim = Simulator::new(Seed::new(7));
//! let chain = sim.add_chain(spec).unwrap();
//! sim.run_until(Time::from_secs(60));
//! let client = sim.host::<QuicClient<BulkClient>>(chain.sender).unwrap();
//! let server = sim.host::<QuicServer<BulkServerFactory>>(chain.receiver).unwrap();
//! let report = BulkReport::from_hosts(client, server).unwrap();
//! assert_eq!(report.bytes, 200_000);
//! assert!(report.goodput.bits_per_sec() > 1_000_000);
//! ```

mod ack_delay;
mod app;
mod arrivals;
mod bulk;
mod certificate;
mod channel;
mod cid;
mod client;
mod clock;
mod config;
mod controllers;
mod embedded;
mod endpoint;
mod entropy;
mod keylog;
mod keys;
mod media;
mod metrics;
mod probe;
#[cfg(feature = "qlog")]
mod qlog;
mod rtc;
mod server;
mod session;
mod setup;
mod short_flows;
mod split_proxy;
pub mod testing;
mod timed;
mod video;

pub use ack_delay::AckDelay;
pub use app::{App, AppFactory};
pub use arrivals::{Arrival, ConnectionArrivals};
pub use bulk::{Action, BulkClient, BulkReport, BulkServer, BulkServerFactory, Direction};
pub use certificate::{TEST_SERVER_NAME, TestCertificate};
pub use channel::DatagramChannel;
pub use cid::CidLog;
pub use client::QuicClient;
pub use clock::SimClock;
pub use config::{AckFrequency, LossDetection, QuicConfig};
pub use controllers::SharedFactory;
pub use embedded::EmbeddedEndpoint;
pub use endpoint::HandshakeLimits;
pub use keylog::KeyLog;
pub use media::{
    DelaySummary, MEDIA_DATA_LEN, MEDIA_ID_OFFSET, MEDIA_NACK_LEN, MediaConfig, MediaReceiver,
    MediaReceiverStats, MediaSender, MediaSenderStats, MediaTransmission, MediaWireError,
};
pub use metrics::{ConnRecord, ConnStats, DELIVERY_BIN, DeliveryLog, RttLog, Sample, nearest_rank};
pub use probe::PacketEvent;
#[cfg(feature = "qlog")]
pub use qlog::QlogSet;
pub use rtc::{FrameRecord, RtcConfig, RtcReceiver, RtcReport, RtcSender, RtcSenderFactory};
pub use server::QuicServer;
pub use session::{DatagramError, ReadStatus, Session, StreamError, StreamId};
pub use short_flows::{
    Arrivals, FlowRecord, ShortFlowsClient, ShortFlowsReport, ShortFlowsServer,
    ShortFlowsServerFactory,
};
pub use split_proxy::{DEFAULT_RELAY_BUFFER, SplitProxy, SplitStats};
pub use timed::{AppTimer, AppTimerHost, Timed};
pub use video::{
    ChunkRecord, ChunkVariability, Threshold, ThresholdHook, VideoClient, VideoConfig, VideoReport,
    VideoServer, VideoServerFactory,
};

/// The congestion-control interface of the QUIC state machine, for crates
/// that bring their own controllers, and noq-proto's own controllers'
/// factories (`CubicConfig`, `NewRenoConfig`, `Bbr3Config`).
pub mod congestion {
    pub use noq_proto::RttEstimator;
    pub use noq_proto::congestion::{
        Bbr3Config, Controller, ControllerFactory, ControllerMetrics, CubicConfig, NewRenoConfig,
    };
}

/// The ALPN protocol our endpoints negotiate.
pub(crate) const ALPN: &[u8] = b"pepkit";

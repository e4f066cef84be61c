//! Building the deterministic noq-proto configuration of one endpoint:
//! endpoint config, rustls provider, client and server crypto, and the
//! per-connection transport config.

use crate::certificate::{PinnedCertVerifier, TestCertificate};
use crate::cid::{CounterCidGenerator, initial_dcid_provider};
use crate::clock::{SimClock, VirtualWallClock};
use crate::config::QuicConfig;
use crate::controllers::SharedFactory;
use crate::entropy::{SeededRandom, SeededX25519};
use crate::keys::{TokenKey, reset_key};
use crate::probe::{InFlightGauge, ProbedFactory};
use noq_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use noq_proto::{ClientConfig, EndpointConfig, ServerConfig, TransportConfig, VarInt};
use rustls::crypto::CryptoProvider;
use std::sync::Arc;

/// Everything fixed about one endpoint, built once from its [`QuicConfig`].
pub(crate) struct EndpointSetup {
    /// The noq-proto endpoint configuration (seeded RNG, reset key, CIDs).
    pub(crate) endpoint: Arc<EndpointConfig>,
    /// The controller factory chosen by name.
    pub(crate) controller: SharedFactory,
    /// The rustls provider with seeded randomness and key exchange.
    provider: Arc<CryptoProvider>,
    /// The label this endpoint's random streams derive from.
    label: String,
    /// The endpoint's virtual wall clock (for tokens).
    pub(crate) wall: VirtualWallClock,
    /// The endpoint's map from virtual time to `Instant`s.
    pub(crate) clock: SimClock,
    /// A fixed UDP payload size without MTU discovery, if asked for.
    max_udp_payload: Option<u16>,
    /// What to ask of the peer's acknowledgements, if anything.
    ack_frequency: Option<crate::config::AckFrequency>,
    /// Flow-control credit for the peer, if not noq-proto's default.
    receive_window: Option<u32>,
    /// Unacknowledged bytes to allow in flight, if not noq-proto's default.
    send_window: Option<u64>,
    /// Keep the RTTs of packets acknowledged in this window.
    rtt_window: Option<(std::time::Instant, std::time::Instant)>,
    /// Where qlog traces go, if anywhere.
    #[cfg(feature = "qlog")]
    qlog: Option<crate::qlog::QlogSet>,
    /// The TLS application protocol.
    alpn: Vec<u8>,
    /// Loss-detection thresholds, if not noq-proto's.
    loss_detection: Option<crate::config::LossDetection>,
    /// The state machine's datagram send buffer, if not its default.
    datagram_send_buffer: Option<usize>,
    /// Whether each connection logs its packets.
    pub(crate) packet_log: bool,
    /// Whether each connection keeps its RTT samples' send times.
    rtt_times: bool,
    /// PING after this long idle.
    keep_alive: Option<std::time::Duration>,
    /// Whether to offer QUIC timestamps.
    timestamps: bool,
    /// Datagrams to and from something beside the endpoint.
    pub(crate) channel: Option<crate::channel::DatagramChannel>,
}

impl EndpointSetup {
    /// The setup of the endpoint called `label` (unique in the run, e.g.
    /// `quic/10.0.0.1:4433`).
    pub(crate) fn new(config: &QuicConfig, label: &str) -> EndpointSetup {
        let controller = config.controller.clone();
        let seed = config.seed;
        let mut endpoint = EndpointConfig::new(reset_key(seed, label));
        let mut rng_seed = [0u8; 32];
        rand_chacha::rand_core::RngCore::fill_bytes(
            &mut seed.rng(&format!("{label}/endpoint")),
            &mut rng_seed,
        );
        endpoint
            .rng_seed(Some(rng_seed))
            .cid_generator(CounterCidGenerator::factory(
                seed,
                label,
                config.cid_log.clone(),
                config.cid_first_byte,
            ));
        let mut provider = rustls::crypto::ring::default_provider();
        provider.secure_random = SeededRandom::leak(seed, &format!("{label}/tls-random"));
        provider.kx_groups = vec![SeededX25519::leak(seed, &format!("{label}/tls-kx"))];
        let clock = config.clock.unwrap_or_default();
        EndpointSetup {
            endpoint: Arc::new(endpoint),
            controller,
            provider: Arc::new(provider),
            label: label.to_string(),
            wall: VirtualWallClock::default(),
            clock,
            max_udp_payload: config.max_udp_payload,
            ack_frequency: config.ack_frequency,
            receive_window: config.receive_window,
            send_window: config.send_window,
            rtt_window: config
                .rtt_window
                .map(|(from, until)| (clock.instant(from), clock.instant(until))),
            #[cfg(feature = "qlog")]
            qlog: config.qlog.clone(),
            alpn: config.alpn.clone().unwrap_or_else(|| crate::ALPN.to_vec()),
            loss_detection: config.loss_detection,
            datagram_send_buffer: config.datagram_send_buffer,
            packet_log: config.packet_log,
            rtt_times: config.rtt_times,
            keep_alive: config.keep_alive,
            timestamps: config.timestamps,
            channel: config.datagram_channel.clone(),
        }
    }

    /// A fresh gauge for one connection (logging its packets if asked).
    pub(crate) fn gauge(&self) -> InFlightGauge {
        let gauge = if self.packet_log {
            InFlightGauge::logging()
        } else {
            InFlightGauge::default()
        };
        if self.rtt_times {
            gauge.rtt().keep_times();
        }
        gauge
    }

    /// A transport config for one connection, whose controller feeds `gauge`.
    fn transport(&self, gauge: &InFlightGauge) -> Arc<TransportConfig> {
        let mut transport = TransportConfig::default();
        transport
            .congestion_controller_factory(Arc::new(ProbedFactory::new(
                self.controller.clone(),
                gauge.clone(),
                self.rtt_window,
            )))
            .enable_segmentation_offload(false);
        if let Some(bytes) = self.max_udp_payload {
            transport
                .initial_mtu(bytes)
                .min_mtu(bytes)
                .mtu_discovery_config(None);
        }
        if let Some(bytes) = self.receive_window {
            transport
                .stream_receive_window(VarInt::from_u32(bytes))
                .receive_window(VarInt::from_u32(bytes));
        }
        if let Some(bytes) = self.send_window {
            transport.send_window(bytes);
        }
        if let Some(loss) = self.loss_detection {
            transport
                .packet_threshold(loss.packet_threshold)
                .time_threshold(loss.time_threshold);
        }
        if let Some(interval) = self.keep_alive {
            transport.keep_alive_interval(Some(interval));
        }
        if let Some(bytes) = self.datagram_send_buffer {
            transport.datagram_send_buffer_size(bytes);
        }
        if self.timestamps {
            transport.enable_timestamps(true);
        }
        if let Some(frequency) = self.ack_frequency {
            let mut ack = noq_proto::AckFrequencyConfig::default();
            ack.ack_eliciting_threshold(VarInt::from_u32(frequency.threshold))
                .max_ack_delay(frequency.max_delay);
            transport.ack_frequency_config(Some(ack));
        }
        #[cfg(feature = "qlog")]
        if let Some(set) = &self.qlog {
            transport.qlog_factory(Arc::new(crate::qlog::QlogFactory::new(
                set.clone(),
                self.clock,
            )));
        }
        Arc::new(transport)
    }

    /// The client configuration of one connection.
    pub(crate) fn client_config(&self, config: &QuicConfig, gauge: &InFlightGauge) -> ClientConfig {
        self.client_config_numbered(config, gauge, 0)
    }

    /// The client configuration of the endpoint's connection number `n`
    /// (from 0): its initial destination CID is the `n`-th of the
    /// endpoint's, so that connections of one endpoint do not share one.
    pub(crate) fn client_config_numbered(
        &self,
        config: &QuicConfig,
        gauge: &InFlightGauge,
        n: u64,
    ) -> ClientConfig {
        let cert = TestCertificate::new();
        let verifier = Arc::new(PinnedCertVerifier::new(
            cert.cert_der().clone(),
            self.provider.signature_verification_algorithms,
        ));
        let mut tls = rustls::ClientConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("the ring provider supports TLS 1.3")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        tls.alpn_protocols = vec![self.alpn.clone()];
        if let Some(keylog) = &config.keylog {
            tls.key_log = Arc::new(keylog.clone());
        }
        let crypto = QuicClientConfig::try_from(tls).expect("the ring provider has AES-128-GCM");
        let mut client = ClientConfig::new(Arc::new(crypto));
        client
            .transport_config(self.transport(gauge))
            .initial_dst_cid_provider(initial_dcid_provider(config.seed, &self.label, n));
        client
    }

    /// The server configuration of one connection.
    pub(crate) fn server_config(
        &self,
        config: &QuicConfig,
        gauge: &InFlightGauge,
    ) -> Arc<ServerConfig> {
        let cert = TestCertificate::new();
        let mut tls = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("the ring provider supports TLS 1.3")
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert_der().clone()], cert.key_der())
            .expect("the test certificate matches its key");
        tls.alpn_protocols = vec![self.alpn.clone()];
        tls.max_early_data_size = u32::MAX;
        if let Some(keylog) = &config.keylog {
            tls.key_log = Arc::new(keylog.clone());
        }
        let crypto = QuicServerConfig::try_from(tls).expect("the ring provider has AES-128-GCM");
        let mut server = ServerConfig::new(
            Arc::new(crypto),
            Arc::new(TokenKey::new(config.seed, &self.label)),
        );
        server
            .transport_config(self.transport(gauge))
            .time_source(Arc::new(self.wall.clone()));
        Arc::new(server)
    }
}

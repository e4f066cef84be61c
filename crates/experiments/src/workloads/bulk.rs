//! Bulk transfers: N bytes (or as many as a duration allows) on one QUIC
//! stream, up or down; goodput and completion time, and with a
//! measurement window the throughput and RTTs within it.

use super::{
    FlowOutcome, FlowSetup, FlowView, Hosts, PeerWork, Side, Traits, Transfer, WorkloadKind,
    downcast,
};
use crate::figure::Plot;
use crate::outcome::{
    TrialResult, add_error, add_phase_throughputs, add_rtts, add_sender, add_throughput,
};
use crate::units::{Bytes, Span};
use quic::{AckDelay, BulkClient, BulkReport, BulkServerFactory, QuicClient, QuicServer};
use serde::{Deserialize, Serialize};

/// `kind = "bulk"`: `direction` and `size` or `duration`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawBulk")]
pub struct Bulk {
    /// Upload or download.
    pub direction: BulkDirection,
    /// How much.
    #[serde(flatten)]
    pub amount: Amount,
}

/// How much a bulk transfer moves.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Amount {
    /// So many bytes (positive).
    Size(Bytes),
    /// As many as it can in this long from its start (positive).
    Duration(Span),
    /// As many as it can until this time of the trial.
    Until(Span),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBulk {
    direction: BulkDirection,
    #[serde(default)]
    size: Option<Bytes>,
    #[serde(default)]
    duration: Option<Span>,
    #[serde(default)]
    until: Option<Span>,
}

impl TryFrom<RawBulk> for Bulk {
    type Error = String;

    fn try_from(raw: RawBulk) -> Result<Bulk, String> {
        let amount = match (raw.size, raw.duration, raw.until) {
            (Some(size), None, None) => Amount::Size(size),
            (None, Some(duration), None) => Amount::Duration(duration),
            (None, None, Some(until)) => Amount::Until(until),
            _ => return Err("give one of `size`, `duration` or `until`".into()),
        };
        amount.check()?;
        Ok(Bulk {
            direction: raw.direction,
            amount,
        })
    }
}

impl Amount {
    /// Refuses an empty transfer.
    pub(crate) fn check(self) -> Result<(), String> {
        match self {
            Amount::Size(Bytes(0)) => Err("`size` must be positive".into()),
            Amount::Duration(Span(d)) | Amount::Until(Span(d)) if d.is_zero() => {
                Err("`duration` and `until` must be positive".into())
            }
            Amount::Size(_) | Amount::Duration(_) | Amount::Until(_) => Ok(()),
        }
    }
}

/// Which way a bulk transfer goes.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BulkDirection {
    /// Client to server.
    Upload,
    /// Server to client.
    Download,
}

impl BulkDirection {
    /// The side that sends the data.
    pub(crate) fn data_sender(self) -> Side {
        match self {
            BulkDirection::Upload => Side::Client,
            BulkDirection::Download => Side::Server,
        }
    }

    /// A client's and a server's things as (the data sender's, the
    /// receiver's).
    pub(crate) fn sender_first<T>(self, client: T, server: T) -> (T, T) {
        match self {
            BulkDirection::Upload => (client, server),
            BulkDirection::Download => (server, client),
        }
    }
}

/// The server of a bulk transfer, whether or not it holds back its ACKs.
type Server = QuicServer<BulkServerFactory>;

impl WorkloadKind for Bulk {
    fn traits(&self) -> Traits {
        Traits {
            data_sender: self.direction.data_sender(),
            quic: true,
            flows: true,
            server_opens_streams: false,
            kernel_tcp: true,
            server_ack_delay: self.direction == BulkDirection::Upload,
            transfer: Some(Transfer {
                direction: self.direction,
                amount: self.amount,
            }),
            servable: true,
            switchable: self.direction == BulkDirection::Upload,
        }
    }

    fn peer_work(&self) -> Result<PeerWork, (String, String)> {
        match self.amount {
            Amount::Size(size) => Ok(PeerWork::Bulk {
                direction: self.direction,
                size: size.0,
            }),
            Amount::Duration(_) | Amount::Until(_) => Err((
                "workload.size".into(),
                "independent stacks carry transfers of a set size, not of a duration".into(),
            )),
        }
    }

    fn endpoints(&self, setup: &FlowSetup) -> Hosts {
        let direction = match self.direction {
            BulkDirection::Upload => quic::Direction::Upload,
            BulkDirection::Download => quic::Direction::Download,
        };
        let mut app = match setup.amount.unwrap_or(self.amount) {
            Amount::Size(size) => BulkClient::new(direction, size.0),
            Amount::Duration(span) => {
                BulkClient::until(direction, netsim::Time::ZERO + setup.start + span.0)
            }
            Amount::Until(span) => BulkClient::until(direction, netsim::Time::ZERO + span.0),
        };
        if let Some(handle) = &setup.utility {
            for &(at, utility) in &setup.switch {
                let handle = handle.clone();
                app = app.at(at, Box::new(move || handle.set_utility(utility)));
            }
        }
        let client = QuicClient::new(setup.client_quic.clone(), setup.client, setup.server, app);
        // A server that holds back its ACKs holds back its flow-control
        // credit too, so it grants it all up front, as the Sidekick
        // clients did (1000 MiB), and only the ACKs are thinned.
        let server: Box<dyn netsim::Host> = match setup.server_min_ack_delay {
            Some(delay) => {
                let quic = setup.server_quic.clone().with_receive_window(1 << 30);
                let server = QuicServer::new(quic, setup.server, BulkServerFactory);
                Box::new(AckDelay::new(server, delay))
            }
            None => Box::new(QuicServer::new(
                setup.server_quic.clone(),
                setup.server,
                BulkServerFactory,
            )),
        };
        Hosts {
            client: Box::new(client),
            server,
        }
    }

    fn collect(&self, view: &FlowView<'_>, result: &mut TrialResult) -> FlowOutcome {
        let names = view.names;
        let Some(client) = downcast::<QuicClient<BulkClient>>(view.client, "client", result) else {
            return FlowOutcome::default();
        };
        let any: &dyn std::any::Any = view.server;
        let delayed = any.downcast_ref::<AckDelay<Server>>();
        // Datagrams the receiver's stack sent that its ACK delay dropped.
        let replaced = delayed.map_or(0, AckDelay::replaced);
        let server = match delayed {
            Some(delayed) => delayed.inner(),
            None => match downcast::<Server>(view.server, "server", result) {
                Some(server) => server,
                None => return FlowOutcome::default(),
            },
        };
        // The sender whose counters and series describe the transfer: for
        // a split upload, the proxy's server-facing leg, which sends over
        // the far hop (as Sidekick's Figure 9 plots split CUBIC).
        let (sender, receiver) = match self.direction {
            BulkDirection::Upload => (view.relayed.or(client.record()), server.records().next()),
            BulkDirection::Download => (server.records().next(), client.record()),
        };
        add_sender(result, names, sender);
        if let Some(window) = view.measure {
            add_rtts(result, names, sender);
            if let (Some(grouping), Some(sender)) = (view.rtt_intervals, sender) {
                let samples = sender.rtt.timed();
                crate::rtt_intervals::add(result, names, &samples, window, view.phases, grouping);
            }
            let (log, total) = match self.direction {
                BulkDirection::Upload => server
                    .apps()
                    .next()
                    .map(|app| (app.delivery(), app.received())),
                BulkDirection::Download => client.app().map(|app| (app.delivery(), app.received())),
            }
            .unzip();
            if let (Some(log), Some(total)) = (log, total) {
                add_throughput(result, names, log, total, window, view.time_limit);
                add_phase_throughputs(result, names, log, total, view.phases);
            }
        }
        if let Some(record) = receiver {
            result.set(
                names.metric("receiver_sent_packets"),
                record.stats.udp_tx_datagrams.saturating_sub(replaced) as f64,
            );
        }
        add_error(result, &names.who("client"), client.record());
        let report = BulkReport::from_hosts(client, server);
        // A flow that finished before the trial ended: its server went on
        // to see the client (or a split proxy) close with code 0, the
        // normal end, which is no error.
        let server_record = server.records().next().filter(|record| {
            let normal = record.error.as_ref().is_some_and(|error| {
                error.starts_with("closed by peer: ") && error.ends_with(" (code 0)")
            });
            !(normal && report.is_some())
        });
        add_error(result, &names.who("server"), server_record);
        let Some(report) = report else {
            // A transfer bounded by time is complete when the trial ran to
            // its end and its client met no error.
            let deadline = client.app().and_then(BulkClient::deadline);
            let ran = deadline.is_some_and(|at| result.end_s >= at.as_secs_f64());
            let clean = client.record().is_some_and(|r| r.error.is_none());
            return FlowOutcome {
                completed: ran && clean,
                goodput_mbps: None,
            };
        };
        let goodput = report.goodput.bits_per_sec() as f64 / 1e6;
        result.set(names.metric("goodput_mbps"), goodput);
        result.set(
            names.metric("completion_s"),
            report.completion.as_secs_f64(),
        );
        FlowOutcome {
            completed: true,
            goodput_mbps: Some(goodput),
        }
    }

    fn headline(&self) -> &'static [&'static str] {
        &["goodput_mbps", "completion_s"]
    }

    fn plots(&self) -> Vec<Plot> {
        vec![Plot::Bars {
            metric: "goodput_mbps".into(),
            title: None,
        }]
    }
}

/// A bulk transfer over Linux TCP (`transport = "tcp"`, real mode only):
/// the kernel's sockets instead of our hosts, each end's congestion
/// control set with `TCP_CONGESTION`.
#[derive(Clone, Debug, PartialEq)]
pub struct TcpTransfer {
    /// The client's address (its port is the kernel's choice).
    pub client: std::net::SocketAddr,
    /// The server's address.
    pub server: std::net::SocketAddr,
    /// Upload or download.
    pub direction: BulkDirection,
    /// How many bytes.
    pub size: u64,
    /// The client's congestion control, as Linux names it.
    pub client_controller: String,
    /// The server's.
    pub server_controller: String,
}

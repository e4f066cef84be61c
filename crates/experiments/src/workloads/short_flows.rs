//! Short flows (TECC §6): requests and responses of given sizes, each on a
//! fresh stream, sequential or at Poisson times; flow completion times.
//! With `connections = "each"`, every flow opens a connection of its own
//! (fresh slow start, as the Proteus paper's §3 short TCP flows), its
//! response size uniform between `response` and `response_max`.
//! With `measure`, the RTT percentiles of the server's first connection
//! over the window (`rtt_p50_ms`, `rtt_p95_ms`, `rtt_p99_ms`, `rtt_min_ms`;
//! with `connections = "each"`, the first flow's only).

use super::{FlowOutcome, FlowSetup, FlowView, Hosts, Side, Traits, WorkloadKind, cdf, downcast};
use crate::figure::Plot;
use crate::outcome::{TrialResult, add_distribution, add_error, add_rtts, add_sender};
use crate::units::{Bytes, Span};
use quic::{
    Arrival, ConnectionArrivals, QuicClient, QuicServer, ShortFlowsClient, ShortFlowsReport,
    ShortFlowsServerFactory, Timed,
};
use rand_chacha::rand_core::RngCore;
use serde::{Deserialize, Serialize};

/// `kind = "short_flows"`: how many, their sizes and when they start.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawShortFlows")]
pub struct ShortFlows {
    /// How many requests (at least 1).
    pub count: usize,
    /// Request size (default 100 B).
    pub request: Bytes,
    /// Response size (positive).
    pub response: Bytes,
    /// When requests start.
    pub arrivals: Arrivals,
    /// Whether every flow opens its own connection.
    pub connections: Connections,
    /// With a connection each, the largest response: sizes are uniform
    /// between `response` and this (default: all `response`).
    pub response_max: Option<Bytes>,
}

/// Which connections carry the flows.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Connections {
    /// One connection, a stream per flow.
    #[default]
    One,
    /// A connection per flow (Poisson arrivals only).
    Each,
}

/// When short flows start.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub enum Arrivals {
    /// Each request as soon as the previous response completed.
    Sequential,
    /// Requests at Poisson times with this mean gap.
    Poisson(Span),
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum ArrivalKind {
    #[default]
    Sequential,
    Poisson,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShortFlows {
    count: usize,
    #[serde(default = "hundred_bytes")]
    request: Bytes,
    response: Bytes,
    #[serde(default)]
    arrivals: ArrivalKind,
    #[serde(default)]
    mean_gap: Option<Span>,
    #[serde(default)]
    connections: Connections,
    #[serde(default)]
    response_max: Option<Bytes>,
}

fn hundred_bytes() -> Bytes {
    Bytes(100)
}

impl TryFrom<RawShortFlows> for ShortFlows {
    type Error = String;

    fn try_from(raw: RawShortFlows) -> Result<ShortFlows, String> {
        if raw.count == 0 {
            return Err("`count` must be at least 1".into());
        }
        if raw.response.0 == 0 {
            return Err("`response` must be positive".into());
        }
        let arrivals = match (raw.arrivals, raw.mean_gap) {
            (ArrivalKind::Poisson, Some(gap)) if !gap.0.is_zero() => Arrivals::Poisson(gap),
            (ArrivalKind::Poisson, _) => {
                return Err("`mean_gap`: Poisson arrivals need a positive mean gap".into());
            }
            (ArrivalKind::Sequential, Some(_)) => {
                return Err("`mean_gap` only applies with arrivals = \"poisson\"".into());
            }
            (ArrivalKind::Sequential, None) => Arrivals::Sequential,
        };
        if raw.connections == Connections::Each && arrivals == Arrivals::Sequential {
            return Err("`connections = \"each\"` needs arrivals = \"poisson\"".into());
        }
        match raw.response_max {
            Some(_) if raw.connections == Connections::One => {
                return Err("`response_max` needs `connections = \"each\"`".into());
            }
            Some(max) if max.0 < raw.response.0 => {
                return Err("`response_max` must be at least `response`".into());
            }
            _ => {}
        }
        Ok(ShortFlows {
            count: raw.count,
            request: raw.request,
            response: raw.response,
            arrivals,
            connections: raw.connections,
            response_max: raw.response_max,
        })
    }
}

impl ShortFlows {
    /// The flows of `connections = "each"`: Poisson arrivals (the same
    /// draw as one connection's) and sizes uniform in [response,
    /// response_max], from their own random stream.
    fn each(&self, gap: Span, setup: &FlowSetup) -> Vec<Arrival> {
        let quic::Arrivals::Poisson { offsets } =
            quic::Arrivals::poisson(self.count, gap.0, &mut setup.seed.rng("short-flows"))
        else {
            return Vec::new();
        };
        let (low, high) = (
            self.response.0,
            self.response_max.map_or(self.response.0, |max| max.0),
        );
        let mut sizes = setup.seed.rng("short-flows/sizes");
        offsets
            .into_iter()
            .map(|offset| Arrival {
                offset,
                response_bytes: low + sizes.next_u64() % (high - low + 1),
            })
            .collect()
    }

    fn collect_each(&self, view: &FlowView<'_>, result: &mut TrialResult) -> FlowOutcome {
        let names = view.names;
        let Some(client) = downcast::<ConnectionArrivals>(view.client, "client", result) else {
            return FlowOutcome::default();
        };
        if let Some(error) = client.first_error() {
            result
                .errors
                .push(format!("{}: {error}", names.who("client")));
        }
        let fcts: Vec<std::time::Duration> = client
            .completion_times()
            .into_iter()
            .map(|(_, fct)| fct)
            .collect();
        add_distribution(result, &names.metric("fct"), &fcts);
        if !fcts.is_empty() {
            let total: f64 = fcts.iter().map(|d| d.as_secs_f64()).sum();
            result.set(
                names.metric("fct_mean_ms"),
                total * 1000.0 / fcts.len() as f64,
            );
        }
        result.set(names.metric("flows_completed"), fcts.len() as f64);
        FlowOutcome {
            completed: fcts.len() == client.flows().len(),
            goodput_mbps: None,
        }
    }
}

impl WorkloadKind for ShortFlows {
    fn traits(&self) -> Traits {
        Traits {
            data_sender: Side::Server,
            quic: true,
            flows: true,
            server_opens_streams: false,
            kernel_tcp: false,
            server_ack_delay: false,
            transfer: None,
            servable: false,
            switchable: false,
        }
    }

    fn endpoints(&self, setup: &FlowSetup) -> Hosts {
        let (request, response) = (self.request.0, self.response.0);
        if let (Connections::Each, Arrivals::Poisson(gap)) = (self.connections, self.arrivals) {
            let client = ConnectionArrivals::new(
                setup.client_quic.clone(),
                setup.client,
                setup.server,
                request,
                self.each(gap, setup),
            );
            let server = QuicServer::new(
                setup.server_quic.clone(),
                setup.server,
                ShortFlowsServerFactory,
            );
            return Hosts {
                client: Box::new(client),
                server: Box::new(server),
            };
        }
        let app = match self.arrivals {
            Arrivals::Poisson(gap) => ShortFlowsClient::poisson(
                self.count,
                gap.0,
                &mut setup.seed.rng("short-flows"),
                request,
                response,
            ),
            Arrivals::Sequential => ShortFlowsClient::sequential(self.count, request, response),
        };
        let client = QuicClient::new(setup.client_quic.clone(), setup.client, setup.server, app);
        let server = QuicServer::new(
            setup.server_quic.clone(),
            setup.server,
            ShortFlowsServerFactory,
        );
        Hosts {
            client: Box::new(Timed::new(client)),
            server: Box::new(server),
        }
    }

    fn collect(&self, view: &FlowView<'_>, result: &mut TrialResult) -> FlowOutcome {
        let names = view.names;
        if self.connections == Connections::Each {
            return self.collect_each(view, result);
        }
        let Some(client) =
            downcast::<Timed<QuicClient<ShortFlowsClient>>>(view.client, "client", result)
        else {
            return FlowOutcome::default();
        };
        add_error(result, &names.who("client"), client.inner().record());
        let Some(report) = ShortFlowsReport::from_client(client.inner()) else {
            return FlowOutcome::default();
        };
        add_distribution(result, &names.metric("fct"), &report.fcts);
        if !report.fcts.is_empty() {
            let total: f64 = report.fcts.iter().map(|d| d.as_secs_f64()).sum();
            let mean_ms = total * 1000.0 / report.fcts.len() as f64;
            result.set(names.metric("fct_mean_ms"), mean_ms);
        }
        // The server sends the responses: its loss counters and sampled
        // series, and with a measurement window the RTTs of the packets it
        // saw acknowledged in it (TECC's Figure 2b, the end-to-end packet
        // delay from the server's view).
        if let Some(server) =
            downcast::<QuicServer<ShortFlowsServerFactory>>(view.server, "server", result)
        {
            let record = server.records().next();
            add_sender(result, names, record);
            if view.measure.is_some() {
                add_rtts(result, names, record);
            }
        }
        FlowOutcome {
            completed: report.flows.len() == self.count,
            goodput_mbps: None,
        }
    }

    fn headline(&self) -> &'static [&'static str] {
        &["fct_mean_ms", "fct_p50_ms", "fct_p99_ms"]
    }

    fn plots(&self) -> Vec<Plot> {
        vec![cdf("fct_ms")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ShortFlows, String> {
        toml::from_str::<ShortFlows>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_connection_per_flow_needs_poisson_arrivals_and_sizes_need_it() {
        let each = parse(
            "count = 3\nresponse = \"20kB\"\nresponse_max = \"100kB\"\n\
             arrivals = \"poisson\"\nmean_gap = \"100ms\"\nconnections = \"each\"",
        )
        .unwrap();
        assert_eq!(each.connections, Connections::Each);
        assert_eq!(each.response_max, Some(Bytes(100_000)));
        let sequential = parse("count = 3\nresponse = \"20kB\"\nconnections = \"each\"");
        assert!(sequential.unwrap_err().contains("poisson"));
        let one = parse("count = 3\nresponse = \"20kB\"\nresponse_max = \"30kB\"");
        assert!(one.unwrap_err().contains("response_max"));
        let inverted = parse(
            "count = 3\nresponse = \"20kB\"\nresponse_max = \"10kB\"\n\
             arrivals = \"poisson\"\nmean_gap = \"100ms\"\nconnections = \"each\"",
        );
        assert!(inverted.unwrap_err().contains("at least"));
    }
}

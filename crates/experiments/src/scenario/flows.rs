//! The competing flows of a dumbbell (`[[flows]]`): expanded, each
//! flow's fields read and checked against the rest of the scenario, and
//! the flow whose series a trial records (`sample_flow`).

use super::endpoint::{
    CLIENT_PORT, SERVER_PORT, ack_frequency, loss_detection, offset_addr, quic_controller,
};
use super::error::fail;
use super::raw::{RawEndpoint, RawFlow, RawScenario, Transport};
use super::{Flow, Traffic};
use crate::outcome::slug;
use crate::systems::{Problem, Topology};
use crate::workloads::{Amount, Side};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The most competing flows.
const MAX_FLOWS: usize = 200;

impl RawScenario {
    /// The index of the flow `sample_flow` names, among `traffic`'s.
    pub(super) fn sample_flow(&self, traffic: &Traffic) -> Result<usize, Problem> {
        let Some(name) = &self.sample_flow else {
            return Ok(0);
        };
        if self.sample_interval.is_none() {
            return fail("sample_flow", "needs `sample_interval`");
        }
        let flows = match traffic {
            Traffic::Hosts {
                topology: Topology::Dumbbell,
                flows,
            } => flows,
            _ => return fail("sample_flow", "names one of the [[flows]]; there are none"),
        };
        if let Some(index) = flows.iter().position(|f| f.name.as_ref() == Some(name)) {
            return Ok(index);
        }
        let names: Vec<String> = flows
            .iter()
            .filter_map(|flow| flow.name.as_ref().map(|n| format!("{n:?}")))
            .collect();
        fail(
            "sample_flow",
            format!(
                "no flow is called {name:?}; the flows: {} (where a variant replaces the \
                 flows, set `sample_flow` in that variant)",
                names.join(", ")
            ),
        )
    }

    /// `[[flows]]` on a dumbbell: each flow's own access hop (`path[0]`),
    /// then the shared bottleneck (`path[1]`).
    pub(super) fn dumbbell_flows(&self, middle_at: usize) -> Result<Vec<Flow>, Problem> {
        if self.path.len() != 2 {
            return fail(
                "path",
                "with [[flows]], the path is two hops: every flow's own access hop, then the \
                 shared bottleneck",
            );
        }
        if middle_at > 1 {
            return fail(
                "middle_after",
                "with [[flows]], `middle` runs on the left router (after path[0], the default) \
                 or on the right one (middle_after = path[1])",
            );
        }
        let expanded = self.expand_flows()?;
        let default_controller = quic_controller(&self.client, "client")?;
        let server_controller = quic_controller(&self.server, "server")?;
        let mut slugs: BTreeMap<String, usize> = BTreeMap::new();
        let mut flows = Vec::with_capacity(expanded.len());
        for (index, (raw_index, name, start)) in expanded.into_iter().enumerate() {
            let raw = &self.flows[raw_index];
            let field = |inner: &str| format!("flows[{raw_index}].{inner}");
            if let Some(other) = slugs.insert(slug(&name), raw_index) {
                return fail(
                    &field("name"),
                    format!(
                        "{name:?} gives the same metric names as a flow of flows[{other}] ({:?})",
                        self.flows[other].name
                    ),
                );
            }
            let controllers = (&default_controller, &server_controller);
            let mut flow = self.flow(index, raw_index, raw, controllers)?;
            flow.name = Some(name);
            flow.start = start;
            self.check_flow(raw_index, &flow)?;
            flows.push(flow);
        }
        if flows.iter().all(|flow| flow.alone) {
            return fail(
                "flows",
                "`alone` compares flows with and without the others: leave at least one flow \
                 without it",
            );
        }
        let clients: Vec<IpAddr> = flows.iter().map(|flow| flow.client.ip()).collect();
        if let Some((i, flow)) = flows
            .iter()
            .enumerate()
            .find(|(_, flow)| clients.contains(&flow.server.ip()))
        {
            return fail(
                "server.addr",
                format!(
                    "flow {i}'s server {} is also a client's address: flows use client.addr + i \
                     and server.addr + i",
                    flow.server.ip()
                ),
            );
        }
        Ok(flows)
    }

    /// The `[[flows]]` entries with their `count`s expanded: per flow, its
    /// entry's index, its name and its start.
    fn expand_flows(&self) -> Result<Vec<(usize, String, Duration)>, Problem> {
        let mut expanded = Vec::new();
        for (index, raw) in self.flows.iter().enumerate() {
            let field = |inner: &str| format!("flows[{index}].{inner}");
            if raw.name.chars().count() > 100 {
                return fail(&field("name"), "has more than 100 characters");
            }
            if slug(&raw.name).is_empty() {
                return fail(
                    &field("name"),
                    "needs letters or digits (it names the flow's metrics)",
                );
            }
            match raw.count {
                None if !raw.stagger.0.is_zero() => {
                    return fail(&field("stagger"), "staggers the flows of a `count`");
                }
                None => expanded.push((index, raw.name.clone(), raw.start.0)),
                Some(0) => return fail(&field("count"), "must be at least 1"),
                Some(count) => {
                    if count as usize > MAX_FLOWS {
                        return fail(&field("count"), format!("at most {MAX_FLOWS}"));
                    }
                    for i in 0..count {
                        let start = raw.start.0 + raw.stagger.0 * i;
                        expanded.push((index, format!("{} {}", raw.name, i + 1), start));
                    }
                }
            }
            if expanded.len() > MAX_FLOWS {
                return fail(
                    "flows",
                    format!("{} flows; at most {MAX_FLOWS}", expanded.len()),
                );
            }
        }
        Ok(expanded)
    }

    /// The checks of one flow against the rest of the scenario.
    fn check_flow(&self, raw_index: usize, flow: &Flow) -> Result<(), Problem> {
        let field = |inner: &str| format!("flows[{raw_index}].{inner}");
        let workload = flow.workload.as_ref().unwrap_or(&self.workload);
        let traits = workload.traits();
        if !traits.flows {
            return fail(
                &field("workload"),
                "competing flows run over QUIC, or are a `udp_probe`",
            );
        }
        if !traits.quic && self.flows[raw_index].controller.is_some() {
            return fail(
                &field("controller"),
                "the flow's workload sends without congestion control (it is not QUIC)",
            );
        }
        if flow.kernel_tcp.is_some() {
            // Linux TCP flows send from the client node to a sink on the
            // server node.
            if !(traits.kernel_tcp && traits.data_sender == Side::Client) {
                return fail(
                    &field("transport"),
                    "a Linux TCP flow is a bulk upload (the client sends)",
                );
            }
            if flow.served {
                return fail(
                    &field("middle"),
                    "a middle system serves our QUIC flows, not Linux TCP",
                );
            }
            if !flow.switch.is_empty() {
                return fail(
                    &field("switch"),
                    "switches a PCC controller of our QUIC hosts, not Linux TCP",
                );
            }
            if flow.access_delays != (None, None) {
                return fail(
                    &field("client_delay"),
                    "a Linux TCP flow runs in real mode, which shares one access hop among the \
                     flows",
                );
            }
            return Ok(());
        }
        if flow.amount.is_some() && traits.transfer.is_none() {
            return fail(&field("size"), "`size` and `duration` are a bulk flow's");
        }
        if flow.served {
            if !self.middle.system().serves() {
                return fail(
                    &field("middle"),
                    "the scenario's middle serves no flows (middle = \"sidekick\" or \"split\" \
                     do)",
                );
            }
            if !traits.servable {
                return fail(&field("middle"), "a middle system serves bulk transfers");
            }
        }
        let (mut client, server) = self.inputs(workload, flow.served);
        if !flow.switch.is_empty() {
            if !traits.switchable {
                return fail(&field("switch"), "switches the sender of a bulk upload");
            }
            if !flow.client_controller.reads(cc::Input::UtilityHandle) {
                return fail(
                    &field("switch"),
                    "switches the utility of a PCC controller (vivace, proteus-p/s/h)",
                );
            }
            client.push(cc::Input::UtilityHandle);
        }
        let both = (&client[..], &server[..]);
        self.check_requires(
            &flow.client_controller,
            &field("controller"),
            Side::Client,
            both,
        )
        .map_err(|(field, why)| {
            (
                field,
                format!("{why}; give the flow middle = true to have it served"),
            )
        })?;
        let server_field =
            if traits.data_sender == Side::Server && self.flows[raw_index].controller.is_some() {
                field("controller")
            } else {
                "server.controller".to_string()
            };
        self.check_requires(&flow.server_controller, &server_field, Side::Server, both)
    }

    /// Flow `index` of the expanded `[[flows]]`, from entry `raw_index`;
    /// `defaults` are the scenario's client and server controllers.
    fn flow(
        &self,
        index: usize,
        raw_index: usize,
        raw: &RawFlow,
        (default_controller, server_controller): (&cc::Controller, &cc::Controller),
    ) -> Result<Flow, Problem> {
        let field = |inner: &str| format!("flows[{raw_index}].{inner}");
        // A flow's `controller` is its data sender's (the server's when
        // its workload sends from the server: a download, a video), or
        // with `transport = "tcp"` the Linux congestion control of its
        // kernel sockets.
        let (controller, kernel_tcp) = match (raw.transport, raw.controller.clone()) {
            (Transport::Quic, None) => (None, None),
            (Transport::Quic, Some(value)) => {
                let parsed =
                    crate::shorthand::tagged(value).map_err(|error: toml::de::Error| {
                        (
                            field("controller"),
                            super::error::first_line(&error.to_string()).to_string(),
                        )
                    })?;
                (Some(parsed), None)
            }
            (Transport::Tcp, None) => (None, Some("cubic".to_string())),
            (Transport::Tcp, Some(toml::Value::String(name))) => (None, Some(name)),
            (Transport::Tcp, Some(_)) => {
                return fail(
                    &field("controller"),
                    "with transport = \"tcp\", a Linux congestion control's name such as \"cubic\" \
                     or \"bbr\"",
                );
            }
        };
        let workload = raw.workload.as_ref().unwrap_or(&self.workload);
        let (client_controller, server_controller) = match controller {
            Some(controller) if workload.traits().data_sender == Side::Server => {
                (default_controller.clone(), controller)
            }
            Some(controller) => (controller, server_controller.clone()),
            None => (default_controller.clone(), server_controller.clone()),
        };
        let at = |endpoint: &RawEndpoint, who: &str, port: u16| {
            offset_addr(endpoint.addr(), index as u128)
                .map(|ip| SocketAddr::new(ip, endpoint.port.unwrap_or(port)))
                .ok_or_else(|| {
                    (
                        format!("{who}.addr"),
                        format!(
                            "{} plus {index} (one address per flow) overflows",
                            endpoint.addr()
                        ),
                    )
                })
        };
        let amount = match (raw.size, raw.duration) {
            (None, None) => None,
            (Some(size), None) => Some(Amount::Size(size)),
            (None, Some(duration)) => Some(Amount::Duration(duration)),
            (Some(_), Some(_)) => {
                return fail(&field("size"), "give `size` or `duration`, not both");
            }
        };
        if let Some(amount) = amount {
            amount.check().map_err(|message| (field("size"), message))?;
        }
        let mut switch = Vec::with_capacity(raw.switch.len());
        for (i, change) in raw.switch.iter().enumerate() {
            if switch.last().is_some_and(|&(at, _)| change.at.0 <= at) {
                return fail(
                    &format!("flows[{raw_index}].switch[{i}].at"),
                    "switch times must increase",
                );
            }
            switch.push((change.at.0, change.to.utility()));
        }
        // The endpoints' loss detection is their QUIC's; Linux's for a
        // kernel TCP flow.
        let (client_loss_detection, server_loss_detection) = if kernel_tcp.is_some() {
            (None, None)
        } else {
            (
                loss_detection(&self.client, "client", &client_controller)?,
                loss_detection(&self.server, "server", &server_controller)?,
            )
        };
        Ok(Flow {
            name: Some(raw.name.clone()),
            client: at(&self.client, "client", CLIENT_PORT)?,
            server: at(&self.server, "server", SERVER_PORT)?,
            client_controller,
            server_controller,
            kernel_tcp,
            client_ack_frequency: ack_frequency(self.client.ack_frequency),
            server_ack_frequency: ack_frequency(self.server.ack_frequency),
            server_min_ack_delay: self.server.min_ack_delay.map(|span| span.0),
            client_loss_detection,
            server_loss_detection,
            start: raw.start.0,
            amount,
            served: raw.middle,
            alone: raw.alone,
            switch,
            workload: raw.workload.clone(),
            group: raw.count.map(|_| raw.name.clone()),
            access_delays: (
                raw.client_delay.map(|span| span.0),
                raw.server_delay.map(|span| span.0),
            ),
        })
    }
}

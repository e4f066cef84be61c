//! From the file as written ([`RawScenario`]) to a validated [`Scenario`]:
//! every check that spans fields, in one place, each naming the field.

use super::endpoint::{ack_frequency, endpoint_addr, loss_detection, offset_addr, quic_controller};
use super::raw::{RawEndpoint, RawFlow, RawScenario, Transport};
use super::{Flow, Hop, Scenario, Traffic};
use crate::figure::Plot;
use crate::outcome::{Phase, Window, slug};
use crate::peers::{PeerTransfer, Stack};
use crate::systems::{Facts, Problem, Topology};
use crate::workloads::Amount;
use crate::workloads::{Side, TcpTransfer, Traits, Workload};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

fn fail<T>(field: &str, message: impl Into<String>) -> Result<T, Problem> {
    Err((field.to_string(), message.into()))
}

/// The most hops a path may have: each of the nodes between hops
/// decrements the IP TTL, which starts at 64, and a datagram whose TTL runs
/// out is dropped (64 hops arrive with TTL 1; 65 would not arrive).
pub const MAX_HOPS: usize = netsim::DEFAULT_TTL as usize;

/// The most trials a variant may have: every trial's results are kept in
/// memory until the summary is written.
pub const MAX_TRIALS: u32 = 100_000;

/// The most competing flows.
const MAX_FLOWS: usize = 200;

/// The client's port unless given; the server's is [`SERVER_PORT`].
const CLIENT_PORT: u16 = 5000;
/// The server's port unless given.
const SERVER_PORT: u16 = 4433;

impl RawScenario {
    /// Validates the scenario.
    pub(crate) fn validate(self) -> Result<Scenario, Problem> {
        self.check_run()?;
        let path = self.path_hops()?;
        let middle_at = match &self.middle_after {
            None => 0,
            Some(after) => match self.path.iter().position(|name| name == after) {
                Some(index) if index + 1 < self.path.len() => index,
                // A dumbbell's right router is after its last hop.
                Some(index) if !self.flows.is_empty() => index,
                Some(_) => return fail("middle_after", "the last hop has no node after it"),
                None => return fail("middle_after", format!("no hop called \"{after}\"")),
            },
        };
        let traits = self.workload.traits();
        let kernel_tcp = self.transport == Transport::Tcp;
        self.middle.system().check(&Facts {
            workload: traits,
            hops: path.len(),
            kernel_tcp,
        })?;
        if self.client.min_ack_delay.is_some() {
            return fail(
                "client.min_ack_delay",
                "only the server (a bulk upload's receiver) can delay its ACKs",
            );
        }
        if self.server.min_ack_delay.is_some() && !traits.server_ack_delay {
            return fail(
                "server.min_ack_delay",
                "needs a bulk upload (the server must be the data receiver)",
            );
        }
        if self.client.addr == self.server.addr {
            return fail("server.addr", "must differ from client.addr");
        }
        let stacks = (
            self.client.stack.unwrap_or_default(),
            self.server.stack.unwrap_or_default(),
        );
        let traffic = match self.transport {
            Transport::Quic if stacks != (Stack::Noq, Stack::Noq) => {
                Traffic::Peers(self.peer_transfer(stacks)?)
            }
            Transport::Tcp if stacks != (Stack::Noq, Stack::Noq) => {
                return fail(
                    "client.stack",
                    "QUIC stacks carry QUIC, not transport = \"tcp\"",
                );
            }
            Transport::Tcp => Traffic::KernelTcp(self.tcp_transfer(traits)?),
            Transport::Quic if self.flows.is_empty() => Traffic::Hosts {
                topology: Topology::Chain,
                flows: vec![self.chain_flow(traits)?],
            },
            Transport::Quic => Traffic::Hosts {
                topology: Topology::Dumbbell,
                flows: self.dumbbell_flows(middle_at)?,
            },
        };
        let sample_flow = self.sample_flow(&traffic)?;
        let measure = self.measure()?;
        let phases = self.phases()?;
        let rtt_intervals = self.rtt_intervals()?;
        Ok(Scenario {
            measure,
            phases,
            rtt_intervals,
            transport_window: self.transport_window.map(|bytes| bytes.0),
            name: self.name,
            title: self.title,
            source: self.source,
            figure: self.figure,
            seed: self.seed,
            trials: self.trials,
            time_limit: self.time_limit.0,
            max_udp_payload: self.max_udp_payload,
            sample_interval: self.sample_interval.map(|span| span.0),
            sample_flow,
            path,
            middle: self.middle,
            middle_at,
            workload: self.workload,
            traffic,
            plots: self.plots,
        })
    }

    /// Names, trials, time limit, sampling, payload size and plots.
    fn check_run(&self) -> Result<(), Problem> {
        for (field, text, most) in [
            ("name", Some(&self.name), 100),
            ("title", Some(&self.title), 300),
            ("source", self.source.as_ref(), 300),
            ("figure", self.figure.as_ref(), 20),
        ] {
            if let Some(text) = text
                && text.chars().count() > most
            {
                return fail(
                    field,
                    format!("has {} characters; at most {most}", text.chars().count()),
                );
            }
        }
        if self.trials == 0 {
            return fail("trials", "must be at least 1");
        }
        if self.trials > MAX_TRIALS {
            return fail(
                "trials",
                format!(
                    "{} is more than {MAX_TRIALS} (every trial's results are kept in memory; \
                     split the run with --seed)",
                    self.trials
                ),
            );
        }
        if self
            .sample_interval
            .is_some_and(|span| span.0 < Duration::from_micros(100))
        {
            return fail("sample_interval", "must be at least 100us");
        }
        if let Some(index) = self
            .plots
            .iter()
            .position(|plot| matches!(plot, Plot::Series { .. }))
            && self.sample_interval.is_none()
        {
            return fail(
                &format!("plots[{index}]"),
                "a series plot needs `sample_interval`",
            );
        }
        if self.time_limit.0.is_zero() {
            return fail("time_limit", "must be positive");
        }
        if let Some(bytes) = self.max_udp_payload
            && !(1200..=65_527).contains(&bytes)
        {
            return fail(
                "max_udp_payload",
                format!("{bytes} is outside 1200..=65527 (QUIC's minimum and UDP's maximum)"),
            );
        }
        Ok(())
    }

    /// The index of the flow `sample_flow` names, among `traffic`'s.
    fn sample_flow(&self, traffic: &Traffic) -> Result<usize, Problem> {
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

    /// The measurement window: within the run.
    fn measure(&self) -> Result<Option<Window>, Problem> {
        let Some(raw) = &self.measure else {
            return Ok(None);
        };
        if raw.from.0 >= raw.until.0 {
            return fail("measure.until", "must be after `measure.from`");
        }
        if raw.until.0 > self.time_limit.0 {
            return fail("measure.until", "must be within `time_limit`");
        }
        if self.transport == Transport::Tcp {
            return fail("measure", "needs our hosts (transport = \"quic\")");
        }
        if let Some(bytes) = self.transport_window
            && !(65_536..=1 << 40).contains(&bytes.0)
        {
            return fail("transport_window", "must be from 64 KiB to 1 TB");
        }
        Ok(Some(Window {
            from: netsim::Time::ZERO + raw.from.0,
            until: netsim::Time::ZERO + raw.until.0,
        }))
    }

    /// `measure.rtt_intervals` (positive and shorter than the window) and
    /// `measure.rtt_resolution` (only with it, shorter than an interval).
    fn rtt_intervals(&self) -> Result<Option<crate::outcome::RttIntervals>, Problem> {
        let Some(raw) = &self.measure else {
            return Ok(None);
        };
        let Some(length) = raw.rtt_intervals else {
            if raw.rtt_resolution.is_some() {
                return fail("measure.rtt_resolution", "needs measure.rtt_intervals");
            }
            return Ok(None);
        };
        if length.0.is_zero() || length.0 >= raw.until.0.saturating_sub(raw.from.0) {
            return fail(
                "measure.rtt_intervals",
                "must be positive and shorter than the window",
            );
        }
        let resolution = raw
            .rtt_resolution
            .map_or(std::time::Duration::ZERO, |r| r.0);
        if resolution >= length.0 {
            return fail(
                "measure.rtt_resolution",
                "must be shorter than measure.rtt_intervals",
            );
        }
        Ok(Some(crate::outcome::RttIntervals {
            length: length.0,
            resolution,
        }))
    }

    /// The measurement window's named phases: each within the window, of
    /// positive length, under a distinct name that is its own slug (so
    /// that metric names carry it unchanged).
    fn phases(&self) -> Result<Vec<Phase>, Problem> {
        let Some(raw) = &self.measure else {
            return Ok(Vec::new());
        };
        let mut phases: Vec<Phase> = Vec::with_capacity(raw.phases.len());
        for (i, phase) in raw.phases.iter().enumerate() {
            let field = |name: &str| format!("measure.phases[{i}].{name}");
            if phase.name.is_empty() || slug(&phase.name) != phase.name {
                return fail(
                    &field("name"),
                    format!(
                        "{:?} must be lower-case letters, digits, '.' and single '-' \
                         (it becomes part of metric names)",
                        phase.name
                    ),
                );
            }
            if ["alone", "window"].contains(&phase.name.as_str()) {
                return fail(
                    &field("name"),
                    format!("{:?} is taken by the window's own metrics", phase.name),
                );
            }
            if phases.iter().any(|p| p.name == phase.name) {
                return fail(&field("name"), format!("{:?} is named twice", phase.name));
            }
            if phase.from.0 >= phase.until.0 {
                return fail(&field("until"), "must be after `from`");
            }
            if phase.from.0 < raw.from.0 || phase.until.0 > raw.until.0 {
                return fail(&field("from"), "the phase must lie within `measure`");
            }
            phases.push(Phase {
                name: phase.name.clone(),
                window: Window {
                    from: netsim::Time::ZERO + phase.from.0,
                    until: netsim::Time::ZERO + phase.until.0,
                },
            });
        }
        Ok(phases)
    }

    /// The hops of `path`, validated.
    fn path_hops(&self) -> Result<Vec<Hop>, Problem> {
        if self.path.is_empty() {
            return fail("path", "names at least one hop");
        }
        if self.path.len() > MAX_HOPS {
            return fail(
                "path",
                format!(
                    "{} hops; at most {MAX_HOPS} (each node between hops decrements the IP \
                     TTL, which starts at {}, and datagrams would not arrive)",
                    self.path.len(),
                    netsim::DEFAULT_TTL
                ),
            );
        }
        // The round-trip propagation delay, for buffers given in BDPs.
        let rtt = 2 * self
            .path
            .iter()
            .filter_map(|name| self.hops.get(name))
            .map(|hop| hop.delay.0)
            .sum::<Duration>();
        let mut validated: BTreeMap<&str, Hop> = BTreeMap::new();
        let mut path = Vec::with_capacity(self.path.len());
        for (index, name) in self.path.iter().enumerate() {
            let Some(raw) = self.hops.get(name) else {
                let known: Vec<&str> = self.hops.keys().map(String::as_str).collect();
                return fail(
                    &format!("path[{index}]"),
                    format!("no hop called \"{name}\"; the hops are {known:?}"),
                );
            };
            if !validated.contains_key(name.as_str()) {
                let hop = Hop::new(name, raw, rtt)
                    .map_err(|(field, message)| (format!("hops.{name}.{field}"), message))?;
                validated.insert(name, hop);
            }
            path.push(validated[name.as_str()].clone());
        }
        if let Some(name) = self.hops.keys().find(|name| !self.path.contains(name)) {
            return fail(&format!("hops.{name}"), "is not on the path");
        }
        Ok(path)
    }

    /// One flow between independent QUIC stacks.
    fn peer_transfer(&self, (client, server): (Stack, Stack)) -> Result<PeerTransfer, Problem> {
        if !self.flows.is_empty() {
            return fail("flows", "competing flows run our own endpoints only");
        }
        for (who, end) in [("client", &self.client), ("server", &self.server)] {
            if end.controller.is_some()
                || end.ack_frequency.is_some()
                || end.loss_detection.is_some()
            {
                return fail(
                    &format!("{who}.stack"),
                    "an independent stack runs with its own settings (its congestion control, \
                     its ACKs, its loss detection): no `controller`, `ack_frequency` or \
                     `loss_detection`",
                );
            }
        }
        PeerTransfer::new(
            (endpoint_addr(&self.client, CLIENT_PORT), client),
            (endpoint_addr(&self.server, SERVER_PORT), server),
            &self.workload,
        )
    }

    /// One Linux TCP bulk transfer.
    fn tcp_transfer(&self, traits: Traits) -> Result<TcpTransfer, Problem> {
        let Workload::Bulk(bulk) = &self.workload else {
            return fail("transport", "tcp carries the bulk workload only");
        };
        debug_assert!(traits.kernel_tcp);
        if !self.flows.is_empty() {
            return fail("flows", "competing flows are QUIC only");
        }
        for (who, end) in [("client", &self.client), ("server", &self.server)] {
            if end.loss_detection.is_some() {
                return fail(
                    &format!("{who}.loss_detection"),
                    "with transport = \"tcp\", Linux detects losses (RACK)",
                );
            }
        }
        let linux = |endpoint: &RawEndpoint, who: &str| match &endpoint.controller {
            None => Ok("cubic".to_string()),
            Some(toml::Value::String(name)) => Ok(name.clone()),
            Some(_) => fail(
                &format!("{who}.controller"),
                "with transport = \"tcp\", a Linux congestion control's name such as \"cubic\"",
            ),
        };
        let crate::workloads::Amount::Size(size) = bulk.amount else {
            return fail(
                "workload.duration",
                "with transport = \"tcp\", a bulk transfer has a `size`",
            );
        };
        Ok(TcpTransfer {
            client: endpoint_addr(&self.client, CLIENT_PORT),
            server: endpoint_addr(&self.server, SERVER_PORT),
            direction: bulk.direction,
            size: size.0,
            client_controller: linux(&self.client, "client")?,
            server_controller: linux(&self.server, "server")?,
        })
    }

    /// A chain's one flow.
    fn chain_flow(&self, traits: Traits) -> Result<Flow, Problem> {
        let client_controller = quic_controller(&self.client, "client")?;
        let server_controller = quic_controller(&self.server, "server")?;
        let served = self.middle.system().serves();
        if traits.quic {
            let inputs = self.inputs(&self.workload, served);
            self.check_requires(&client_controller, "client.controller", &inputs.0)?;
            self.check_requires(&server_controller, "server.controller", &inputs.1)?;
        }
        let client_loss_detection = loss_detection(&self.client, "client", &client_controller)?;
        let server_loss_detection = loss_detection(&self.server, "server", &server_controller)?;
        Ok(Flow {
            name: None,
            client: endpoint_addr(&self.client, CLIENT_PORT),
            server: endpoint_addr(&self.server, SERVER_PORT),
            client_controller,
            server_controller,
            client_ack_frequency: ack_frequency(self.client.ack_frequency),
            server_ack_frequency: ack_frequency(self.server.ack_frequency),
            server_min_ack_delay: self.server.min_ack_delay.map(|span| span.0),
            client_loss_detection,
            server_loss_detection,
            start: Duration::ZERO,
            amount: None,
            served,
            alone: false,
            switch: Vec::new(),
            workload: None,
            group: None,
            access_delays: (None, None),
            kernel_tcp: None,
        })
    }

    /// What the client's and the server's controllers are given: what the
    /// workload's application drives for its data sender, and what the
    /// middle system provides to the data senders of the flows it serves.
    fn inputs(&self, workload: &Workload, served: bool) -> (Vec<cc::Input>, Vec<cc::Input>) {
        let kind = workload.kind();
        let sender = kind.traits().data_sender;
        let mut client = Vec::new();
        let mut server = Vec::new();
        if let Some(input) = kind.provides() {
            match sender {
                Side::Client => client.push(input),
                Side::Server => server.push(input),
            }
        }
        if served && let Some(input) = self.middle.system().provides() {
            match sender {
                Side::Client => client.push(input),
                Side::Server => server.push(input),
            }
        }
        (client, server)
    }

    /// Refuses a controller that reads something its endpoint (`field`)
    /// will not have, given what is provided to it.
    fn check_requires(
        &self,
        controller: &cc::Controller,
        field: &str,
        provided: &[cc::Input],
    ) -> Result<(), Problem> {
        let Some((input, why)) = controller.requires() else {
            return Ok(());
        };
        if provided.contains(&input) {
            Ok(())
        } else {
            fail(field, why)
        }
    }

    /// `[[flows]]` on a dumbbell: each flow's own access hop (`path[0]`),
    /// then the shared bottleneck (`path[1]`).
    fn dumbbell_flows(&self, middle_at: usize) -> Result<Vec<Flow>, Problem> {
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
        let bulk_upload =
            matches!(workload, Workload::Bulk(_)) && traits.data_sender == Side::Client;
        if !traits.quic {
            return fail(&field("workload"), "competing flows run over QUIC");
        }
        if flow.kernel_tcp.is_some() {
            if !bulk_upload {
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
        if flow.amount.is_some() && !matches!(workload, Workload::Bulk(_)) {
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
            if !matches!(workload, Workload::Bulk(_)) {
                return fail(&field("middle"), "a middle system serves bulk transfers");
            }
        }
        let (mut client, server) = self.inputs(workload, flow.served);
        if !flow.switch.is_empty() {
            if !bulk_upload {
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
        self.check_requires(&flow.client_controller, &field("controller"), &client)
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
        self.check_requires(&flow.server_controller, &server_field, &server)
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
            offset_addr(endpoint.addr, index as u128)
                .map(|ip| SocketAddr::new(ip, endpoint.port.unwrap_or(port)))
                .ok_or_else(|| {
                    (
                        format!("{who}.addr"),
                        format!(
                            "{} plus {index} (one address per flow) overflows",
                            endpoint.addr
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

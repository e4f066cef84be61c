//! From the file as written ([`RawScenario`]) to a validated [`Scenario`]:
//! every check that spans fields, each naming the field (the competing
//! flows' in `flows.rs`).

use super::endpoint::{
    CLIENT_PORT, SERVER_PORT, ack_frequency, endpoint_addr, loss_detection, quic_controller,
};
use super::error::fail;
use super::raw::{RawEndpoint, RawScenario, Transport};
use super::{Flow, Hop, Scenario, Traffic};
use crate::figure::Plot;
use crate::outcome::{Phase, Window, slug};
use crate::peers::{PeerTransfer, Stack};
use crate::systems::{Facts, Problem, Topology};
use crate::workloads::{Side, TcpTransfer, Traits};
use std::collections::BTreeMap;
use std::time::Duration;

/// The most hops a path may have: each of the nodes between hops
/// decrements the IP TTL, which starts at 64, and a datagram whose TTL runs
/// out is dropped (64 hops arrive with TTL 1; 65 would not arrive).
pub const MAX_HOPS: usize = netsim::DEFAULT_TTL as usize;

/// The most trials a variant may have: every trial's results are kept in
/// memory until the summary is written.
pub const MAX_TRIALS: u32 = 100_000;

/// What keeps `name` from being the results directory's name
/// (`results/NAME`, a single directory inside `results/`), if anything:
/// it is not empty and not `.`, and has no `/`, `\\`, `..` or NUL, so
/// that nothing a run writes lands outside `results/`.
fn name_problem(name: &str) -> Option<String> {
    let allowed = "a scenario's name is its results directory, results/NAME: any text of up to \
                   100 characters (letters, digits, spaces, punctuation) without `/`, `\\`, \
                   `..` or NUL, not empty and not `.`";
    let why = if name.is_empty() {
        "is empty".to_string()
    } else if name == "." {
        "is `.`".to_string()
    } else if let Some(bad) = ["/", "\\", "..", "\0"]
        .iter()
        .find(|bad| name.contains(**bad))
    {
        format!("{name:?} contains {bad:?}")
    } else {
        return None;
    };
    Some(format!("{why}; {allowed}"))
}

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
        self.middle.system().check_settings()?;
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
        if self.client.addr() == self.server.addr() {
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
        if let Some(problem) = name_problem(&self.name) {
            return fail("name", problem);
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
        let (true, Some(transfer)) = (traits.kernel_tcp, traits.transfer) else {
            return fail("transport", "tcp carries the bulk workload only");
        };
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
        let crate::workloads::Amount::Size(size) = transfer.amount else {
            return fail(
                "workload.duration",
                "with transport = \"tcp\", a bulk transfer has a `size`",
            );
        };
        Ok(TcpTransfer {
            client: endpoint_addr(&self.client, CLIENT_PORT),
            server: endpoint_addr(&self.server, SERVER_PORT),
            direction: transfer.direction,
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
            let both = (&inputs.0[..], &inputs.1[..]);
            self.check_requires(&client_controller, "client.controller", Side::Client, both)?;
            self.check_requires(&server_controller, "server.controller", Side::Server, both)?;
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
}

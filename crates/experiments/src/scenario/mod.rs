//! The scenario file: what to run, which variants to compare, how many
//! trials, and the paper's numbers and claims to put beside ours.
//!
//! A scenario is a TOML document (see `docs/experiments.md` for the full
//! reference and `scenarios/` for examples). Every `[[variant]]` table is
//! merged key by key over the rest of the document, so a variant states
//! only what it changes (`hops.near.loss = 0.01`, `middle = "split"`).
//!
//! Reading a file has two steps. [`file`] parses the TOML into the serde
//! types of [`raw`], which mirror what is written (unknown or mistyped
//! fields are errors that name the field, the variant and what is
//! allowed). `validate` then turns each variant into a [`Scenario`]: typed
//! so that it cannot hold an invalid combination (a hop has a rate or a
//! trace; a RED queue has its bandwidth; a flow has its addresses; the
//! middle system and the workload carry their own validated settings),
//! after the checks that span fields. Nothing downstream re-checks.

mod check;
mod endpoint;
mod error;
mod file;
mod flows;
mod hop;
mod overrides;
mod raw;
mod sweep;
mod validate;

pub use check::{Check, Statistic};
pub use error::ScenarioError;
pub use file::{MAX_FILE_BYTES, Quick, ScenarioFile, Variant};
pub use hop::{Buffer, Capacity, Hop};
pub use overrides::{Override, Shadowed};
pub use raw::{
    AckFrequencySpec, DEFAULT_CLIENT, DEFAULT_SERVER, LossDirection, SwitchTo, Transport,
};
pub use sweep::SweepPoint;
pub use validate::{MAX_HOPS, MAX_TRIALS};

use crate::figure::Plot;
use crate::outcome::{Mode, Phase, Window};
use crate::systems::{Middle, Topology};
use crate::workloads::{Amount, TcpTransfer, Workload};
use std::net::SocketAddr;
use std::time::Duration;

/// A scenario with one variant applied, validated: everything a trial
/// needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Short name (used in file names).
    pub name: String,
    /// One line for humans.
    pub title: String,
    /// The paper, table or figure this reproduces.
    pub source: Option<String>,
    /// The paper's figure it reproduces (`"4a"`), by which `pepkit
    /// reproduce` orders its index.
    pub figure: Option<String>,
    /// The base seed; trial `i` of every variant uses the seed derived
    /// from it and `i`.
    pub seed: u64,
    /// Trials per variant (at least 1).
    pub trials: u32,
    /// A trial stops at this time even if unfinished.
    pub time_limit: Duration,
    /// Fix QUIC's UDP payload size (no path-MTU discovery).
    pub max_udp_payload: Option<u16>,
    /// Sample the data sender's connection at this interval.
    pub sample_interval: Option<Duration>,
    /// The index of the flow whose samples are recorded (`sample_flow`,
    /// by name; 0 unless it names another).
    pub sample_flow: usize,
    /// The hops from the client to the server.
    pub path: Vec<Hop>,
    /// What runs on the middle node `middle_at`.
    pub middle: Middle,
    /// The middle node that runs `middle`, counting middle nodes from the
    /// client side from 0 (the others are routers).
    pub middle_at: usize,
    /// The application traffic.
    pub workload: Workload,
    /// Who carries it.
    pub traffic: Traffic,
    /// Figures to draw (empty: the workload's usual ones).
    pub plots: Vec<Plot>,
    /// The window per-flow throughput and RTTs are measured over.
    pub measure: Option<Window>,
    /// Named parts of the window, each measured on its own as well.
    pub phases: Vec<Phase>,
    /// Each flow's RTT statistics over intervals of send time
    /// (`measure.rtt_intervals`, `measure.rtt_resolution`).
    pub rtt_intervals: Option<crate::outcome::RttIntervals>,
    /// QUIC's flow-control and send windows, bytes (`None`: sized from
    /// the path).
    pub transport_window: Option<u64>,
}

/// Who carries a scenario's traffic.
#[derive(Clone, Debug, PartialEq)]
pub enum Traffic {
    /// Our hosts (QUIC endpoints, the media workload): in the simulator
    /// and on testbeds.
    Hosts {
        /// A chain (one flow) or a dumbbell (`[[flows]]`).
        topology: Topology,
        /// The flows; a chain has one.
        flows: Vec<Flow>,
    },
    /// Linux TCP (`transport = "tcp"`): one bulk transfer, real mode only.
    KernelTcp(TcpTransfer),
    /// Independent QUIC stacks (`client.stack`, `server.stack`): one
    /// flow, real mode only.
    Peers(crate::peers::PeerTransfer),
}

/// One flow of our hosts: a client and a server and what they run.
#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    /// Its name (`[[flows]]`), or `None` for a chain's one flow.
    pub name: Option<String>,
    /// The client's address.
    pub client: SocketAddr,
    /// The server's address.
    pub server: SocketAddr,
    /// The client's controller.
    pub client_controller: cc::Controller,
    /// The server's controller.
    pub server_controller: cc::Controller,
    /// What the client asks of the server's acknowledgements.
    pub client_ack_frequency: Option<quic::AckFrequency>,
    /// What the server asks of the client's.
    pub server_ack_frequency: Option<quic::AckFrequency>,
    /// The server acknowledges at most once per this long.
    pub server_min_ack_delay: Option<Duration>,
    /// The client's loss thresholds, if not RFC 9002's.
    pub client_loss_detection: Option<quic::LossDetection>,
    /// The server's loss thresholds, if not RFC 9002's.
    pub server_loss_detection: Option<quic::LossDetection>,
    /// When the client starts.
    pub start: Duration,
    /// Its own amount (bulk), replacing the workload's.
    pub amount: Option<Amount>,
    /// Whether the middle system serves it.
    pub served: bool,
    /// Whether it is also run without the flows not so marked (its
    /// throughput and RTT relative to alone).
    pub alone: bool,
    /// Its data sender's changes of utility, at their times.
    pub switch: Vec<(Duration, cc::Utility)>,
    /// Its own workload, replacing the scenario's.
    pub workload: Option<Workload>,
    /// The `[[flows]]` entry it was expanded from by a `count`, if any.
    pub group: Option<String>,
    /// On a dumbbell: this flow's own one-way delays on its client and
    /// server access hops, if set.
    pub access_delays: (Option<Duration>, Option<Duration>),
    /// Linux TCP instead of our hosts (`transport = "tcp"` on a
    /// `[[flows]]` entry), with this congestion control: a bulk upload,
    /// real mode only.
    pub kernel_tcp: Option<String>,
}

impl Scenario {
    /// Why this scenario cannot run in `mode`, if it cannot.
    pub fn unsupported_in(&self, mode: Mode) -> Option<&'static str> {
        let system = self.middle.system().unsupported_in(mode);
        match (mode, &self.traffic) {
            (Mode::Simulator, Traffic::KernelTcp(_)) => {
                Some("TCP runs in real mode only (pepkit run --real)")
            }
            (Mode::Simulator, Traffic::Peers(_)) => {
                Some("independent QUIC stacks run in real mode only (pepkit run --real)")
            }
            (Mode::Simulator, Traffic::Hosts { flows, .. })
                if flows.iter().any(|flow| flow.kernel_tcp.is_some()) =>
            {
                Some(
                    "a [[flows]] entry with transport = \"tcp\" (Linux TCP) runs in real mode \
                     only (pepkit run --real)",
                )
            }
            (Mode::Simulator, Traffic::Hosts { .. }) => system,
            (Mode::Real, _) if system.is_some() => system,
            (
                Mode::Real,
                Traffic::Hosts {
                    topology: Topology::Dumbbell,
                    flows,
                },
            ) => real_flows(&self.middle, self.middle_at, flows),
            (Mode::Real, traffic) if !traffic.ipv4() => Some("real mode is IPv4 only"),
            (Mode::Real, _) => None,
        }
    }

    /// The per-trial seed: the same for trial `i` of every variant, so
    /// variants are compared on the same random draws where they coincide.
    pub fn trial_seed(&self, trial: u32) -> netsim::Seed {
        netsim::Seed::new(self.seed).derive(&format!("trial/{trial}"))
    }

    /// The bottleneck: a dumbbell's shared hop, or a chain's slowest hop
    /// of constant rate.
    pub fn bottleneck(&self) -> Option<&Hop> {
        match &self.traffic {
            Traffic::Hosts {
                topology: Topology::Dumbbell,
                ..
            } => self.path.get(1),
            _ => self
                .path
                .iter()
                .filter(|hop| hop.rate().is_some())
                .min_by_key(|hop| hop.rate().map(|rate| rate.bits_per_sec())),
        }
    }

    /// The workload `flow` runs.
    pub fn workload_of<'a>(&'a self, flow: &'a Flow) -> &'a Workload {
        flow.workload.as_ref().unwrap_or(&self.workload)
    }

    /// The flows of our hosts (none with Linux TCP).
    pub fn flows(&self) -> &[Flow] {
        match &self.traffic {
            Traffic::Hosts { flows, .. } => flows,
            Traffic::KernelTcp(_) | Traffic::Peers(_) => &[],
        }
    }

    /// The metrics a report leads with, in order.
    pub fn headline(&self) -> Vec<String> {
        match &self.traffic {
            Traffic::Hosts {
                topology: Topology::Dumbbell,
                flows,
            } if flows
                .iter()
                .all(|f| self.workload_of(f).traits().transfer.is_some()) =>
            {
                if self.measure.is_some() {
                    // Measured over a window: each flow's (or group's)
                    // throughput in it, the fairness and the utilisation.
                    let mut names = Vec::new();
                    for flow in flows {
                        let who = flow.group.as_deref().or(flow.name.as_deref()).unwrap_or("");
                        let name = format!("throughput_mbps_{}", crate::outcome::slug(who));
                        if !names.contains(&name) {
                            names.push(name);
                        }
                    }
                    names.extend(["jain_index_window".into(), "utilization".into()]);
                    return names;
                }
                // Competing transfers: the total, each flow's share, the
                // fairness.
                let mut names = vec!["goodput_mbps".to_string()];
                for name in flows.iter().filter_map(|flow| flow.name.as_deref()) {
                    names.push(format!("share_{}", crate::outcome::slug(name)));
                }
                names.push("jain_index".to_string());
                names
            }
            Traffic::Hosts {
                topology: Topology::Dumbbell,
                flows,
            } => {
                // Other competing flows: their workloads' metrics per flow,
                // or per group of flows.
                let mut names = Vec::new();
                for flow in flows {
                    let who = flow.group.as_deref().or(flow.name.as_deref()).unwrap_or("");
                    for metric in self.workload_of(flow).kind().headline() {
                        let name = format!("{metric}_{}", crate::outcome::slug(who));
                        if !names.contains(&name) {
                            names.push(name);
                        }
                    }
                }
                names
            }
            _ if self.measure.is_some() && self.workload.traits().transfer.is_some() => {
                vec!["throughput_mbps".into()]
            }
            _ => self
                .workload
                .kind()
                .headline()
                .iter()
                .map(|name| name.to_string())
                .collect(),
        }
    }

    /// The figures to draw: the scenario's, or its workload's usual ones.
    pub fn figures(&self) -> Vec<Plot> {
        if self.plots.is_empty() {
            self.workload.kind().plots()
        } else {
            self.plots.clone()
        }
    }
}

/// Why real mode cannot run these competing flows, if it cannot: it
/// runs them on the chain (every flow its own addresses on the client
/// and server nodes, one shared access hop), not on a dumbbell, so it
/// has no per-flow access hops and no right router, and it runs no
/// middle system beside them.
fn real_flows(middle: &Middle, middle_at: usize, flows: &[Flow]) -> Option<&'static str> {
    if !flows
        .iter()
        .all(|flow| flow.client.is_ipv4() && flow.server.is_ipv4())
    {
        return Some("real mode is IPv4 only");
    }
    if flows.iter().any(|flow| flow.access_delays != (None, None)) {
        return Some(
            "real mode shares one access hop among [[flows]]: a flow's own client_delay or \
             server_delay needs the simulator",
        );
    }
    if *middle != Middle::Router || middle_at != 0 {
        return Some(
            "real mode runs [[flows]] through routers only: no `middle` system, no \
             `middle_after`",
        );
    }
    None
}

impl Traffic {
    /// Whether every address is IPv4.
    fn ipv4(&self) -> bool {
        match self {
            Traffic::Hosts { flows, .. } => flows
                .iter()
                .all(|flow| flow.client.is_ipv4() && flow.server.is_ipv4()),
            Traffic::KernelTcp(tcp) => tcp.client.is_ipv4() && tcp.server.is_ipv4(),
            Traffic::Peers(peers) => peers.client.is_ipv4() && peers.server.is_ipv4(),
        }
    }
}

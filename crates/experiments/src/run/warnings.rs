//! What a reader should know before trusting a variant's numbers, from
//! any scenario: a loss its middle system cannot reach, and a middle
//! system that saw none of the traffic. Both read only what every system
//! declares (its placement, whether it serves flows, its counters), so no
//! system is named here.

use super::RunResults;
use crate::scenario::{LossDirection, ScenarioFile, Traffic};
use crate::systems::Topology;
use crate::workloads::Side;

/// Per variant whose middle system sits transparently in the path
/// ([`crate::systems::Middle::transparent_in_path`]) with a lossy hop
/// between the data sender and it: a warning naming the hop. Such a
/// system sees only what survived that hop, so it cannot repair those
/// losses.
pub fn upstream_loss(file: &ScenarioFile) -> Vec<String> {
    let mut warnings = Vec::new();
    for variant in &file.variants {
        let scenario = &variant.scenario;
        let chain = matches!(
            scenario.traffic,
            Traffic::Hosts {
                topology: Topology::Chain,
                ..
            }
        );
        if !chain || !scenario.middle.transparent_in_path() {
            continue;
        }
        let sender = scenario.workload.traits().data_sender;
        let (upstream, direction) = match sender {
            Side::Client => (0..scenario.middle_at + 1, LossDirection::Forward),
            Side::Server => (
                scenario.middle_at + 1..scenario.path.len(),
                LossDirection::Reverse,
            ),
        };
        for hop in &scenario.path[upstream] {
            let loses = mean_loss(&hop.loss) > 0.0
                && matches!(hop.loss_direction, LossDirection::Both)
                    | (hop.loss_direction == direction);
            if loses {
                warnings.push(format!(
                    "{}: hop {} loses data packets before they reach the middle system `{}` \
                     (in the path, it repairs only losses after itself); place it on the \
                     other side of that hop to let it help",
                    variant.name,
                    hop.name,
                    scenario.middle.kind()
                ));
            }
        }
    }
    warnings
}

/// Per variant whose trials recorded their middle engine's counters
/// ([`crate::TrialResult::middle`]) and every counter stayed zero in every
/// trial: a warning that the system saw none of the traffic.
pub fn unseen_traffic(results: &RunResults) -> Vec<String> {
    let mut warnings = Vec::new();
    for trials in &results.trials {
        let recorded: Vec<&serde_json::Value> = trials
            .iter()
            .map(|t| &t.middle)
            .filter(|m| !m.is_null())
            .collect();
        if recorded.is_empty() || recorded.iter().any(|m| counts_something(m)) {
            continue;
        }
        if let Some(trial) = trials.first() {
            warnings.push(format!(
                "{}: the middle system saw none of the traffic (every counter it reports \
                 stayed zero in every trial)",
                trial.variant
            ));
        }
    }
    warnings
}

/// Whether any number in `value` is not zero.
fn counts_something(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        serde_json::Value::Array(items) => items.iter().any(counts_something),
        serde_json::Value::Object(map) => map.values().any(counts_something),
        _ => false,
    }
}

/// The share of packets `model` loses in the long run.
pub(crate) fn mean_loss(model: &netsim::LossModel) -> f64 {
    match model {
        netsim::LossModel::None => 0.0,
        netsim::LossModel::Bernoulli(p) => p.as_f64(),
        netsim::LossModel::GilbertElliott(ge) => ge.mean_loss_rate(),
    }
}

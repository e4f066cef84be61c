//! From a [`Spec`] to the scenario files compare runs: one per table, a
//! variant per approach that applies, and a row saying why for each that
//! does not.

use super::approaches::{self, Approach, Group, Place};
use super::{Spec, path};
use crate::outcome::Mode;
use crate::scenario::{Scenario, ScenarioError, ScenarioFile};
use crate::trial::Prepared;
use crate::workloads::Side;

/// Both tables of a comparison, ready to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The path and workload in words, for titles.
    pub title: String,
    /// The approaches table, then the controllers table.
    pub parts: Vec<Part>,
    /// What the reader should know before trusting a row (a loss where a
    /// middle system cannot reach it).
    pub warnings: Vec<String>,
}

/// One table: its scenario file and a row per approach.
#[derive(Clone, Debug)]
pub struct Part {
    /// Which table.
    pub group: Group,
    /// The scenario of the approaches that run (`None`: none does).
    pub file: Option<ScenarioFile>,
    /// Every approach of the group, in table order.
    pub rows: Vec<Row>,
    /// The metrics the table shows, the first the one compared.
    pub headline: Vec<String>,
    /// Whether it runs on the path collapsed into one shared hop.
    pub one_hop: bool,
}

/// An approach and whether it runs.
#[derive(Clone, Debug)]
pub struct Row {
    /// The approach.
    pub approach: &'static Approach,
    /// Whether it runs, or why not.
    pub status: Status,
}

/// Whether an approach runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// It is a variant of the part's scenario.
    Runs,
    /// It does not apply to this path, workload or mode, in a few words.
    NotApplicable(String),
}

/// The time limit of a trial unless the path's file or `--set` gives one.
const TIME_LIMIT: &str = "300s";

impl Plan {
    /// Builds both tables for `mode`. An error is one of the path or the
    /// workload (the base scenario does not read), not of an approach.
    pub fn new(spec: &Spec, mode: Mode) -> Result<Plan, ScenarioError> {
        let mut base = spec.document.clone();
        if let Some(workload) = &spec.workload {
            base.insert("workload".into(), workload.clone().into());
        } else if !base.contains_key("workload") {
            let default = super::workload("bulk", "download", "5MB", None).map_err(other)?;
            base.insert("workload".into(), default.into());
        }
        base.entry("time_limit")
            .or_insert_with(|| TIME_LIMIT.into());
        base.insert("trials".into(), i64::from(spec.trials).into());
        let title = describe(&base);
        base.insert("title".into(), format!("pepkit compare: {title}").into());
        base.insert("name".into(), "compare".into());
        let checked = read(&base, &[], &spec.overrides, spec)?;
        let scenario = &checked.base;
        // A transfer of a set amount has a delay axis: its sender's RTTs.
        let bulk = scenario.workload.traits().transfer.is_some();
        // Every acknowledged packet's RTT, over the whole trial, for the
        // delay axis (a variant whose traffic has no such RTTs, Linux
        // TCP's, runs without).
        let measure = match bulk {
            false => None,
            true => {
                let limit = edited(&base, spec)?
                    .get("time_limit")
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or(TIME_LIMIT.into());
                let mut measure = toml::Table::new();
                measure.insert("from".into(), "0s".into());
                measure.insert("until".into(), limit.into());
                Some(toml::Value::Table(measure))
            }
        };
        let sender = scenario.workload.traits().data_sender;
        let names: Vec<String> = scenario.path.iter().map(|h| h.name.clone()).collect();
        if let Some(at) = &spec.at
            && !names.contains(at)
        {
            return Err(other(format!(
                "--at {at}: no hop called {at:?}; the hops are {names:?}"
            )));
        }
        let lossy = lossy_hop(scenario);
        let mut headline: Vec<String> = scenario
            .workload
            .kind()
            .headline()
            .iter()
            .map(|m| m.to_string())
            .collect();
        if bulk {
            headline.push("rtt_p95_ms".into());
        }
        let place =
            |approach: &Approach| node(approach.place, lossy, &names, sender, spec.at.as_deref());
        let mut parts = Vec::new();
        // The controllers run on the path as one shared hop (delays
        // summed, the narrowest rate, losses combined), where competing
        // flows can share it; `--set`s are applied before it is collapsed.
        let shared = match &spec.sweep {
            Some((field, _)) if field.starts_with("hops.") || field == "path" => {
                Err(format!("a sweep of `{field}` edits the hops themselves"))
            }
            _ => {
                let edited = edited(&base, spec)?;
                path::shared_hop(&edited).map(|overlay| {
                    let mut document = edited;
                    document.extend(overlay);
                    document
                })
            }
        };
        for group in [Group::Approaches, Group::Controllers] {
            let mut rows = Vec::new();
            let mut variants = Vec::new();
            let (mut document, sets) = match (group, &shared) {
                (Group::Controllers, Ok(collapsed)) => (collapsed.clone(), &[][..]),
                _ => (base.clone(), &spec.overrides[..]),
            };
            if group == Group::Controllers {
                document.insert("name".into(), "compare-controllers".into());
                let on = match shared {
                    Ok(_) => "the path as one hop",
                    Err(_) => "the path",
                };
                let title = format!("pepkit compare, controllers on {on}: {title}");
                document.insert("title".into(), title.into());
            }
            let shared_ok = shared.as_ref().map(|_| ()).map_err(Clone::clone);
            for approach in approaches::of(group) {
                let check = |table| applies(&document, table, sets, spec, mode);
                let status = variant(approach, &shared_ok, &place, sender, spec).and_then(
                    |(table, misplaced)| {
                        let checked = match &measure {
                            None => check(table),
                            Some(measure) => {
                                let mut measured = table.clone();
                                measured.insert("measure".into(), measure.clone());
                                check(measured).or_else(|_| check(table))
                            }
                        };
                        // What the system says of itself comes first.
                        match (checked, misplaced) {
                            (Ok(_), Some(why)) => Err(why),
                            (checked, _) => checked,
                        }
                    },
                );
                match status {
                    Ok(table) => {
                        variants.push(table);
                        rows.push(Row {
                            approach,
                            status: Status::Runs,
                        });
                    }
                    Err(why) => rows.push(Row {
                        approach,
                        status: Status::NotApplicable(why),
                    }),
                }
            }
            let file = match variants.is_empty() {
                true => None,
                false => Some(read(&document, &variants, sets, spec)?),
            };
            parts.push(Part {
                group,
                file,
                rows,
                headline: headline.clone(),
                one_hop: group == Group::Controllers && shared.is_ok(),
            });
        }
        let warnings = parts
            .iter()
            .filter_map(|part| part.file.as_ref())
            .flat_map(crate::run::upstream_loss)
            .collect();
        Ok(Plan {
            title,
            parts,
            warnings,
        })
    }
}

/// A message as a scenario error of the command line.
fn other(message: String) -> ScenarioError {
    ScenarioError::Field {
        path: "compare".into(),
        context: String::new(),
        field: "path".into(),
        message,
    }
}

/// The base document with the `--set` edits applied.
fn edited(base: &toml::Table, spec: &Spec) -> Result<toml::Table, ScenarioError> {
    let mut document = base.clone();
    for set in &spec.overrides {
        set.apply(&mut document)
            .map_err(|e| other(format!("--set {set} cannot be applied: {e}")))?;
    }
    Ok(document)
}

/// `document` with `variants`, read as a scenario file edited with `sets`.
fn read(
    document: &toml::Table,
    variants: &[toml::Table],
    sets: &[crate::scenario::Override],
    spec: &Spec,
) -> Result<ScenarioFile, ScenarioError> {
    let mut document = document.clone();
    if !variants.is_empty() {
        let tables = variants.iter().cloned().map(toml::Value::Table).collect();
        document.insert("variant".into(), toml::Value::Array(tables));
    }
    let text = toml::to_string(&document).map_err(|e| other(e.to_string()))?;
    ScenarioFile::parse_with(&text, spec.origin.clone(), sets)
}

/// `approach`'s `[[variant]]` table, or why it has none here; and, if
/// its system has no place on this path, why (the table then leaves it
/// where the scenario's default puts it, for its own checks).
fn variant(
    approach: &Approach,
    shared: &Result<(), String>,
    place: &dyn Fn(&Approach) -> Result<Option<String>, String>,
    sender: Side,
    spec: &Spec,
) -> Result<(toml::Table, Option<String>), String> {
    let written: toml::Table = toml::from_str(approach.toml).map_err(|e| e.to_string())?;
    let (data, other) = match sender {
        Side::Client => ("client", "server"),
        Side::Server => ("server", "client"),
    };
    let mut table = toml::Table::new();
    for (key, value) in written {
        let key = match key.as_str() {
            "sender" => data.to_string(),
            "receiver" => other.to_string(),
            _ => key,
        };
        match (table.get_mut(&key), value) {
            (Some(toml::Value::Table(into)), toml::Value::Table(from)) => into.extend(from),
            (_, value) => {
                table.insert(key, value);
            }
        }
    }
    table.insert("name".into(), approach.name.into());
    let misplaced = match place(approach) {
        Ok(Some(after)) => {
            table.insert("middle_after".into(), after.into());
            None
        }
        Ok(None) => None,
        Err(why) => Some(why),
    };
    if let (true, Err(why)) = (approach.shared_hop, shared) {
        return Err(format!("competing flows need the path as one hop; {why}"));
    }
    if let Some((field, values)) = &spec.sweep {
        let mut sweep = toml::Table::new();
        sweep.insert("field".into(), field.clone().into());
        sweep.insert("values".into(), toml::Value::Array(values.clone()));
        table.insert("sweep".into(), sweep.into());
    }
    Ok((table, misplaced))
}

/// `table` if the reader accepts its variant and every point of it can
/// run in `mode`; else why not, in a few words.
fn applies(
    document: &toml::Table,
    table: toml::Table,
    sets: &[crate::scenario::Override],
    spec: &Spec,
    mode: Mode,
) -> Result<toml::Table, String> {
    let file = read(document, std::slice::from_ref(&table), sets, spec).map_err(|e| reason(&e))?;
    for variant in &file.variants {
        if let Some(why) = variant.scenario.unsupported_in(mode) {
            return Err(few_words(why));
        }
        Prepared::new(&variant.scenario, &file.path, "", mode).map_err(|e| reason(&e))?;
    }
    Ok(table)
}

/// What a scenario error says, in a few words.
fn reason(error: &ScenarioError) -> String {
    match error {
        ScenarioError::Field { message, .. } => few_words(message),
        other => other.to_string(),
    }
}

/// The first clause of a message: up to its first `: ` or ` (`.
pub(crate) fn few_words(message: &str) -> String {
    let end = [": ", " ("]
        .iter()
        .filter_map(|cut| message.find(cut))
        .min()
        .unwrap_or(message.len());
    message[..end].trim().to_string()
}

/// The index of the path's lossy hop: the one that loses most (a bursty
/// hop counts by its mean), else the bottleneck, else the first.
fn lossy_hop(scenario: &Scenario) -> usize {
    let losses: Vec<f64> = scenario
        .path
        .iter()
        .map(|hop| crate::run::mean_loss(&hop.loss))
        .collect();
    let most = losses.iter().copied().fold(0.0, f64::max);
    if most > 0.0 {
        return losses.iter().position(|&l| l == most).unwrap_or(0);
    }
    let bottleneck = scenario.bottleneck().map(|hop| hop.name.clone());
    scenario
        .path
        .iter()
        .position(|hop| Some(&hop.name) == bottleneck.as_ref())
        .unwrap_or(0)
}

/// The hop after which an approach's system sits: `--at`'s, or the one
/// its [`Place`] asks for around hop `lossy`; `None` for no system.
fn node(
    place: Place,
    lossy: usize,
    names: &[String],
    sender: Side,
    at: Option<&str>,
) -> Result<Option<String>, String> {
    if place == Place::Nowhere {
        return Ok(None);
    }
    if let Some(at) = at {
        return Ok(Some(at.to_string()));
    }
    // The node on the lossy hop's client side is after hop `lossy - 1`;
    // on its server side, after hop `lossy` (the last hop has none).
    let client_side = lossy.checked_sub(1);
    let server_side = (lossy + 1 < names.len()).then_some(lossy);
    let (side, index) = match (place, sender) {
        (Place::BeforeLoss, Side::Server) => ("server", server_side),
        (Place::BeforeLoss, Side::Client) => ("client", client_side),
        (Place::ClientSideLoss, _) => ("server", server_side),
        (Place::NextToLoss, _) => ("either", server_side.or(client_side)),
        (Place::Nowhere, _) => return Ok(None),
    };
    match index {
        Some(index) => Ok(Some(names[index].clone())),
        None => Err(format!(
            "no node on the {side} side of the lossy hop {}; --at chooses one",
            names[lossy]
        )),
    }
}

/// The path and workload in a few words: `h1 20Mbit/s 40ms 2% loss → h2
/// 100Mbit/s 10ms; bulk download 5MB`.
fn describe(document: &toml::Table) -> String {
    let hops = document.get("hops").and_then(toml::Value::as_table);
    let path = document.get("path").and_then(toml::Value::as_array);
    let mut parts = Vec::new();
    for name in path.into_iter().flatten().filter_map(toml::Value::as_str) {
        let Some(hop) = hops
            .and_then(|h| h.get(name))
            .and_then(toml::Value::as_table)
        else {
            continue;
        };
        let mut words = vec![name.to_string()];
        for key in ["rate", "trace", "delay"] {
            if let Some(value) = hop.get(key).and_then(toml::Value::as_str) {
                words.push(value.to_string());
            }
        }
        if let Some(loss) = hop
            .get("loss")
            .and_then(|v| v.as_float())
            .filter(|l| *l > 0.0)
        {
            words.push(format!("{}% loss", loss * 100.0));
        }
        parts.push(words.join(" "));
    }
    let workload = document.get("workload").and_then(toml::Value::as_table);
    let what: Vec<String> = ["kind", "direction", "size", "duration"]
        .iter()
        .filter_map(|key| workload?.get(*key)?.as_str().map(String::from))
        .collect();
    format!("{}; {}", parts.join(" → "), what.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_follows_the_data_and_the_lossy_hop() {
        let names: Vec<String> = ["h1", "h2", "h3"].map(String::from).to_vec();
        let at = |place, lossy, sender| node(place, lossy, &names, sender, None);
        // Loss on h2: its client-side node is after h1, its server side after h2.
        assert_eq!(
            at(Place::BeforeLoss, 1, Side::Server),
            Ok(Some("h2".into()))
        );
        assert_eq!(
            at(Place::BeforeLoss, 1, Side::Client),
            Ok(Some("h1".into()))
        );
        assert_eq!(
            at(Place::ClientSideLoss, 1, Side::Client),
            Ok(Some("h2".into()))
        );
        assert_eq!(
            at(Place::ClientSideLoss, 1, Side::Server),
            Ok(Some("h2".into()))
        );
        assert_eq!(at(Place::Nowhere, 1, Side::Server), Ok(None));
        // The first hop has no node on its client side.
        assert!(
            at(Place::BeforeLoss, 0, Side::Client)
                .unwrap_err()
                .contains("--at")
        );
        assert_eq!(
            at(Place::NextToLoss, 2, Side::Client),
            Ok(Some("h2".into()))
        );
        let chosen = node(Place::BeforeLoss, 0, &names, Side::Client, Some("h3"));
        assert_eq!(chosen, Ok(Some("h3".into())));
    }

    #[test]
    fn reasons_are_a_few_words() {
        assert_eq!(
            few_words("the sidekick helps the client as a data sender: use it with media"),
            "the sidekick helps the client as a data sender"
        );
        assert_eq!(
            few_words("TCP runs in real mode only (pepkit run --real)"),
            "TCP runs in real mode only"
        );
    }
}

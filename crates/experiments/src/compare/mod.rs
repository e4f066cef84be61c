//! `pepkit compare`: every approach on one path and workload, in one
//! table.
//!
//! Compare builds on the scenario machinery rather than beside it: the
//! path and the workload become the base of an in-memory scenario file,
//! each approach of [`approaches::APPROACHES`] one `[[variant]]` of it, and
//! the file runs through the same run path as `pepkit run` (so trial files,
//! `summary.json`, CSVs and determinism are the same). Whether an approach
//! applies is what the scenario reader says of its variant (each system's
//! own checks, the controllers' requirements, the mode): a variant the
//! reader refuses becomes a row saying why, never an error of the run.

pub mod approaches;
pub mod path;
mod plan;
mod table;

pub use approaches::{APPROACHES, Approach, Group, Place};
pub use plan::{Part, Plan, Row, Status};
pub use table::{figure, sweep_figure, table};

use crate::scenario::Override;
use std::path::PathBuf;

/// What to compare: the path, the workload and how to run it.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The base scenario document: `path` and `hops` at least, perhaps a
    /// workload, endpoints, a seed (from [`path::from_hops`] or
    /// [`path::from_file`]).
    pub document: toml::Table,
    /// Where relative traces are resolved from (the scenario file, or
    /// `compare` in the working directory).
    pub origin: PathBuf,
    /// The workload's table (`None`: the document's, else a 5 MB bulk
    /// download).
    pub workload: Option<toml::Table>,
    /// Put every middle system on the node after this hop instead of
    /// next to the lossy hop.
    pub at: Option<String>,
    /// One line per approach over these values of a dotted field.
    pub sweep: Option<(String, Vec<toml::Value>)>,
    /// Trials per approach.
    pub trials: u32,
    /// `--set` edits, applied to the base document.
    pub overrides: Vec<Override>,
}

/// `--sweep FIELD=V1,V2,…`: the dotted field and its values, each a TOML
/// value or, where TOML reads none, a string (`10MB`).
pub fn parse_sweep(text: &str) -> Result<(String, Vec<toml::Value>), String> {
    let Some((field, values)) = text.split_once('=') else {
        return Err(format!("--sweep {text}: write FIELD=V1,V2,…"));
    };
    let values: Vec<toml::Value> = values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|value| {
            toml::from_str::<toml::Table>(&format!("v = {value}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(value.to_string()))
        })
        .collect();
    if field.trim().is_empty() || values.len() < 2 {
        return Err(format!(
            "--sweep {text}: give a field and at least two values"
        ));
    }
    Ok((field.trim().to_string(), values))
}

/// A workload's table for `kind` (`bulk`, `media`, `rtc`, `short_flows`,
/// `video`) with compare's defaults: a bulk transfer of `size` in
/// `direction`; 100 responses of 100 kB; 60 s of video at 1, 2.5 and
/// 5 Mbit/s; `duration` where the workload has one.
pub fn workload(
    kind: &str,
    direction: &str,
    size: &str,
    duration: Option<&str>,
) -> Result<toml::Table, String> {
    let mut table = toml::Table::new();
    let mut put = |key: &str, value: toml::Value| {
        table.insert(key.to_string(), value);
    };
    put("kind", kind.into());
    match kind {
        "bulk" => {
            put("direction", direction.into());
            match duration {
                Some(duration) => put("duration", duration.into()),
                None => put("size", size.into()),
            }
            return Ok(table);
        }
        "short_flows" => {
            put("count", 100.into());
            put("response", "100kB".into());
        }
        "video" => {
            let ladder = ["1Mbit/s", "2.5Mbit/s", "5Mbit/s"].map(toml::Value::from);
            put("bitrates", toml::Value::Array(ladder.to_vec()));
            put("duration", duration.unwrap_or("60s").into());
        }
        "media" | "rtc" => {}
        other => {
            return Err(format!(
                "unknown workload `{other}`; one of bulk, media, rtc, short_flows, video"
            ));
        }
    }
    if let (Some(duration), "media" | "rtc") = (duration, kind) {
        put("duration", duration.into());
    }
    Ok(table)
}

/// Runs `part`'s scenario through the run path of `pepkit run`, each
/// trial also recording what its middle engine counted (for
/// [`crate::run::unseen_traffic`]); the summary leads with the part's
/// metrics. `None` when no approach of the part applies.
pub fn run(
    part: &Part,
    options: &crate::RunOptions,
    progress: &mut crate::Progress,
) -> Result<Option<crate::RunResults>, crate::ScenarioError> {
    let Some(file) = &part.file else {
        return Ok(None);
    };
    let mut results = crate::run::run_recording(file, options, true, progress)?;
    results.summary.headline = part.headline.clone();
    Ok(Some(results))
}

//! Sweeps that outgrow one machine: `pepkit run FILE --shard K/N` runs
//! every N-th trial starting at the K-th (counting variants × trials in
//! the order a whole run takes them), and `pepkit merge DIRS… --out DIR`
//! puts the shards' trials back in order and writes what the whole run
//! would have written. Trials do not depend on where or with whom they
//! run, so the merged files are the unsharded run's, byte for byte.
//!
//! A shard's directory holds its trial files and [`MANIFEST`], which
//! names the scenario file, the options and the `--set` overrides, so that
//! the merge reads the file as the shards did and can check the shards
//! belong together and cover every trial exactly once.

use super::{Ready, RunOptions, RunResults, prepare, summarize};
use crate::outcome::{Mode, TrialResult, slug};
use crate::scenario::{Override, ScenarioError, ScenarioFile};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The name of a shard's manifest.
pub const MANIFEST: &str = "shard.json";

/// One shard: the `index`-th (from 1) of `count`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Shard {
    /// Which, from 1.
    pub index: u32,
    /// Of how many.
    pub count: u32,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let parse = |part: Option<&str>| part.and_then(|p| p.trim().parse::<u32>().ok());
        let mut parts = text.split('/');
        match (parse(parts.next()), parse(parts.next()), parts.next()) {
            (Some(index), Some(count), None) if (1..=count).contains(&index) => {
                Ok(Shard { index, count })
            }
            _ => Err(format!(
                "{text:?} is not a shard K/N with 1 ≤ K ≤ N (Slurm: \
                 --shard $((SLURM_ARRAY_TASK_ID + 1))/$SLURM_ARRAY_TASK_COUNT)"
            )),
        }
    }
}

/// What a shard's directory says about the run it is part of.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Manifest {
    /// Always `pepkit.shard/1`.
    pub schema: String,
    /// The scenario file, as given to `pepkit run`.
    pub scenario: PathBuf,
    /// The scenario's name.
    pub name: String,
    /// This shard.
    pub shard: Shard,
    /// `--seed`, if given.
    pub seed: Option<u64>,
    /// `--trials`, if given.
    pub trials: Option<u32>,
    /// `--only`, if given.
    pub only: Option<String>,
    /// The mode.
    pub mode: Mode,
    /// The `--set` overrides, as `PATH=VALUE` (absent when none): the
    /// merge reads the file with them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// `--pin-middle`, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub middle_cpu: Option<usize>,
}

impl Manifest {
    /// The manifest of a shard run with `options`.
    pub fn new(file: &ScenarioFile, options: &RunOptions, shard: Shard) -> Manifest {
        Manifest {
            schema: "pepkit.shard/1".into(),
            scenario: file.path.clone(),
            name: file.base.name.clone(),
            shard,
            seed: options.seed,
            trials: options.trials,
            only: options.only.clone(),
            mode: options.mode,
            overrides: file.overrides.iter().map(ToString::to_string).collect(),
            middle_cpu: options.middle_cpu,
        }
    }

    /// The `--set` overrides to read the scenario file with.
    pub fn overrides(&self) -> Result<Vec<Override>, String> {
        self.overrides
            .iter()
            .map(|text| text.parse().map_err(|e| format!("{MANIFEST}: --set {e}")))
            .collect()
    }

    /// The options the whole run has.
    pub fn options(&self) -> RunOptions {
        RunOptions {
            seed: self.seed,
            trials: self.trials,
            only: self.only.clone(),
            mode: self.mode,
            middle_cpu: self.middle_cpu,
            capture: None,
            ..RunOptions::default()
        }
    }

    /// Reads `dir`'s manifest.
    pub fn read(dir: &Path) -> Result<Manifest, String> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e} (is it a shard's directory?)", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Merges the shards in `dirs` (all of one run of `file` with `options`)
/// into the results of the whole run.
pub fn merge(
    file: &ScenarioFile,
    options: &RunOptions,
    dirs: &[PathBuf],
) -> Result<RunResults, String> {
    let mut seen = vec![false; 0];
    let mut count = None;
    for dir in dirs {
        let manifest = Manifest::read(dir)?;
        if manifest.options().seed != options.seed
            || manifest.trials != options.trials
            || manifest.only != options.only
            || manifest.mode != options.mode
            || manifest.middle_cpu != options.middle_cpu
        {
            return Err(format!(
                "{}: a shard of another run (its options differ)",
                dir.display()
            ));
        }
        let sets: Vec<String> = file.overrides.iter().map(ToString::to_string).collect();
        if manifest.overrides != sets {
            let list = |sets: &[String]| match sets {
                [] => "none".to_string(),
                sets => sets.join(", "),
            };
            return Err(format!(
                "{}: a shard of another run: its --set overrides are {}, the run's {}",
                dir.display(),
                list(&manifest.overrides),
                list(&sets)
            ));
        }
        let n = manifest.shard.count as usize;
        if *count.get_or_insert(n) != n {
            return Err(format!(
                "{}: a shard of {n}, the others of {}",
                dir.display(),
                count.unwrap_or(0)
            ));
        }
        seen.resize(n, false);
        let index = manifest.shard.index as usize - 1;
        if std::mem::replace(&mut seen[index], true) {
            return Err(format!("shard {}/{n} is given twice", index + 1));
        }
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        return Err(format!("shard {}/{} is missing", missing + 1, seen.len()));
    }
    let error = |e: ScenarioError| e.to_string();
    let (variants, skipped) = prepare(file, options).map_err(error)?;
    let trials = read_trials(&variants, dirs)?;
    let summary = summarize(file, options.mode, &variants, &trials);
    Ok(RunResults {
        summary,
        trials,
        skipped,
    })
}

/// Every trial of every variant, from whichever shard ran it.
fn read_trials(variants: &[Ready<'_>], dirs: &[PathBuf]) -> Result<Vec<Vec<TrialResult>>, String> {
    let mut all = Vec::with_capacity(variants.len());
    for (variant, prepared) in variants {
        let mut trials = Vec::new();
        for trial in 0..prepared.scenario().trials {
            let name = format!("trials/{}/{trial}.json", slug(&variant.name));
            let found: Vec<PathBuf> = dirs
                .iter()
                .map(|dir| dir.join(&name))
                .filter(|path| path.exists())
                .collect();
            let [path] = found.as_slice() else {
                return Err(format!(
                    "{name}: in {} shard directories, expected in one",
                    found.len()
                ));
            };
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let result: TrialResult =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            trials.push(result);
        }
        all.push(trials);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_as_k_of_n() {
        assert_eq!("2/5".parse::<Shard>(), Ok(Shard { index: 2, count: 5 }));
        for bad in ["0/5", "6/5", "2", "2/5/1", "a/b"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}

//! Sweeps that outgrow one machine: `pepkit run FILE --shard K/N` runs
//! every N-th trial starting at the K-th (counting variants × trials in
//! the order a whole run takes them), and `pepkit merge DIRS… --out DIR`
//! puts the shards' trials back in order and writes what the whole run
//! would have written. Trials do not depend on where or with whom they
//! run, so the merged files are the unsharded run's, byte for byte.
//!
//! K counts from 1. On a cluster `--shard auto` takes K and N from the
//! scheduler ([`ShardSpec::resolve`]): a Slurm job array's
//! `SLURM_ARRAY_TASK_ID` or a Kubernetes Indexed Job's
//! `JOB_COMPLETION_INDEX`, both counting from 0.
//!
//! A shard's directory holds its trial files and [`MANIFEST`], which
//! names the scenario file (its name and SHA-256), the options, the
//! `--set` overrides and pepkit's version, so that the merge reads the
//! file as the shards did and can check the shards belong together and
//! cover every trial exactly once.

use super::RunOptions;
use crate::outcome::Mode;
use crate::scenario::{Override, ScenarioFile};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The name of a shard's manifest.
pub const MANIFEST: &str = "shard.json";

/// The manifest's schema: shards of another schema do not merge.
pub(super) const SCHEMA: &str = "pepkit.shard/2";

/// pepkit's version, recorded in a shard's manifest.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

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
                "{text:?} is not a shard K/N with 1 ≤ K ≤ N (K counts from 1; on a \
                 Slurm job array or a Kubernetes Indexed Job use --shard auto)"
            )),
        }
    }
}

/// `--shard`: a shard given as `K/N`, or `auto` (`auto/N`) to take it
/// from the scheduler's environment when the run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardSpec {
    /// `K/N`, K from 1.
    Fixed(Shard),
    /// `auto` or `auto/N`: N is needed where the scheduler does not give
    /// the count (a Kubernetes Indexed Job: its `completions`).
    Auto(Option<u32>),
}

impl FromStr for ShardSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<ShardSpec, String> {
        match text.trim().strip_prefix("auto") {
            Some("") => Ok(ShardSpec::Auto(None)),
            Some(rest) => match rest.strip_prefix('/').map(|n| n.trim().parse::<u32>()) {
                Some(Ok(count)) if count > 0 => Ok(ShardSpec::Auto(Some(count))),
                _ => Err(format!(
                    "{text:?} is not auto or auto/N with N ≥ 1 (N: the job's completions)"
                )),
            },
            None => text.parse().map(ShardSpec::Fixed),
        }
    }
}

impl ShardSpec {
    /// The shard this task runs, reading the scheduler's variables with
    /// `env` (`std::env::var(..).ok()` in a run):
    ///
    /// - Slurm job array: `SLURM_ARRAY_TASK_ID`, counted from
    ///   `SLURM_ARRAY_TASK_MIN` (0 when absent), of
    ///   `SLURM_ARRAY_TASK_COUNT` (or `MAX − MIN + 1`) tasks. The array's
    ///   ids must be consecutive (`--array=0-15`, not `0-30:2` or `1,5`).
    /// - Kubernetes Indexed Job: `JOB_COMPLETION_INDEX` (from 0), of N
    ///   given as `auto/N` (the Job's `completions`; Kubernetes does not
    ///   put it in the environment) or in `PEPKIT_SHARDS`.
    ///
    /// Slurm's variables win where both are set. `auto/N` with Slurm checks
    /// that the array has N tasks.
    pub fn resolve(self, env: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
        let given = match self {
            ShardSpec::Fixed(shard) => return Ok(shard),
            ShardSpec::Auto(count) => count,
        };
        let number = |name: &str| -> Result<Option<u64>, String> {
            env(name)
                .map(|text| {
                    text.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("--shard auto: {name}={text:?} is not a number"))
                })
                .transpose()
        };
        let (index, count, source) = if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let span = number("SLURM_ARRAY_TASK_MAX")?.map(|max| max.saturating_sub(min) + 1);
            let count = match (number("SLURM_ARRAY_TASK_COUNT")?, span) {
                (Some(count), Some(span)) if count != span => {
                    return Err(format!(
                        "--shard auto: the Slurm array's {count} task ids are not consecutive \
                         (SLURM_ARRAY_TASK_MIN..MAX spans {span}): submit it as \
                         --array=0-{}",
                        count.saturating_sub(1)
                    ));
                }
                (Some(count), _) | (None, Some(count)) => Some(count),
                (None, None) => None,
            };
            if number("SLURM_ARRAY_TASK_STEP")?.is_some_and(|step| step != 1) {
                return Err("--shard auto: the Slurm array has a step (--array=A-B:S); \
                            submit it as --array=0-(N-1)"
                    .into());
            }
            let index = id.checked_sub(min).ok_or_else(|| {
                format!(
                    "--shard auto: SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"
                )
            })?;
            (index, count, "SLURM_ARRAY_TASK_ID")
        } else if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            (index, number("PEPKIT_SHARDS")?, "JOB_COMPLETION_INDEX")
        } else {
            return Err(
                "--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor \
                        JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set; outside \
                        them give --shard K/N (K from 1)"
                    .into(),
            );
        };
        let count = match (given, count) {
            (Some(given), Some(count)) if u64::from(given) != count => {
                return Err(format!(
                    "--shard auto/{given}: the scheduler runs {count} tasks ({source})"
                ));
            }
            (Some(given), _) => u64::from(given),
            (None, Some(count)) => count,
            (None, None) => {
                return Err(format!(
                    "--shard auto: {source} is set but not the number of tasks: give \
                     --shard auto/N (N: the Job's completions) or PEPKIT_SHARDS=N"
                ));
            }
        };
        let shard = u32::try_from(index + 1)
            .ok()
            .zip(u32::try_from(count).ok())
            .filter(|(index, count)| (1..=*count).contains(index))
            .ok_or_else(|| format!("--shard auto: {source} is task {index} (from 0) of {count}"))?;
        Ok(Shard {
            index: shard.0,
            count: shard.1,
        })
    }
}

/// What a shard's directory says about the run it is part of.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Manifest {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The scenario file, as given to `pepkit run`.
    pub scenario: PathBuf,
    /// The scenario's name.
    pub name: String,
    /// The SHA-256 of the scenario file's bytes, in hex.
    pub scenario_sha256: String,
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
    /// The version of pepkit that ran the shard.
    pub pepkit_version: String,
}

impl Manifest {
    /// The manifest of a shard run with `options` (reads the scenario
    /// file again to hash it).
    pub fn new(
        file: &ScenarioFile,
        options: &RunOptions,
        shard: Shard,
    ) -> std::io::Result<Manifest> {
        Ok(Manifest {
            schema: SCHEMA.into(),
            scenario: file.path.clone(),
            name: file.base.name.clone(),
            scenario_sha256: sha256_of(&file.path)?,
            shard,
            seed: options.seed,
            trials: options.trials,
            only: options.only.clone(),
            mode: options.mode,
            overrides: file.overrides.iter().map(ToString::to_string).collect(),
            middle_cpu: options.middle_cpu,
            pepkit_version: VERSION.into(),
        })
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

    /// Reads `dir`'s manifest (a regular file of at most
    /// [`MAX_FILE_BYTES`](super::MAX_FILE_BYTES), not a symbolic link).
    pub fn read(dir: &Path) -> Result<Manifest, String> {
        let bytes = super::merge::read_inside(dir, Path::new(MANIFEST)).map_err(|e| {
            let message = super::merge::describe(dir, Path::new(MANIFEST), &e);
            match e.kind() {
                std::io::ErrorKind::NotFound => {
                    format!("{message} (a shard's directory has one once its task finished)")
                }
                _ => message,
            }
        })?;
        let path = dir.join(MANIFEST);
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != SCHEMA {
            return Err(format!(
                "{}: schema {schema:?}, this pepkit merges {SCHEMA:?} (run the shards again \
                 with this pepkit)",
                path.display()
            ));
        }
        serde_json::from_value(value).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Where this manifest and `run`'s (the run being merged) differ,
    /// as `(what, this one's, the run's)`, in the order the fields are
    /// declared; the shard, and the file's path (the same file may sit
    /// elsewhere on another machine), are not compared.
    pub fn differences(&self, run: &Manifest) -> Vec<(&'static str, String, String)> {
        fn show<T: std::fmt::Debug>(value: &Option<T>) -> String {
            value
                .as_ref()
                .map_or_else(|| "not given".into(), |v| format!("{v:?}"))
        }
        let list = |sets: &[String]| match sets {
            [] => "none".to_string(),
            sets => sets.join(", "),
        };
        let fields = [
            (
                "scenario name",
                format!("{:?}", self.name),
                format!("{:?}", run.name),
            ),
            (
                "scenario file's SHA-256",
                self.scenario_sha256.clone(),
                run.scenario_sha256.clone(),
            ),
            ("--seed", show(&self.seed), show(&run.seed)),
            ("--trials", show(&self.trials), show(&run.trials)),
            ("--only", show(&self.only), show(&run.only)),
            (
                "mode",
                self.mode.describe().into(),
                run.mode.describe().into(),
            ),
            (
                "--set overrides",
                list(&self.overrides),
                list(&run.overrides),
            ),
            (
                "--pin-middle",
                show(&self.middle_cpu),
                show(&run.middle_cpu),
            ),
            (
                "pepkit version",
                self.pepkit_version.clone(),
                run.pepkit_version.clone(),
            ),
        ];
        fields.into_iter().filter(|(_, a, b)| a != b).collect()
    }
}

/// The SHA-256 of the file at `path`, in hex.
pub(crate) fn sha256_of(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    Ok(Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
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
        assert_eq!("auto".parse::<ShardSpec>(), Ok(ShardSpec::Auto(None)));
        assert_eq!("auto/4".parse::<ShardSpec>(), Ok(ShardSpec::Auto(Some(4))));
        for bad in ["auto/0", "auto/", "autox", "auto/a"] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad}");
        }
    }

    fn resolve(spec: &str, vars: &[(&str, &str)]) -> Result<Shard, String> {
        let spec: ShardSpec = spec.parse().unwrap();
        spec.resolve(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn auto_reads_the_schedulers_zero_based_index() {
        let shard = |index, count| Ok(Shard { index, count });
        let slurm = [
            ("SLURM_ARRAY_TASK_ID", "0"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ];
        assert_eq!(resolve("auto", &slurm), shard(1, 3));
        assert_eq!(resolve("auto/3", &slurm), shard(1, 3));
        assert!(
            resolve("auto/4", &slurm)
                .unwrap_err()
                .contains("runs 3 tasks")
        );
        let last = [
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ];
        assert_eq!(resolve("auto", &last), shard(3, 3));
        // MIN/MAX alone, and an array numbered from 1.
        let from_one = [
            ("SLURM_ARRAY_TASK_ID", "4"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_MAX", "4"),
        ];
        assert_eq!(resolve("auto", &from_one), shard(4, 4));
        let gaps = [
            ("SLURM_ARRAY_TASK_ID", "4"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_MAX", "8"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ];
        assert!(
            resolve("auto", &gaps)
                .unwrap_err()
                .contains("not consecutive")
        );
        let k8s = [("JOB_COMPLETION_INDEX", "3")];
        assert_eq!(resolve("auto/4", &k8s), shard(4, 4));
        assert!(
            resolve("auto/3", &k8s)
                .unwrap_err()
                .contains("task 3 (from 0) of 3")
        );
        assert!(resolve("auto", &k8s).unwrap_err().contains("auto/N"));
        let counted = [("JOB_COMPLETION_INDEX", "0"), ("PEPKIT_SHARDS", "2")];
        assert_eq!(resolve("auto", &counted), shard(1, 2));
        let error = resolve("auto", &[]).unwrap_err();
        assert!(error.contains("neither SLURM_ARRAY_TASK_ID"), "{error}");
        let bad = [("SLURM_ARRAY_TASK_ID", "x")];
        assert!(resolve("auto", &bad).unwrap_err().contains("not a number"));
        assert_eq!(resolve("2/5", &k8s), shard(2, 5));
    }
}

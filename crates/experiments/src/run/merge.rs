//! Writing a shard's files and merging shards.
//!
//! A shard writes each file to a temporary name in the same directory and
//! renames it into place, so a task killed mid-write leaves no half-written
//! JSON; its manifest is written last, so a shard without one did not
//! finish. A rerun of a task replaces that shard's files only: trial files
//! in its directory that the rerun did not write are removed.
//!
//! The merge trusts nothing in a shard's directory: every shard must be of
//! the same run as the scenario file and options being merged (their
//! [`Manifest`]s are compared field by field), and it reads only regular
//! files inside the directory, of at most [`MAX_FILE_BYTES`], without
//! following a symbolic link or opening a FIFO or a device.

use super::{Manifest, Ready, RunOptions, RunResults, Shard, prepare, summarize};
use crate::outcome::{TrialResult, slug};
use crate::scenario::ScenarioFile;
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Component, Path, PathBuf};

/// The largest file the merge reads from a shard (64 MiB; a trial file of
/// the simulated scenarios is under 1 MB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// How many missing trial files a merge error names before counting the rest.
const NAMED: usize = 8;

/// Writes a shard's trial files and its manifest under `dir` (the merge
/// writes the rest), and returns the paths written. Each file goes to a
/// temporary name and is renamed into place; the manifest goes last.
pub fn write_shard(
    dir: &Path,
    results: &RunResults,
    manifest: &Manifest,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    // Until this shard is complete, its directory is no shard.
    match std::fs::remove_file(dir.join(super::MANIFEST)) {
        Err(error) if error.kind() != ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    let mut written = Vec::new();
    for trial in results.trials.iter().flatten() {
        let path = dir.join(trial_path(&trial.variant, trial.trial));
        write_atomically(&path, &json(trial))?;
        written.push(path);
    }
    remove_stale_trials(dir, &written)?;
    let path = dir.join(super::MANIFEST);
    write_atomically(&path, &json(manifest))?;
    written.push(path);
    Ok(written)
}

/// A trial's file, relative to a shard's (or a run's) directory.
fn trial_path(variant: &str, trial: u32) -> PathBuf {
    PathBuf::from(format!("trials/{}/{trial}.json", slug(variant)))
}

fn json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("results serialise");
    bytes.push(b'\n');
    bytes
}

/// Writes `bytes` to `path` through a temporary file beside it.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// Removes the trial files (`trials/*/*.json`, and temporary files a
/// killed task left) under `dir` that are not in `kept`.
fn remove_stale_trials(dir: &Path, kept: &[PathBuf]) -> std::io::Result<()> {
    let trials = dir.join("trials");
    let Ok(variants) = std::fs::read_dir(&trials) else {
        return Ok(());
    };
    for variant in variants {
        let variant = variant?;
        if !variant.file_type()?.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(variant.path())? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = name.ends_with(".json") || name.ends_with(".tmp");
            if ours && entry.file_type()?.is_file() && !kept.contains(&path) {
                std::fs::remove_file(&path)?;
            }
        }
    }
    Ok(())
}

/// Reads `relative` (plain names only) inside `dir`: every directory on
/// the way must be a directory and the file a regular file, none of them a
/// symbolic link, the file at most [`MAX_FILE_BYTES`]. It is opened
/// without following links and without blocking, and checked again once
/// open. A missing file is an error of kind [`ErrorKind::NotFound`].
pub(crate) fn read_inside(dir: &Path, relative: &Path) -> std::io::Result<Vec<u8>> {
    let refuse = |what: String| {
        std::io::Error::other(format!(
            "{what}: merge reads only regular files inside a shard's directory"
        ))
    };
    let mut path = dir.to_path_buf();
    let parts: Vec<_> = relative.components().collect();
    for (at, part) in parts.iter().enumerate() {
        let Component::Normal(name) = part else {
            return Err(refuse(format!(
                "{} is not a plain name",
                relative.display()
            )));
        };
        path.push(name);
        let kind = std::fs::symlink_metadata(&path)?.file_type();
        let last = at + 1 == parts.len();
        if kind.is_symlink() {
            return Err(refuse(format!("{} is a symbolic link", path.display())));
        }
        if !last && !kind.is_dir() {
            return Err(refuse(format!("{} is not a directory", path.display())));
        }
        if last && !kind.is_file() {
            return Err(refuse(format!("{} is not a regular file", path.display())));
        }
    }
    let too_big = |size: u64| {
        refuse(format!(
            "{} is {size} bytes, over the cap of {MAX_FILE_BYTES}",
            path.display()
        ))
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(refuse(format!("{} is not a regular file", path.display())));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(too_big(metadata.len()));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// A [`read_inside`] error as a message naming the file once.
pub(crate) fn describe(dir: &Path, relative: &Path, error: &std::io::Error) -> String {
    match error.kind() {
        // A refusal names the file itself.
        ErrorKind::Other => error.to_string(),
        _ => format!("{}: {error}", dir.join(relative).display()),
    }
}

/// Merges the shards in `dirs` (all of one run of `file` with `options`)
/// into the results of the whole run. Refuses, naming the difference, a
/// shard of another run; names the shards and trial files missing.
pub fn merge(
    file: &ScenarioFile,
    options: &RunOptions,
    dirs: &[PathBuf],
) -> Result<RunResults, String> {
    let run = Manifest::new(file, options, Shard { index: 1, count: 1 })
        .map_err(|e| format!("{}: {e}", file.path.display()))?;
    let mut shards: Vec<Option<&Path>> = Vec::new();
    let mut count = None;
    for dir in dirs {
        let manifest = Manifest::read(dir)?;
        let differences = manifest.differences(&run);
        if !differences.is_empty() {
            let list: Vec<String> = differences
                .iter()
                .map(|(what, theirs, ours)| {
                    let verb = if what.ends_with('s') { "are" } else { "is" };
                    format!("its {what} {verb} {theirs}, the run's {ours}")
                })
                .collect();
            return Err(format!(
                "{}: a shard of another run: {}",
                dir.display(),
                list.join("; ")
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
        shards.resize(n, None);
        let index = manifest.shard.index as usize - 1;
        if let Some(other) = shards[index].replace(dir) {
            return Err(format!(
                "shard {}/{n} is given twice ({} and {})",
                index + 1,
                other.display(),
                dir.display()
            ));
        }
    }
    let missing: Vec<String> = (shards.iter().enumerate())
        .filter(|(_, dir)| dir.is_none())
        .map(|(index, _)| format!("{}/{}", index + 1, shards.len()))
        .collect();
    match missing.as_slice() {
        [] => {}
        [one] => return Err(format!("shard {one} is missing (its task did not finish?)")),
        many => {
            return Err(format!(
                "shards {} are missing (their tasks did not finish?)",
                many.join(", ")
            ));
        }
    }
    let shards: Vec<&Path> = shards.into_iter().flatten().collect();
    let (variants, skipped) = prepare(file, options).map_err(|e| e.to_string())?;
    let trials = read_trials(&variants, &shards)?;
    let summary = summarize(file, options.mode, &variants, &trials);
    Ok(RunResults {
        summary,
        trials,
        skipped,
    })
}

/// Every trial of every variant, each from the shard that ran it
/// (`shards` in shard order).
fn read_trials(variants: &[Ready<'_>], shards: &[&Path]) -> Result<Vec<Vec<TrialResult>>, String> {
    let mut all = Vec::with_capacity(variants.len());
    let mut missing = Vec::new();
    let mut task = 0usize;
    for (variant, prepared) in variants {
        let mut trials = Vec::new();
        for trial in 0..prepared.scenario().trials {
            let (index, name) = (task % shards.len(), trial_path(&variant.name, trial));
            task += 1;
            let dir = shards[index];
            let bytes = match read_inside(dir, &name) {
                Ok(bytes) => bytes,
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    missing.push(format!(
                        "{} (shard {}/{}, {})",
                        name.display(),
                        index + 1,
                        shards.len(),
                        dir.display()
                    ));
                    continue;
                }
                Err(error) => return Err(describe(dir, &name, &error)),
            };
            let result: TrialResult = serde_json::from_slice(&bytes)
                .map_err(|e| format!("{}: {e}", dir.join(&name).display()))?;
            trials.push(result);
        }
        all.push(trials);
    }
    if !missing.is_empty() {
        let more = missing.len().saturating_sub(NAMED);
        missing.truncate(NAMED);
        let and = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        return Err(format!("trial files missing: {}{and}", missing.join(", ")));
    }
    Ok(all)
}

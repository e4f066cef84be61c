//! `pepkit list`: the papers (`scenarios/<paper>/`), and for each its
//! scenario files with their titles, what each reproduces and how many
//! claims it checks. Also where the scenarios are when no `--scenarios`
//! is given, for `pepkit reproduce` as well.

use experiments::ScenarioFile;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `pepkit list`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Only this paper (a directory of `--scenarios`).
    paper: Option<String>,
    /// Where the scenario directories are [default: the first `scenarios/`
    /// found from the current directory upward, else the one of the
    /// source tree pepkit was built from].
    #[arg(long)]
    scenarios: Option<PathBuf>,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let dir = match args.scenarios.clone().map_or_else(scenarios_dir, Ok) {
        Ok(dir) => dir,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let papers = papers(&dir);
    let chosen: Vec<&String> = match &args.paper {
        None => papers.iter().collect(),
        Some(paper) if papers.contains(paper) => vec![paper],
        Some(paper) => {
            eprintln!(
                "error: no paper called {paper:?} in {}; the papers are {}",
                dir.display(),
                papers.join(", ")
            );
            return ExitCode::from(2);
        }
    };
    let mut failed = false;
    for paper in chosen {
        match describe(&dir.join(paper)) {
            Ok(text) => print!("{paper}{text}"),
            Err(error) => {
                eprintln!("error: {error}");
                failed = true;
            }
        }
    }
    println!(
        "\npepkit reproduce PAPER runs a paper's scenarios (in {}); pepkit run FILE runs one.",
        dir.display()
    );
    if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// A paper's line (its counts) and a line per scenario file: its name,
/// what it reproduces (its figure and source), its title and its claims.
fn describe(dir: &Path) -> Result<String, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let mut lines = String::new();
    let mut claims = 0;
    for path in &files {
        let file = ScenarioFile::load(path).map_err(|e| e.to_string())?;
        let stem = path.file_stem().unwrap_or_default().to_string_lossy();
        claims += file.checks.len();
        lines.push_str(&scenario_line(&stem, &file));
    }
    Ok(format!(
        " ({}, {})\n{lines}",
        counted(files.len(), "scenario"),
        counted(claims, "claim")
    ))
}

/// `n` and `noun`, plural unless `n` is 1.
fn counted(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// One scenario's lines: its name, claims and title, then what it
/// reproduces (its source, or its figure).
fn scenario_line(stem: &str, file: &ScenarioFile) -> String {
    let base = &file.base;
    let claims = counted(file.checks.len(), "claim");
    let mut text = format!("  {stem} ({claims}): {}\n", base.title);
    match (&base.source, &base.figure) {
        (Some(source), _) => text += &format!("      reproduces {source}\n"),
        (None, Some(figure)) => text += &format!("      reproduces figure {figure}\n"),
        (None, None) => {}
    }
    text
}

/// The papers: the directories of `scenarios` that hold scenario files,
/// sorted.
pub(crate) fn papers(scenarios: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(scenarios)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            std::fs::read_dir(path).is_ok_and(|mut inside| {
                inside.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "toml")))
            })
        })
        .filter_map(|path| Some(path.file_name()?.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

/// Where the scenario directories are: the first `scenarios/` with
/// papers in it from the current directory upward, else the one in the
/// source tree pepkit was built from.
pub(crate) fn scenarios_dir() -> Result<PathBuf, String> {
    let here = std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?;
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let built = built.canonicalize().unwrap_or(built);
    find_scenarios(&here, &built).ok_or_else(|| {
        format!(
            "no scenarios/ directory in {} or above it, nor at {}; give --scenarios DIR",
            here.display(),
            built.display()
        )
    })
}

/// The first `scenarios/` holding papers in `from` or a directory above
/// it, else `fallback` if it holds papers.
fn find_scenarios(from: &Path, fallback: &Path) -> Option<PathBuf> {
    from.ancestors()
        .map(|dir| dir.join("scenarios"))
        .chain(std::iter::once(fallback.to_path_buf()))
        .find(|dir| !papers(dir).is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_are_found_from_any_directory_below_the_tree_or_else_at_the_fallback() {
        let root = std::env::temp_dir().join(format!("pepkit-list-{}", std::process::id()));
        let deep = root.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(root.join("scenarios/paper")).unwrap();
        std::fs::write(root.join("scenarios/paper/x.toml"), "").unwrap();
        let nowhere = root.join("none");
        assert_eq!(
            find_scenarios(&deep, &nowhere),
            Some(root.join("scenarios"))
        );
        assert_eq!(papers(&root.join("scenarios")), ["paper"]);
        // Outside the tree: the fallback, if it holds papers.
        let outside = std::env::temp_dir();
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        assert_eq!(find_scenarios(&outside, &shipped), Some(shipped.clone()));
        assert!(papers(&shipped).contains(&"sidekick".to_string()));
        std::fs::remove_dir_all(&root).unwrap();
    }
}

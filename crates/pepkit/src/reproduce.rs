//! `pepkit reproduce PAPER`: run every scenario of one paper
//! (`scenarios/PAPER/*.toml`, in the order of the paper's figures), each
//! into its own directory, and write an index that opens with the number of
//! claims that held and gathers the tables, the claims and the figures.
//! Exits with status 1 if a claim did not hold.

use crate::run_scenario::{Common, run_and_write};
use experiments::{RunOptions, ScenarioFile};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `pepkit reproduce`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The paper: a directory of `--scenarios`. `sidekick` reproduces
    /// every Sidekick figure; the other papers' directories hold the
    /// scenarios written so far, without their systems yet.
    paper: String,
    /// Where the scenario directories are.
    #[arg(long, default_value = "scenarios")]
    scenarios: PathBuf,
    /// Where to write the results [default: results/<paper>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run only the scenario files whose names contain this text.
    #[arg(long)]
    only: Option<String>,
    #[command(flatten)]
    common: Common,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let dir = args.scenarios.join(&args.paper);
    let files = match scenario_files(&dir, args.only.as_deref()) {
        Ok(files) if !files.is_empty() => files,
        Ok(_) => {
            eprintln!("error: no scenario files in {}", dir.display());
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("error: reading {}: {error}", dir.display());
            return ExitCode::from(2);
        }
    };
    // Check every file before running any, so a typo does not surface an
    // hour into the run.
    let mut loaded = Vec::new();
    for path in &files {
        match ScenarioFile::load(path) {
            Ok(file) => loaded.push((path, file)),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        }
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(&args.paper));
    let options = RunOptions {
        seed: None,
        trials: args.common.trials,
        jobs: args.common.jobs,
        only: None,
        mode: experiments::Mode::Simulator,
    };
    // In the order of the paper's figures; scenarios beyond the paper last.
    loaded.sort_by(|(a_path, a), (b_path, b)| {
        let key = |file: &ScenarioFile| file.base.figure.as_deref().map(figure_key);
        match (key(a), key(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        }
        .then_with(|| a_path.cmp(b_path))
    });
    let mut sections = String::new();
    let (mut held, mut failed) = (0, 0);
    for (number, (path, file)) in loaded.iter().enumerate() {
        let stem = path
            .file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy());
        eprintln!("[{}/{}] {}", number + 1, loaded.len(), path.display());
        let dir = out.join(stem.as_ref());
        let results = match run_and_write(file, &options, args.common.quiet, &dir) {
            Ok(results) => results,
            Err(code) => return code,
        };
        let summary = &results.summary;
        // "Figure 4a: …", unless the title names its figure already.
        let heading = match &file.base.figure {
            Some(figure) if !summary.title.contains(&format!("Figure {figure}")) => {
                format!("Figure {figure}: {}", summary.title)
            }
            _ => summary.title.clone(),
        };
        let index = &mut sections;
        writeln!(index, "## {heading}\n").expect("writing to a String");
        writeln!(
            index,
            "`{}` → [`{stem}/`]({stem}/summary.md)\n",
            path.display()
        )
        .expect("writing to a String");
        index.push_str(&experiments::report::table(summary));
        if !summary.checks.is_empty() {
            index.push('\n');
            index.push_str(&experiments::summary::checks_table(&summary.checks));
        }
        held += summary.checks.iter().filter(|c| c.passed).count();
        failed += summary.checks.iter().filter(|c| !c.passed).count();
        index.push('\n');
        for figure in figures(&dir) {
            writeln!(index, "![{figure}]({stem}/{figure})\n").expect("writing to a String");
        }
    }
    let verdict = if failed == 0 { "✓" } else { "✗" };
    let index = format!(
        "# {}: every scenario, reproduced\n\n**{verdict} {held} of {} claims held.**\n\n{sections}",
        args.paper,
        held + failed
    );
    let index_path = out.join("README.md");
    if let Err(error) = std::fs::write(&index_path, index) {
        eprintln!("error: writing {}: {error}", index_path.display());
        return ExitCode::FAILURE;
    }
    println!(
        "{held} of {} claims held; index of all results: {}",
        held + failed,
        index_path.display()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// A figure's sort key: `"4a"` → (4, "a"), so that 10 comes after 9.
fn figure_key(figure: &str) -> (u32, String) {
    let digits: String = figure.chars().take_while(char::is_ascii_digit).collect();
    let number = digits.parse().unwrap_or(u32::MAX);
    (number, figure[digits.len()..].to_string())
}

/// The `.toml` files in `dir` whose names contain `only`, sorted.
fn scenario_files(dir: &Path, only: Option<&str>) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .filter(|path| {
            only.is_none_or(|text| {
                path.file_name()
                    .is_some_and(|name| name.to_string_lossy().contains(text))
            })
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The PNG figures a run wrote into `dir`, sorted.
fn figures(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".png"))
        .collect();
    names.sort();
    names
}

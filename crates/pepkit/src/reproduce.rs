//! `pepkit reproduce PAPER`: run every scenario of one paper
//! (`scenarios/PAPER/*.toml`, in the order of the paper's figures), each
//! into its own directory, and write an index that opens with the number of
//! claims that held and gathers the tables, the claims and the figures.
//! Exits with status 1 if a claim did not hold.

use crate::run_scenario::{Common, run_and_write};
use experiments::{Mode, RunOptions, ScenarioFile, Summary};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `pepkit reproduce`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The paper: a directory of `--scenarios` (sidekick, pemi, tecc, …).
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
    /// A reduced reproduction: only the files with a `[quick]` table, with
    /// its trials and variants, and in real mode too where it says so
    /// (skipped with the reason where real mode is unavailable, unless
    /// PEPKIT_REQUIRE_REAL=1).
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    common: Common,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let loaded = match load(args) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let real_mode = args.quick
        && loaded
            .iter()
            .any(|(_, f)| f.quick.as_ref().is_some_and(|q| q.real));
    let real = match real_mode.then(real_mode_available).transpose() {
        Ok(real) => real.unwrap_or(false),
        Err(code) => return code,
    };
    let out = args.out.clone().unwrap_or_else(|| {
        let name = if args.quick {
            format!("{}-quick", args.paper)
        } else {
            args.paper.clone()
        };
        PathBuf::from("results").join(name)
    });
    let mut sections = String::new();
    let (mut held, mut failed) = (0, 0);
    for (number, (path, file)) in loaded.iter().enumerate() {
        eprintln!("[{}/{}] {}", number + 1, loaded.len(), path.display());
        let stem = path
            .file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
        let quick = file.quick.as_ref().filter(|_| args.quick);
        let selected = quick.map_or(&[][..], |q| &q.variants[..]);
        let mut modes = Vec::new();
        if runs_in(file, selected, Mode::Simulator) {
            modes.push(Mode::Simulator);
        }
        if quick.is_some_and(|q| q.real) && real {
            modes.push(Mode::Real);
        }
        if modes.is_empty() {
            // Independent stacks or kernel TCP only: nothing to simulate.
            eprintln!("skipped: every variant runs in real mode only");
            let how = if file.quick.as_ref().is_some_and(|q| q.real) {
                format!(
                    "`pepkit reproduce {} --quick` runs them where real mode is available",
                    args.paper
                )
            } else {
                format!("`pepkit run {} --real` runs them", path.display())
            };
            writeln!(
                sections,
                "## {}\n\n`{}`: skipped, its variants run in real mode only ({how}).\n",
                file.base.title,
                path.display(),
            )
            .expect("writing to a String");
            continue;
        }
        for mode in modes {
            let options = RunOptions {
                seed: None,
                trials: args.common.trials.or(quick.map(|q| q.trials)),
                jobs: args.common.jobs,
                only: None,
                variants: quick.map(|q| q.variants.clone()).unwrap_or_default(),
                mode,
                shard: None,
                middle_cpu: None,
                capture: None,
            };
            let (dir, link) = match mode {
                Mode::Simulator => (out.join(&stem), stem.clone()),
                Mode::Real => (out.join(&stem).join("real"), format!("{stem}/real")),
            };
            let results = match run_and_write(file, &options, args.common.quiet, &dir) {
                Ok(results) => results,
                Err(code) => return code,
            };
            let summary = &results.summary;
            held += summary.checks.iter().filter(|c| c.passed).count();
            failed += summary.checks.iter().filter(|c| !c.passed).count();
            section(&mut sections, file, path, summary, (&dir, &link));
        }
    }
    let verdict = if failed == 0 { "✓" } else { "✗" };
    let kind = if args.quick {
        "a quick reproduction"
    } else {
        "every scenario, reproduced"
    };
    let index = format!(
        "# {}: {kind}\n\n**{verdict} {held} of {} claims held.**\n\n{sections}",
        args.paper,
        held + failed
    );
    let index_path = out.join("README.md");
    if let Err(error) =
        std::fs::create_dir_all(&out).and_then(|()| std::fs::write(&index_path, index))
    {
        eprintln!("error: writing {}: {error}", index_path.display());
        return ExitCode::from(2);
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

/// The paper's scenario files, every one checked before any runs (a typo
/// does not surface an hour into the run), in the order of the paper's
/// figures (scenarios beyond the paper last); with `--quick`, only those
/// with a `[quick]` table.
fn load(args: &Args) -> Result<Vec<(PathBuf, ScenarioFile)>, ExitCode> {
    let dir = args.scenarios.join(&args.paper);
    let files = match scenario_files(&dir, args.only.as_deref()) {
        Ok(files) if !files.is_empty() => files,
        Ok(_) => {
            eprintln!("error: no scenario files in {}", dir.display());
            return Err(ExitCode::from(2));
        }
        Err(error) => {
            eprintln!("error: reading {}: {error}", dir.display());
            return Err(ExitCode::from(2));
        }
    };
    let mut loaded = Vec::new();
    for path in files {
        match ScenarioFile::load(&path) {
            Ok(file) if args.quick && file.quick.is_none() => {}
            Ok(file) => loaded.push((path, file)),
            Err(error) => {
                eprintln!("error: {error}");
                return Err(ExitCode::from(2));
            }
        }
    }
    if loaded.is_empty() {
        eprintln!(
            "error: no scenario file in {} has a [quick] table",
            dir.display()
        );
        return Err(ExitCode::from(2));
    }
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
    Ok(loaded)
}

/// Whether any of the file's `selected` variants (all if none) runs in
/// `mode`.
fn runs_in(file: &ScenarioFile, selected: &[String], mode: Mode) -> bool {
    file.variants
        .iter()
        .filter(|v| selected.is_empty() || v.is_named_by(selected))
        .any(|v| v.scenario.unsupported_in(mode).is_none())
}

/// Whether real mode can run here: `Ok(false)` (with the reason printed)
/// if not, an error if PEPKIT_REQUIRE_REAL=1 says it must.
fn real_mode_available() -> Result<bool, ExitCode> {
    match emu::available() {
        Ok(()) => {
            emu::sys::interrupt::install();
            Ok(true)
        }
        Err(reason) if std::env::var_os("PEPKIT_REQUIRE_REAL").is_some() => {
            eprintln!("error: real mode {reason}, and PEPKIT_REQUIRE_REAL requires it");
            Err(ExitCode::from(2))
        }
        Err(reason) => {
            eprintln!("skipping real mode: it {reason}");
            Ok(false)
        }
    }
}

/// One run's section of the index: a heading naming the figure (and the
/// mode), the file, the table, the claims and the figures.
fn section(
    sections: &mut String,
    file: &ScenarioFile,
    path: &Path,
    summary: &Summary,
    (dir, link): (&Path, &str),
) {
    // "Figure 4a: …", unless the title names its figure already.
    let mut heading = match &file.base.figure {
        Some(figure) if !summary.title.contains(&format!("Figure {figure}")) => {
            format!("Figure {figure}: {}", summary.title)
        }
        _ => summary.title.clone(),
    };
    if summary.mode == Mode::Real {
        heading += " (real mode)";
    }
    let out = sections;
    writeln!(out, "## {heading}\n").expect("writing to a String");
    writeln!(
        out,
        "`{}` → [`{link}/`]({link}/summary.md)\n",
        path.display()
    )
    .expect("writing to a String");
    out.push_str(&experiments::report::table(summary));
    if !summary.checks.is_empty() {
        out.push('\n');
        out.push_str(&experiments::summary::checks_table(&summary.checks));
    }
    out.push('\n');
    for figure in figures(dir) {
        writeln!(out, "![{figure}]({link}/{figure})\n").expect("writing to a String");
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

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
    /// Where the scenario directories are [default: the first `scenarios/`
    /// found from the current directory upward, else the one of the
    /// source tree pepkit was built from].
    #[arg(long)]
    scenarios: Option<PathBuf>,
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
    let (loaded, not_quick) = match load(args) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let mut left_out = LeftOut::default();
    for (path, file) in &not_quick {
        left_out.file(path, &file.checks);
    }
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
    let mut checked: Vec<experiments::scenario::Check> = Vec::new();
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
            left_out.file(path, &file.checks);
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
            checked.extend(summary.checks.iter().map(|c| c.check.clone()));
            section(&mut sections, file, path, summary, (&dir, &link));
        }
        let unchecked: Vec<_> = file
            .checks
            .iter()
            .filter(|c| !checked.contains(c))
            .cloned()
            .collect();
        left_out.claims(path, &unchecked);
        checked.clear();
    }
    let verdict = if failed == 0 { "✓" } else { "✗" };
    let kind = if args.quick {
        "a quick reproduction"
    } else {
        "every scenario, reproduced"
    };
    let index = format!(
        "# {}: {kind}\n\n**{verdict} {held} of {} claims checked held.**{}\n\n{sections}{}",
        args.paper,
        held + failed,
        left_out.sentence(),
        left_out.section(),
    );
    let index_path = out.join("README.md");
    if let Err(error) =
        std::fs::create_dir_all(&out).and_then(|()| std::fs::write(&index_path, index))
    {
        eprintln!("error: writing {}: {error}", index_path.display());
        return ExitCode::from(2);
    }
    println!(
        "{} claims checked, {held} held;{} index of all results: {}",
        held + failed,
        left_out.terse(),
        index_path.display()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// A paper's scenario files, as read.
type Files = Vec<(PathBuf, ScenarioFile)>;

/// The paper's scenario files, every one checked before any runs (a typo
/// does not surface an hour into the run), in the order of the paper's
/// figures (scenarios beyond the paper last); with `--quick`, only those
/// with a `[quick]` table, and beside them the files left out.
fn load(args: &Args) -> Result<(Files, Files), ExitCode> {
    let scenarios = match &args.scenarios {
        Some(dir) => dir.clone(),
        None => crate::list::scenarios_dir().map_err(|error| {
            eprintln!("error: {error}");
            ExitCode::from(2)
        })?,
    };
    let dir = scenarios.join(&args.paper);
    if !dir.is_dir() {
        eprintln!(
            "error: no paper called {:?} in {}; the papers are {}",
            args.paper,
            scenarios.display(),
            crate::list::papers(&scenarios).join(", ")
        );
        return Err(ExitCode::from(2));
    }
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
    let mut not_quick = Vec::new();
    for path in files {
        match ScenarioFile::load(&path) {
            Ok(file) if args.quick && file.quick.is_none() => not_quick.push((path, file)),
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
    Ok((loaded, not_quick))
}

/// The claims a reproduction did not check: every claim of the files it
/// did not run, and the claims of the files it ran that no run
/// evaluated (their variants or their mode were not run). Those whose
/// check names a `gap` are known to fail: the gap is where the failure
/// is explained.
#[derive(Default)]
struct LeftOut {
    /// The files not run, with their claims' count.
    files: Vec<(PathBuf, usize)>,
    /// Each claim left out: its file, the claim, its gap.
    claims: Vec<(PathBuf, String, Option<String>)>,
}

impl LeftOut {
    /// `file` was not run: all of `checks` are left out.
    fn file(&mut self, path: &Path, checks: &[experiments::scenario::Check]) {
        self.files.push((path.to_path_buf(), checks.len()));
        self.claims(path, checks);
    }

    /// `checks` of the file at `path` were not evaluated.
    fn claims(&mut self, path: &Path, checks: &[experiments::scenario::Check]) {
        for check in checks {
            self.claims
                .push((path.to_path_buf(), check.claim.clone(), check.gap.clone()));
        }
    }

    /// How many of the claims left out are known to fail.
    fn known_to_fail(&self) -> usize {
        self.claims
            .iter()
            .filter(|(_, _, gap)| gap.is_some())
            .count()
    }

    /// What was left out, in a few words ("11 claims left out (9
    /// scenarios not run), of which 2 are known to fail"), or `None`.
    fn summary(&self) -> Option<String> {
        if self.claims.is_empty() && self.files.is_empty() {
            return None;
        }
        let files = match self.files.len() {
            0 => String::new(),
            1 => " (1 scenario not run)".to_string(),
            n => format!(" ({n} scenarios not run)"),
        };
        let known = match self.known_to_fail() {
            1 => "1 is".to_string(),
            n => format!("{n} are"),
        };
        let claims = match self.claims.len() {
            1 => "1 claim".to_string(),
            n => format!("{n} claims"),
        };
        Some(format!(
            "{claims} left out{files}, of which {known} known to fail"
        ))
    }

    /// The index's sentence after the count of claims held (empty when
    /// nothing was left out).
    fn sentence(&self) -> String {
        self.summary().map_or(String::new(), |summary| {
            format!(
                " {summary} (their check names a `gap`, where the failure is explained); \
                 each is listed under [Left out](#left-out)."
            )
        })
    }

    /// The terminal's words after the count of claims held.
    fn terse(&self) -> String {
        self.summary()
            .map_or(String::new(), |summary| format!(" {summary};"))
    }

    /// The index's closing section: the scenarios not run and every
    /// claim left out, the known failures named with their gap.
    fn section(&self) -> String {
        if self.claims.is_empty() && self.files.is_empty() {
            return String::new();
        }
        let mut out = String::from("## Left out\n\n");
        if !self.files.is_empty() {
            out.push_str("Scenarios not run:\n\n");
            for (path, claims) in &self.files {
                writeln!(out, "- `{}` ({claims} claims)", file_name(path))
                    .expect("writing to a String");
            }
            out.push('\n');
        }
        if !self.claims.is_empty() {
            out.push_str("Claims left out:\n\n");
            for (path, claim, gap) in &self.claims {
                let known = gap.as_ref().map_or(String::new(), |gap| {
                    format!(" — known to fail (why: `{gap}`)")
                });
                writeln!(out, "- `{}`: {claim}{known}", file_name(path))
                    .expect("writing to a String");
            }
            out.push('\n');
        }
        out
    }
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

/// A scenario file's name, which names it within its paper.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check(claim: &str, gap: Option<&str>) -> experiments::scenario::Check {
        serde_json::from_value(serde_json::json!({
            "claim": claim, "metric": "m", "variant": "v", "at_least": 1.0, "gap": gap,
        }))
        .unwrap()
    }

    #[test]
    fn what_a_reproduction_leaves_out_is_counted_and_listed_with_the_known_failures() {
        let mut left_out = LeftOut::default();
        assert_eq!(left_out.sentence(), "");
        assert_eq!(left_out.section(), "");
        let path = Path::new("scenarios/p/a.toml");
        left_out.file(
            path,
            &[check("one", None), check("two", Some("docs/r.md#two"))],
        );
        left_out.claims(Path::new("scenarios/p/b.toml"), &[check("three", None)]);
        assert_eq!(
            left_out.terse(),
            " 3 claims left out (1 scenario not run), of which 1 is known to fail;"
        );
        let section = left_out.section();
        assert!(section.contains("- `a.toml` (2 claims)"), "{section}");
        assert!(section.contains("- `a.toml`: two — known to fail (why: `docs/r.md#two`)"));
        assert!(section.contains("- `b.toml`: three\n"), "{section}");
    }
}

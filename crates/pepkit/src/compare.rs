//! `pepkit compare`: every approach on one path and workload — end to
//! end, with each middle system where it belongs, through the tunnel,
//! over TCP — and the congestion controllers alone on it, in two tables
//! and a figure each. The path and workload become an in-memory scenario
//! (`experiments::compare`) run by the same run path as `pepkit run`.

use crate::run_scenario::{CaptureArgs, Common};
use experiments::compare::{self, Group, Part, Plan, Spec};
use experiments::scenario::Override;
use experiments::{Mode, Progress, RunOptions, RunResults};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `pepkit compare`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The path as a scenario file without variants (its hops, endpoints,
    /// workload, seed); or give the hops with --hop.
    #[arg(conflicts_with = "hop")]
    file: Option<PathBuf>,
    /// One hop of the path, client side first (repeat for each hop):
    /// rate=20Mbit/s,delay=40ms[,loss=2%][,buffer=100|150kB|1bdp]
    /// [,trace=cellular/…][,reverse_trace=…][,loss_direction=forward]
    /// [,jitter=2ms][,name=sat]. Hops are named h1, h2, … unless named.
    #[arg(long, value_name = "KEY=VALUE,…")]
    hop: Vec<String>,
    /// The workload: bulk, media, rtc, short_flows or video [default: the
    /// file's, else bulk].
    #[arg(long, value_name = "KIND")]
    workload: Option<String>,
    /// A bulk transfer from the client to the server.
    #[arg(long, conflicts_with = "download")]
    upload: bool,
    /// A bulk transfer from the server to the client (the default).
    #[arg(long)]
    download: bool,
    /// A bulk transfer's size.
    #[arg(long, default_value = "5MB")]
    size: String,
    /// A bulk transfer bounded by time instead of size, or how long a
    /// media, rtc or video stream lasts.
    #[arg(long)]
    duration: Option<String>,
    /// Put every middle system on the node after this hop, instead of
    /// where each belongs next to the lossy hop.
    #[arg(long, value_name = "HOP")]
    at: Option<String>,
    /// One line per approach over these values of a dotted scenario
    /// field, e.g. hops.h1.loss=0,0.01,0.02.
    #[arg(long, value_name = "FIELD=V1,V2,…")]
    sweep: Option<String>,
    /// Run on a real testbed (network namespaces; needs root), with the
    /// TCP rows.
    #[arg(long)]
    real: bool,
    /// Where to write [default: results/compare, and its real/ with
    /// --real].
    #[arg(long)]
    out: Option<PathBuf>,
    /// The base seed [default: the file's, else 1].
    #[arg(long)]
    seed: Option<u64>,
    /// Edit the base scenario before the approaches are added, as
    /// `pepkit run --set` does (e.g. time_limit=120s,
    /// server.loss_detection.packet_threshold=10).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<Override>,
    #[command(flatten)]
    common: Common,
    /// As `pepkit run --capture`, for the approaches table (its hops are
    /// the path's): files go to OUT/approaches/captures/.
    #[command(flatten)]
    capture: CaptureArgs,
}

/// Trials per approach unless --trials says otherwise.
const TRIALS: u32 = 3;

pub(crate) fn run(args: &Args) -> ExitCode {
    let started = Instant::now();
    let mode = if args.real {
        Mode::Real
    } else {
        Mode::Simulator
    };
    let plan = match spec(args).and_then(|spec| Plan::new(&spec, mode).map_err(|e| e.to_string())) {
        Ok(plan) => plan,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    if mode == Mode::Real {
        if let Err(reason) = emu::available() {
            eprintln!("error: real mode {reason}");
            return ExitCode::from(2);
        }
        emu::sys::interrupt::install();
    }
    let out = args.out.clone().unwrap_or_else(|| match mode {
        Mode::Simulator => PathBuf::from("results/compare"),
        Mode::Real => PathBuf::from("results/compare/real"),
    });
    let options = RunOptions {
        seed: args.seed,
        trials: None,
        jobs: args.common.jobs,
        mode,
        ..RunOptions::default()
    };
    let mut results: Vec<Option<RunResults>> = Vec::new();
    for part in &plan.parts {
        let options = RunOptions {
            capture: match part.group {
                Group::Approaches => args.capture.captures(&out.join("approaches")),
                Group::Controllers => None,
            },
            ..options.clone()
        };
        let mut progress = match args.common.quiet {
            true => Progress::silent(),
            false => Progress::stderr(),
        };
        match compare::run(part, &options, &mut progress) {
            Ok(ran) => results.push(ran),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        }
    }
    let mut warnings = plan.warnings.clone();
    warnings.extend(
        results
            .iter()
            .flatten()
            .flat_map(experiments::run::unseen_traffic),
    );
    let report = match write(&plan, &results, &warnings, &out, args.sweep.is_some()) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: writing results to {}: {error}", out.display());
            return ExitCode::from(2);
        }
    };
    println!("{report}");
    println!(
        "results in {}: compare.md, compare.json, compare.png/.svg, controllers.png/.svg, and \
         each table's run as pepkit run writes it in approaches/ and controllers/",
        out.display()
    );
    println!(
        "wall time: {:.1} s in {}",
        started.elapsed().as_secs_f64(),
        mode.describe()
    );
    if emu::sys::interrupt::requested() {
        eprintln!("interrupted: the results above are of the trials that ran");
        return ExitCode::from(130);
    }
    ExitCode::SUCCESS
}

/// What to compare, from the arguments.
fn spec(args: &Args) -> Result<Spec, String> {
    let (document, origin) = match &args.file {
        Some(file) => (compare::path::from_file(file)?, file.clone()),
        None => (
            compare::path::from_hops(&args.hop)?,
            PathBuf::from("compare"),
        ),
    };
    let direction = if args.upload { "upload" } else { "download" };
    let workload = match (&args.workload, document.contains_key("workload")) {
        (None, true) if !args.upload && !args.download => None,
        (kind, _) => Some(compare::workload(
            kind.as_deref().unwrap_or("bulk"),
            direction,
            &args.size,
            args.duration.as_deref(),
        )?),
    };
    let sweep = args
        .sweep
        .as_deref()
        .map(compare::parse_sweep)
        .transpose()?;
    Ok(Spec {
        document,
        origin,
        workload,
        at: args.at.clone(),
        sweep,
        trials: args.common.trials.unwrap_or(TRIALS),
        overrides: args.set.clone(),
    })
}

/// Writes each part's run, the figures, compare.md and compare.json;
/// returns what compare.md says.
fn write(
    plan: &Plan,
    results: &[Option<RunResults>],
    warnings: &[String],
    out: &Path,
    swept: bool,
) -> std::io::Result<String> {
    std::fs::create_dir_all(out)?;
    let mut report = format!(
        "# {}\n\n",
        plan.parts[0]
            .file
            .as_ref()
            .map_or(format!("pepkit compare: {}", plan.title), |file| file
                .base
                .title
                .clone(),)
    );
    for warning in warnings {
        report.push_str(&format!("warning: {warning}\n\n"));
    }
    let mut rows = Vec::new();
    for (part, ran) in plan.parts.iter().zip(results) {
        let (dir, stem, heading) = match (part.group, part.one_hop) {
            (Group::Approaches, _) => ("approaches", "compare", "Approaches"),
            (Group::Controllers, true) => (
                "controllers",
                "controllers",
                "Controllers on the path as one hop (scavengers beside a CUBIC primary)",
            ),
            (Group::Controllers, false) => ("controllers", "controllers", "Controllers"),
        };
        if let (Some(file), Some(ran)) = (&part.file, ran) {
            experiments::report::write(&out.join(dir), file, ran)?;
        }
        report.push_str(&format!(
            "## {heading}\n\n{}\n",
            compare::table(part, ran.as_ref())
        ));
        let title = format!("{heading}: {}", plan.title);
        draw(out, stem, part, ran.as_ref(), &title, swept)?;
        rows.extend(part.rows.iter().map(|row| {
            let (status, reason) = match &row.status {
                compare::Status::Runs => ("runs", None),
                compare::Status::NotApplicable(why) => ("n/a", Some(why.clone())),
            };
            serde_json::json!({
                "table": dir, "approach": row.approach.name, "status": status, "reason": reason,
            })
        }));
    }
    report.push_str(
        "Medians across trials, p25–p75 in brackets; × is the ratio of the first metric's \
         medians to the table's first row; ★ marks the best. p95 RTT is the data sender's, \
         over every packet it saw acknowledged. Every metric of every trial is in \
         approaches/ and controllers/ (summary.json, trials.csv, trials/).\n",
    );
    std::fs::write(out.join("compare.md"), &report)?;
    let json = serde_json::json!({
        "schema": "pepkit.compare/1",
        "title": plan.title,
        "rows": rows,
        "warnings": warnings,
    });
    let mut bytes = serde_json::to_vec_pretty(&json).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    std::fs::write(out.join("compare.json"), bytes)?;
    Ok(report)
}

/// Draws `part`'s figure as `<stem>.png` and `.svg` (and, with a sweep,
/// `<stem>-sweep`).
fn draw(
    out: &Path,
    stem: &str,
    part: &Part,
    ran: Option<&RunResults>,
    title: &str,
    swept: bool,
) -> std::io::Result<()> {
    let figure = compare::figure(part, ran, title);
    for extension in ["svg", "png"] {
        let path = out.join(format!("{stem}.{extension}"));
        experiments::report::draw_comparison(&path, &figure)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        if let (true, Some(ran)) = (swept, ran) {
            let path = out.join(format!("{stem}-sweep.{extension}"));
            let figure = compare::sweep_figure(part, ran, title);
            experiments::report::draw_sweep(&path, &figure)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        }
    }
    Ok(())
}

//! Scenario files, the trial runner and the reports of pepkit's simulated
//! evaluations.
//!
//! A scenario (TOML, [`scenario`]) describes a chain of hops between a
//! client and a server, an optional middlebox, the workload and the
//! variants to compare. [`runner::run`] runs every variant × trial on a
//! thread pool, each trial a deterministic simulation ([`trial`]) seeded
//! from the scenario seed and the trial index; [`report::write`] writes
//! the trial files, `summary.json` ([`summary`]), CSVs, plots ([`plot`])
//! and `summary.md`. `docs/experiments.md` is the user's reference.

pub mod check;
mod flows;
pub mod plot;
pub mod progress;
pub mod real;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod stats;
pub mod summary;
pub mod trial;
pub mod units;

pub use progress::Progress;
pub use real::RealOptions;
pub use runner::{RunOptions, RunResults, run};
pub use scenario::{Mode, Scenario, ScenarioError, ScenarioFile, Variant};
pub use summary::{SCHEMA, Summary, VariantSummary};
pub use trial::{LinkReport, Prepared, TrialResult};

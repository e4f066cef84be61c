//! Scenario files, the trial runner and the reports of pepkit's
//! evaluations, in the simulator and on real testbeds.
//!
//! The modules form layers; each uses only those above it in this list:
//!
//! * vocabulary: [`units`] (quantities as files write them), [`figure`]
//!   (the figures a scenario asks for), [`outcome`] (what a trial
//!   produced, where it ran, and how metrics are named);
//! * one module per concept: [`workloads`] (bulk, media, rtc, short
//!   flows) and [`systems`] (router, split proxy, TCP PEP, Sidekick), each
//!   behind one trait and one `match`; congestion controllers come from
//!   the one registry in the `cc` crate ([`cc::Controller`]);
//! * [`scenario`]: a file read into raw serde types and validated into a
//!   typed [`Scenario`] made of those concepts;
//! * [`trial`]: one construction path of a trial's hosts and engines, two
//!   drivers (the simulator, a real testbed), one way to read results;
//! * [`summary`]: each metric's spread across trials and the paper's
//!   claims checked on it;
//! * [`run`](mod@run): every variant × trial, in parallel in the simulator;
//! * [`capture`]: pcapng and qlog files of chosen trials (`--capture`);
//! * [`report`]: trial files, `summary.json`, CSVs, plots and
//!   `summary.md`. `docs/experiments.md` is the user's reference;
//! * [`compare`]: every approach on one path, as a scenario built in
//!   memory and run by the above (`docs/compare.md`).

pub mod capture;
pub mod compare;
pub mod daemon;
pub mod figure;
pub mod outcome;
pub mod peers;
pub mod report;
mod rtt_intervals;
pub mod run;
pub mod scenario;
mod shorthand;
pub mod summary;
pub mod systems;
pub mod trial;
pub mod units;
pub mod workloads;

pub use outcome::{LinkReport, Mode, TrialResult};
pub use run::{Progress, RunOptions, RunResults, run};
pub use scenario::{Scenario, ScenarioError, ScenarioFile, Variant};
pub use summary::{SCHEMA, Summary, VariantSummary};
pub use trial::{AloneRuns, Prepared};

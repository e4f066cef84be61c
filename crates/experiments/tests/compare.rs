//! `experiments::compare`: which approaches apply to a path and where
//! their systems sit, the warnings, and that a comparison runs through
//! the same run path as `pepkit run`.

use experiments::compare::{self, Group, Plan, Spec, Status};
use experiments::{Mode, Progress, RunOptions};

/// A spec of `hops` with a 200 kB bulk transfer in `direction`.
fn spec(hops: &[&str], direction: &str, at: Option<&str>) -> Spec {
    let hops: Vec<String> = hops.iter().map(|h| h.to_string()).collect();
    Spec {
        document: compare::path::from_hops(&hops).unwrap(),
        origin: "compare".into(),
        workload: Some(compare::workload("bulk", direction, "200kB", None).unwrap()),
        at: at.map(String::from),
        sweep: None,
        trials: 1,
        overrides: Vec::new(),
    }
}

fn status<'a>(plan: &'a Plan, name: &str) -> &'a Status {
    let row = plan
        .parts
        .iter()
        .flat_map(|p| &p.rows)
        .find(|r| r.approach.name == name);
    &row.unwrap_or_else(|| panic!("no row {name}")).status
}

const LOSSY: &str = "rate=20Mbit/s,delay=20ms,loss=2%";
const CLEAN: &str = "rate=100Mbit/s,delay=5ms";

#[test]
fn an_approach_that_does_not_apply_is_a_row_saying_why() {
    let plan = Plan::new(&spec(&[LOSSY, CLEAN], "download", None), Mode::Simulator).unwrap();
    // The sidekick serves both directions (a download through its relay).
    assert_eq!(status(&plan, "QUIC + Sidekick"), &Status::Runs);
    let upload = Plan::new(&spec(&[LOSSY, CLEAN], "upload", None), Mode::Simulator).unwrap();
    assert_eq!(status(&upload, "QUIC + Sidekick"), &Status::Runs);
    // The split proxy relays QUIC streams; media is plain UDP.
    let mut media = spec(&[LOSSY, CLEAN], "download", None);
    media.workload = Some(compare::workload("media", "download", "200kB", Some("5s")).unwrap());
    let media = Plan::new(&media, Mode::Simulator).unwrap();
    match status(&media, "split QUIC") {
        Status::NotApplicable(why) => assert!(why.contains("plain UDP"), "{why}"),
        Status::Runs => panic!("the split proxy does not relay media"),
    }
    match status(&plan, "TCP + PEP") {
        Status::NotApplicable(why) => assert!(why.contains("real mode"), "{why}"),
        Status::Runs => panic!("TCP runs in real mode only"),
    }
    assert_eq!(status(&plan, "QUIC + PEMI"), &Status::Runs);
    // Every approach has a row, in both tables.
    let rows: usize = plan.parts.iter().map(|p| p.rows.len()).sum();
    assert_eq!(rows, compare::APPROACHES.len());
    // One hop: no node for a middle system, still no error.
    let one = Plan::new(&spec(&[LOSSY], "upload", None), Mode::Simulator).unwrap();
    assert!(matches!(
        status(&one, "split QUIC"),
        Status::NotApplicable(_)
    ));
    assert_eq!(status(&one, "QUIC CUBIC (e2e)"), &Status::Runs);
}

#[test]
fn loss_upstream_of_a_transparent_middle_system_is_a_warning() {
    // A download: the data comes from the server. With the loss on the
    // client side of PEMI, PEMI sees every packet first: no warning.
    let fine = Plan::new(&spec(&[LOSSY, CLEAN], "download", None), Mode::Simulator).unwrap();
    assert!(fine.warnings.is_empty(), "{:?}", fine.warnings);
    // PEMI put before the lossy hop on the server's side: it cannot help.
    let upstream = spec(&[CLEAN, LOSSY, CLEAN], "download", Some("h1"));
    let plan = Plan::new(&upstream, Mode::Simulator).unwrap();
    let pemi: Vec<&String> = plan
        .warnings
        .iter()
        .filter(|w| w.contains("pemi"))
        .collect();
    assert_eq!(pemi.len(), 1, "{:?}", plan.warnings);
    assert!(
        pemi[0].contains("QUIC + PEMI") && pemi[0].contains("h2"),
        "{}",
        pemi[0]
    );
    // The split proxy terminates the connection: no warning for it.
    assert!(
        !plan.warnings.iter().any(|w| w.contains("split QUIC")),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn a_comparison_runs_and_tables_every_approach_with_the_best_marked() {
    let plan = Plan::new(&spec(&[LOSSY, CLEAN], "upload", None), Mode::Simulator).unwrap();
    let approaches = &plan.parts[0];
    assert_eq!(approaches.group, Group::Approaches);
    let options = RunOptions::default();
    let results = compare::run(approaches, &options, &mut Progress::silent())
        .unwrap()
        .unwrap();
    // The middle engines' counters are recorded, and each saw traffic.
    let tunnel = results
        .trials
        .iter()
        .flatten()
        .find(|t| t.variant == "TECC tunnel, RMDT");
    let tunnel = tunnel.unwrap();
    assert!(
        tunnel.middle["to_targets"].as_u64().unwrap() > 0,
        "{:?}",
        tunnel.middle
    );
    assert!(experiments::run::unseen_traffic(&results).is_empty());
    let table = compare::table(approaches, Some(&results));
    for row in &approaches.rows {
        assert!(
            table.contains(&format!("| {}", row.approach.name)),
            "{table}"
        );
    }
    assert_eq!(table.matches('★').count(), 1, "{table}");
    assert!(table.contains("n/a: TCP runs in real mode only"), "{table}");
    assert!(table.contains("| 1.00× |"), "{table}");
    // The same comparison gives the same results.
    let again = compare::run(approaches, &options, &mut Progress::silent())
        .unwrap()
        .unwrap();
    assert_eq!(results.trials, again.trials);
}

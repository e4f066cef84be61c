//! A testbed leaves nothing behind: its namespaces go when it is dropped,
//! and when building it fails half-way. Needs root and network namespaces;
//! skips with the reason otherwise (fails with `PEPKIT_REQUIRE_REAL=1`).

use emu::{RealClock, Testbed, TestbedSpec};
use netsim::{HopConfig, LinkConfig, Rate, Seed};
use std::time::Duration;

fn spec(rate: Rate) -> TestbedSpec {
    let hop = HopConfig::symmetric(LinkConfig::constant(Duration::from_millis(1), rate));
    TestbedSpec {
        client: "10.0.2.10".parse().unwrap(),
        server: "10.0.1.10".parse().unwrap(),
        hops: vec![hop.clone(), hop],
        extra: vec![(0, "10.255.255.1".parse().unwrap())],
        client_extra: Vec::new(),
        server_extra: Vec::new(),
        seed: Seed::new(1),
    }
}

/// This process's testbed namespaces.
fn ours() -> Vec<String> {
    let list = emu::sys::command::ip(&["netns", "list"]).unwrap();
    let prefix = format!("pk-{}-", std::process::id());
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.starts_with(&prefix) && !name.contains("probe"))
        .map(str::to_string)
        .collect()
}

#[test]
fn namespaces_go_with_the_testbed_and_with_a_failed_build() {
    if !emu::require_real_or_skip("namespaces_go_with_the_testbed_and_with_a_failed_build") {
        return;
    }
    let testbed = Testbed::build(&spec(Rate::from_mbps(10)), RealClock::start()).unwrap();
    let made = ours();
    // client, middle0, server and the emulator's namespace.
    assert_eq!(made.len(), 4, "{made:?}");
    let middle = testbed.middle(0).unwrap();
    assert_eq!(
        middle.extra,
        ["10.255.255.1".parse::<std::net::Ipv4Addr>().unwrap()]
    );
    assert!(testbed.middle(1).is_none());
    drop(testbed);
    assert_eq!(ours(), Vec::<String>::new());

    // A zero rate is refused by the link model once the namespaces and
    // veths exist: the error comes back and nothing is left.
    let error = Testbed::build(&spec(Rate::from_bps(0)), RealClock::start())
        .err()
        .expect("a zero-rate link is refused");
    assert!(error.to_string().contains("rate"), "{error}");
    assert_eq!(ours(), Vec::<String>::new());
}

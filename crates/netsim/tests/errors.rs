//! Bad input gives clear errors, never a panic.

mod common;
use common::*;
use netsim::testing::Sink;
use netsim::*;

#[test]
fn malformed_traces() {
    for (text, needle) in [
        ("", "no timestamps"),
        ("\n  \n", "no timestamps"),
        ("1\n2\nthree\n", "line 3"),
        ("1\n2.5\n", "line 2"),
        ("10\n5\n", "smaller than the previous"),
        ("0\n", "period"),
        ("-1\n", "line 1"),
        ("99999999999999999999999\n", "line 1"),
    ] {
        let err = CapacityTrace::parse(text).unwrap_err().to_string();
        assert!(err.contains(needle), "{text:?}: {err}");
    }
    let err = CapacityTrace::from_file("/no/such/trace.up").unwrap_err();
    assert!(matches!(err, TraceError::Io { .. }));
}

#[test]
fn trace_errors_quote_only_traces() {
    // A file that is not a trace: its first line is not echoed.
    let secret = "root:$6$secret:19000:0:99999:7:::\nuser:x\n";
    let err = CapacityTrace::parse(secret).unwrap_err().to_string();
    assert!(
        err.contains("line 1") && err.contains("not a mahimahi trace"),
        "{err}"
    );
    assert!(!err.contains("root") && !err.contains("secret"), "{err}");
    let err = CapacityTrace::from_bytes(secret.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(!err.contains("root"), "{err}");
    // A trace with a typo: a short, sanitised excerpt of the bad line.
    let typo = "1\n2\n3x\u{1b}[2J and a very long tail of text\n";
    let err = CapacityTrace::parse(typo).unwrap_err().to_string();
    assert!(err.contains(r#"got "3x?[2J and a ver""#), "{err}");
    assert!(!err.contains('\u{1b}') && !err.contains("tail"), "{err}");
}

#[test]
fn invalid_links() {
    let zero = LinkConfig::constant(ms(1), Rate::from_bps(0));
    assert_eq!(
        Link::new(zero.clone(), Seed::new(0)).unwrap_err(),
        LinkConfigError::ZeroRate
    );
    let no_buffer = LinkConfig::delay_only(ms(1)).with_buffer(BufferLimit::Bytes(0));
    assert_eq!(
        Link::new(no_buffer, Seed::new(0)).unwrap_err(),
        LinkConfigError::ZeroBuffer
    );
    let bad_red = LinkConfig::constant(ms(1), Rate::from_mbps(1))
        .with_red(RedConfig::new(400_000, Rate::from_mbps(1)).with_burst(1));
    let err = Link::new(bad_red, Seed::new(0)).unwrap_err();
    assert!(err.to_string().contains("burst"), "{err}");
    assert!(Probability::new(1.01).is_err());
    assert!(Probability::new(f64::NAN).is_err());

    // Through the simulator: the error surfaces from connect / add_chain.
    let spec = ChainSpec::new(
        HostSpec::new("a", addr(SENDER).ip(), Sink::new()),
        HostSpec::new("b", addr(RECEIVER).ip(), Sink::new()),
    )
    .hop(HopConfig::symmetric(zero));
    let err = Simulator::new(Seed::new(0)).add_chain(spec).unwrap_err();
    assert!(matches!(
        err,
        TopologyError::Link(LinkConfigError::ZeroRate)
    ));
}

#[test]
fn invalid_topologies() {
    let link = LinkConfig::delay_only(ms(1));
    let spec = ChainSpec::new(
        HostSpec::new("a", addr(SENDER).ip(), Sink::new()),
        HostSpec::new("b", addr(RECEIVER).ip(), Sink::new()),
    )
    .hop(HopConfig::symmetric(link.clone()))
    .hop(HopConfig::symmetric(link.clone()));
    let err = Simulator::new(Seed::new(0)).add_chain(spec).unwrap_err();
    assert!(matches!(
        err,
        TopologyError::HopCount {
            middles: 0,
            hops: 2
        }
    ));

    let spec = ChainSpec::new(
        HostSpec::new("a", addr(SENDER).ip(), Sink::new()),
        HostSpec::new("b", addr(SENDER).ip(), Sink::new()),
    )
    .hop(HopConfig::symmetric(link.clone()));
    let err = Simulator::new(Seed::new(0)).add_chain(spec).unwrap_err();
    assert!(matches!(err, TopologyError::DuplicateAddress(_)));

    let mut sim = Simulator::new(Seed::new(0));
    let a = sim
        .add_host(HostSpec::new("a", addr(SENDER).ip(), Sink::new()))
        .unwrap();
    assert!(matches!(
        sim.connect(a, a, link.clone(), link.clone()),
        Err(TopologyError::SelfLoop(_))
    ));
    assert!(matches!(
        sim.add_route(a, addr(RECEIVER).ip(), Interface(3)),
        Err(TopologyError::NoSuchInterface { .. })
    ));
    assert!(matches!(
        Simulator::new(Seed::new(0)).add_dumbbell(DumbbellSpec::new(HopConfig::symmetric(link))),
        Err(TopologyError::NoPairs)
    ));
}

#[test]
fn garbage_payloads_do_not_panic_test_hosts() {
    use netsim::testing::{Probe, WindowSender};
    assert_eq!(Probe::decode(&[1, 2, 3]), None);
    let mut w = WindowSender::new(addr(SENDER), addr(RECEIVER), 100, 1, ms(10));
    w.handle_datagram(
        Time::ZERO,
        Datagram::new(addr(RECEIVER), addr(SENDER), vec![9u8; 3]),
    );
    assert_eq!(w.acked(), 0);
}

//! Whole runs of the RTC workload over a netsim chain
//! (client — 10 Mbit/s, 25 ms — router — 10 Mbit/s, 25 ms — server; the
//! server sends the frames).

mod common;
use common::{noq, through_router};

use netsim::*;
use quic::*;
use std::net::SocketAddr;
use std::time::Duration;

const HOP_DELAY: Duration = Duration::from_millis(25);

/// Ten seconds of PEMI's source (300 frames of 12 500 B at 30 fps);
/// random loss, if any, on the router–server hop (both directions).
fn run(loss: Option<f64>) -> (RtcReport, StopReason) {
    let client_addr: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let server_addr: SocketAddr = "10.0.1.1:4433".parse().unwrap();
    let config = QuicConfig::new(Seed::new(1)).with_controller(noq("cubic"));
    let source = RtcConfig::pemi(10);
    let client = QuicClient::new(
        config.clone(),
        client_addr,
        server_addr,
        RtcReceiver::new(source.frames),
    );
    let server = Timed::new(QuicServer::new(
        config,
        server_addr,
        RtcSenderFactory::new(source),
    ));
    let loss = loss.map(|p| LossModel::Bernoulli(Probability::new(p).unwrap()));
    let spec = through_router(
        HostSpec::new("client", client_addr.ip(), client),
        HostSpec::new("server", server_addr.ip(), server),
        HOP_DELAY,
        10,
        loss,
    );
    let mut sim = Simulator::new(Seed::new(1));
    let chain = sim.add_chain(spec).unwrap();
    let outcome = sim.run_until(Time::from_secs(60));
    let client = sim.host::<QuicClient<RtcReceiver>>(chain.sender).unwrap();
    let report = RtcReport::from_client(client).expect("frames received");
    (report, outcome.reason)
}

fn print(label: &str, r: &RtcReport) {
    println!(
        "{label}: {} frames; delay p50 {:?} p95 {:?} p99 {:?} max {:?}; \
         jitter mean {:?} p50 {:?} p95 {:?} p99 {:?} rfc3550 {:?}",
        r.frames.len(),
        r.delay_p50,
        r.delay_p95,
        r.delay_p99,
        r.delay_max,
        r.jitter_mean,
        r.jitter_p50,
        r.jitter_p95,
        r.jitter_p99,
        r.jitter_rfc3550
    );
}

/// Without loss every frame arrives, frames are generated every 1/30 s,
/// and the median delay is the one-way propagation (2 × 25 ms) plus the
/// frame's transmission at 10 Mbit/s (12 500 B · 8 / 10 Mbit/s = 10 ms),
/// i.e. 60 ms, plus at most 15 ms for packet headers, the second hop's
/// store-and-forward and ack pacing.
#[test]
fn every_frame_arrives_near_the_path_delay() {
    let (report, stop) = run(None);
    print("lossless", &report);
    assert_eq!(stop, StopReason::AllFinished);
    assert_eq!(report.frames.len(), 300);
    for (i, frame) in report.frames.iter().enumerate() {
        assert_eq!(frame.index, i as u64);
        assert_eq!(frame.bytes, 12_500);
    }
    let start = report.frames[0].generated;
    assert_eq!(
        report.frames[299].generated - start,
        Duration::from_nanos(299 * 1_000_000_000 / 30)
    );
    let floor = HOP_DELAY * 2 + Duration::from_millis(10);
    assert!(report.delays.iter().all(|&d| d >= floor), "{report:?}");
    assert!(
        report.delay_p50 < floor + Duration::from_millis(15),
        "median {:?}",
        report.delay_p50
    );
    assert_eq!(report.jitter.len(), 299);
    assert!(report.jitter_p50 < Duration::from_millis(5));
}

/// With 1 % loss every frame still arrives (QUIC retransmits), but frames
/// are late: the 99th percentile is at least half a round trip (50 ms)
/// above the median, and the jitter grows. (On this 100 ms round trip
/// CUBIC's window hovers around 14–32 kB under 1 % loss, about
/// 1.6 Mbit/s, below the source's 3 Mbit/s, so a backlog builds and even
/// the median delay is seconds: measured p50 ≈ 7.3 s, p99 ≈ 10 s.)
#[test]
fn loss_makes_some_frames_late() {
    let (lossless, _) = run(None);
    let (report, stop) = run(Some(0.01));
    print("1% loss", &report);
    assert_eq!(stop, StopReason::AllFinished);
    assert_eq!(report.frames.len(), 300);
    assert!(
        report.delay_p99 >= report.delay_p50 + HOP_DELAY * 2,
        "p50 {:?} p99 {:?}",
        report.delay_p50,
        report.delay_p99
    );
    assert!(report.jitter_p99 > lossless.jitter_p99);
    assert!(report.jitter_mean > lossless.jitter_mean);
}

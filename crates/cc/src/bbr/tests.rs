//! Unit tests of [`Bbr`] on hand-fed ACK sequences.

use super::*;

/// A BBR fed a steady 12 MB/s, 30 ms path: `rounds` of sends and ACKs.
fn run(bbr: &mut Bbr, t0: Instant, steps: u64, rtt_of: impl Fn(u64) -> u64) {
    let us = |u: u64| t0 + Duration::from_micros(u);
    for step in 0..steps {
        if step >= 300 {
            let pn = step - 300;
            let sent = us(pn * 100);
            let now = sent + Duration::from_micros(rtt_of(pn));
            bbr.rate.on_acked(now, pn, sent);
            bbr.acked_in_batch += 1200;
            bbr.handle_end_acks(now, 0, false);
        }
        bbr.handle_sent(us(step * 100), 1200, step);
    }
}

#[test]
fn bbr_measures_the_path_and_leaves_startup() {
    let t0 = Instant::now();
    let mut bbr = Bbr::new(false, Seed::new(1).rng("bbr"), 1200);
    run(&mut bbr, t0, 20_000, |_| 30_000);
    assert!((bbr.btlbw() - 12e6).abs() / 12e6 < 0.02, "{}", bbr.btlbw());
    assert_eq!(bbr.rtprop(), Some(Duration::from_millis(30)));
    assert_eq!(bbr.mode(), Mode::ProbeBw);
    // Window: 2 · 12 MB/s · 30 ms + 3 quanta, plus 2 packets in the
    // 5/4 phase.
    let bdp2 = 2.0 * bbr.btlbw() * 0.03;
    assert!(bbr.target_cwnd() as f64 >= bdp2 + 7200.0 - 1.0);
}

/// The path of [`run`] with the packets `lost` picks dropped: each is
/// declared lost when the third packet after it is acknowledged, after
/// that ACK batch (as noq-proto does). `watch` sees the controller
/// after every step.
fn run_lossy(
    bbr: &mut Bbr,
    steps: u64,
    lost: impl Fn(u64) -> bool,
    mut watch: impl FnMut(u64, &Bbr),
) {
    let t0 = Instant::now();
    let us = |u: u64| t0 + Duration::from_micros(u);
    for step in 0..steps {
        if step >= 300 {
            let pn = step - 300;
            let now = us(step * 100);
            if !lost(pn) {
                bbr.handle_ack(now, us(pn * 100), 1200, pn, Duration::ZERO);
            }
            bbr.handle_end_acks(now, 0, false);
            if let Some(gone) = pn.checked_sub(3).filter(|&gone| lost(gone)) {
                bbr.handle_lost(now, 1200, gone);
                bbr.handle_congestion(now, us(gone * 100), false);
            }
        }
        bbr.handle_sent(us(step * 100), 1200, step);
        watch(step, bbr);
    }
}

/// Random loss (every tenth packet from 1 s on) keeps a sender in one
/// recovery episode, as Linux's BBR sees TCP at such loss: one cut
/// to the flight, then the window grows back to its target and stays.
/// (Conservation renewed every round cut it to the flight every round.)
#[test]
fn random_loss_cuts_the_window_once() {
    let mut bbr = Bbr::new(false, Seed::new(1).rng("bbr"), 1200);
    let mut worst = f64::MAX;
    let mut cuts = 0;
    let mut was_cut = false;
    run_lossy(
        &mut bbr,
        20_000,
        |pn| pn >= 10_000 && pn % 10 == 0,
        |step, bbr| {
            let share = bbr.cwnd as f64 / bbr.target_cwnd() as f64;
            if step >= 12_000 {
                worst = worst.min(share);
            }
            let cut = share < 0.75;
            cuts += u32::from(step >= 9_000 && cut && !was_cut);
            was_cut = cut;
        },
    );
    assert_eq!(bbr.mode(), Mode::ProbeBw);
    assert!(bbr.in_recovery);
    assert_eq!(cuts, 1, "the window was cut {cuts} times");
    assert!(worst >= 0.9, "the window fell to {worst} of its target");
}

/// One loss: the window drops to the flight plus the bytes just
/// acknowledged, only replaces what is acknowledged for a round, and
/// the window from before comes back once a packet sent after the
/// loss is acknowledged.
#[test]
fn one_loss_conserves_packets_for_a_round_then_restores() {
    let mut bbr = Bbr::new(false, Seed::new(1).rng("bbr"), 1200);
    let (mut before, mut cut) = (0, 0);
    let mut during = Vec::new();
    let (mut after, mut target) = (0, 0);
    // Packet 10 000 is lost, declared so at step 10 303.
    run_lossy(
        &mut bbr,
        11_000,
        |pn| pn == 10_000,
        |step, bbr| match step {
            10_302 => before = bbr.cwnd,
            10_303 => cut = bbr.cwnd,
            10_304..10_550 => during.push(bbr.cwnd),
            10_700 => (after, target) = (bbr.cwnd, bbr.target_cwnd()),
            _ => {}
        },
    );
    assert!(before > 0 && cut < before * 3 / 4, "{before} → {cut}");
    // The flight (300 packets less the lost one) plus the packet
    // just acknowledged, less the one sent at that step.
    assert!(cut.abs_diff(300 * 1200) <= 2 * 1200, "{cut}");
    assert!(
        during.iter().all(|&cwnd| cwnd <= cut + 1200),
        "grew in conservation: {:?}",
        during.iter().max()
    );
    assert!(!bbr.in_recovery);
    // (The target may have lost the 5/4 phase's 2 packets since.)
    assert!(after >= before.min(target), "{after} < {before}");
}

#[test]
fn bbr_s_probes_rtt_when_the_rtt_deviates() {
    let t0 = Instant::now();
    let mut bbr = Bbr::new(true, Seed::new(1).rng("bbr"), 1200);
    // RTTs alternating 30 and 110 ms: rttvar far above 20 ms.
    run(&mut bbr, t0, 5_000, |pn| {
        if pn % 2 == 0 { 30_000 } else { 110_000 }
    });
    assert!(bbr.forced_probes() > 0);
    let mut plain = Bbr::new(false, Seed::new(1).rng("bbr"), 1200);
    run(&mut plain, t0, 5_000, |pn| {
        if pn % 2 == 0 { 30_000 } else { 110_000 }
    });
    assert_eq!(plain.forced_probes(), 0);
}

#[test]
fn the_kernel_deviation_rises_by_a_quarter_and_falls_slowly_on_low_samples() {
    let ms = Duration::from_millis;
    // 40 ms above srtt, deviation 8: 8 + (40 - 8)/4 = 16.
    assert_eq!(kernel_mdev(ms(8), ms(30), ms(70)), ms(16));
    // 2 ms off, deviation 8: 8 - 6/4 = 6.5.
    assert_eq!(
        kernel_mdev(ms(8), ms(30), ms(28)),
        Duration::from_micros(6_500)
    );
    // 20 ms below srtt, deviation 4: damped, 4 + 16/32 = 4.5 (RFC 6298: 8).
    assert_eq!(
        kernel_mdev(ms(4), ms(30), ms(10)),
        Duration::from_micros(4_500)
    );
}

#[test]
fn the_probe_bw_phase_is_seeded() {
    let phase = |seed: u64| {
        let mut bbr = Bbr::new(false, Seed::new(seed).rng("bbr"), 1200);
        bbr.enter_probe_bw(Instant::now());
        bbr.cycle_index
    };
    assert_eq!(phase(7), phase(7));
    let phases: std::collections::BTreeSet<usize> = (0..64).map(phase).collect();
    assert!(!phases.contains(&1), "never starts in the 3/4 phase");
    assert!(phases.len() >= 5);
}

/// An application-limited sender in Startup keeps its highest pacing
/// rate while its samples (a small packet now and then) fall; once the
/// pipe is filled, the model alone sets the rate.
#[test]
fn startup_pacing_never_goes_down_before_the_pipe_fills() {
    let t0 = Instant::now();
    let mut bbr = Bbr::new(false, Seed::new(1).rng("bbr"), 1200);
    run(&mut bbr, t0, 400, |_| 30_000);
    let before = bbr.pacing_rate();
    assert_eq!(bbr.mode(), Mode::Startup);
    bbr.btlbw.clear();
    bbr.btlbw.push_back((bbr.round, 2_500.0));
    bbr.hold_startup_pacing();
    assert_eq!(bbr.pacing_rate(), before);
    bbr.filled_pipe = true;
    assert_eq!(bbr.pacing_rate(), (HIGH_GAIN * 2_500.0 * 0.99) as u64);
}

/// An application that pauses (here: one packet per 30 ms round, each
/// app-limited, for 200 rounds) does not lower the bottleneck estimate:
/// as in Linux, app-limited samples below the estimate leave the filter
/// alone, and entries expire only when a sample enters it. (Expiring them
/// on every sample emptied the filter after ten app-limited rounds and
/// the pacing rate fell to zero: a nested tunnel BBR whose end-to-end
/// sender sat in ProbeRTT never recovered.)
#[test]
fn app_limited_rounds_keep_the_bandwidth_estimate() {
    let t0 = Instant::now();
    let mut bbr = Bbr::new(false, Seed::new(1).rng("bbr"), 1200);
    run(&mut bbr, t0, 20_000, |_| 30_000);
    let full = bbr.btlbw();
    assert!((full - 12e6).abs() / 12e6 < 0.02, "{full}");
    let us = |u: u64| t0 + Duration::from_micros(u);
    // Acknowledge what `run` left in flight, then go app-limited.
    for pn in 19_700..20_000 {
        let now = us(pn * 100 + 30_000);
        bbr.handle_ack(now, us(pn * 100), 1200, pn, Duration::ZERO);
        bbr.handle_end_acks(now, 0, pn == 19_999);
    }
    let start = 2_030_000;
    let rounds_before = bbr.round;
    for k in 0..200u64 {
        let (pn, sent) = (20_000 + k, us(start + k * 30_000));
        bbr.handle_sent(sent, 1200, pn);
        let now = sent + Duration::from_millis(30);
        bbr.handle_ack(now, sent, 1200, pn, Duration::ZERO);
        bbr.handle_end_acks(now, 0, true);
    }
    assert!(
        bbr.round >= rounds_before + 150,
        "{} rounds",
        bbr.round - rounds_before
    );
    assert_eq!(
        bbr.btlbw(),
        full,
        "app-limited samples changed the estimate"
    );
    assert!(
        bbr.pacing_rate() as f64 > 0.5 * full,
        "{}",
        bbr.pacing_rate()
    );
}

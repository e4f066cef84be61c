//! The application server's loss detection behind a TECC tunnel (TECC
//! §4.2.5), on numbers: testable without a connection.
//!
//! The tunnel server repairs what its segment loses. The server cannot
//! tell, so without care it resends what the tunnel repairs: the repaired
//! packet's ACK comes late (by the tunnel's retransmission delay T_r,
//! T'_ReTrans in the paper's Figure 6), after the ACKs of the packets sent
//! behind it. The paper's server therefore
//!
//! * adds T_r to its time threshold of 9/8 SRTT, and
//! * starts its packet (reordering) threshold at 3 and raises it "gradually
//!   as spurious retransmission by the server is triggered".
//!
//! **T_r.** The tunnel server declares a packet lost after its own time
//! threshold, 9/8 of its RTT (RFC 9002; noq-proto's default, which the
//! tunnel keeps), or sooner by its packet threshold; the repair then
//! reaches the client about when a packet sent at detection time would.
//! So the repaired packet's ACK comes at most 9/8 of the tunnel's RTT late.
//! The server knows T_t, the tunnel's minimum RTT, from the feedback, and
//! the queueing delay both segments share from its own RTT (srtt − min RTT,
//! the bottleneck being the tunnel's segment): T_r = 9/8 · (T_t + srtt −
//! min RTT). Before the first feedback T_r = 0 (plain 9/8 SRTT).
//!
//! **What the tunnel reports.** That estimate is short when a repair
//! waits for the tunnel's window or is itself lost; then the server's
//! time threshold fires first and it sends the packet again. The tunnel
//! measures its repairs (first send to the repair's acknowledgement, the
//! largest of its latest 64) and reports it in every feedback; T_r is the
//! larger of the two. The packets the server sends during a repair are
//! the reordering that repair causes at the client, so the packet
//! threshold is at least the server's rate × T_r in packets, plus one,
//! beside the adaptive rule below (which by itself stops at its cap while
//! faster flows reorder further).
//!
//! **The packet threshold.** A spurious loss is a packet the server
//! declared lost and then saw acknowledged (noq-proto reports each one,
//! third_party/noq-proto/PEPKIT.md item 8). By default ([`Reordering::Distance`])
//! the threshold becomes the packet's reordering distance plus one, if that
//! is more: the packets acknowledged ahead of it (the largest acknowledged
//! before its ACK, minus its number) plus one, the threshold that would
//! not have declared it lost. This is Chromium's adaptive reordering
//! threshold (quiche `GeneralLossAlgorithm::SpuriousLossDetected`). It
//! grows only when a spurious retransmission happens and only to what was
//! seen, so each new, larger reordering costs one duplicate. The paper
//! does not say by how much it grows; one packet per spurious loss
//! ([`Reordering::Step`]) is the other reading of "gradually", but behind
//! a tunnel the reordering distance is the packets sent during a repair
//! (rate × T_r, tens to hundreds of packets), which that rule reaches only
//! after as many duplicates. Either is capped at `max_packet_threshold`
//! (default 300, Linux's `tcp_max_reordering`). The threshold never
//! shrinks (neither the paper nor Chromium lowers it during a connection).
//!
//! noq-proto's receiver used to take a packet more than 128 numbers
//! behind the largest it received for a duplicate and drop it
//! unacknowledged, so the threshold stopped at 129; it now remembers the
//! latest 8192 (third_party/noq-proto/PEPKIT.md, item 9), and on
//! Figure 13's faster traces the threshold reaches the cap.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The tunnel server's time threshold, in RTTs (RFC 9002, noq-proto's
/// default, which the tunnel's connection keeps).
pub(crate) const TUNNEL_TIME_THRESHOLD: f64 = 9.0 / 8.0;

/// How the server's packet threshold grows on spurious losses
/// (`reordering` in [`super::TeccSettings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reordering {
    /// To the spuriously lost packet's reordering distance plus one
    /// (Chromium's adaptive threshold).
    Distance,
    /// One packet per spurious loss.
    Step,
    /// Never: `packet_threshold` for the whole connection (the endpoint's
    /// setting, as before noq-proto's item 8).
    Fixed,
}

/// One connection's loss thresholds.
#[derive(Clone, Debug, PartialEq)]
pub struct LossRule {
    reordering: Reordering,
    threshold: u32,
    max_threshold: u32,
    repair_delay: bool,
    tunnel_rtt: Option<Duration>,
    /// The repair delay the tunnel reported last.
    reported_repair: Duration,
}

impl LossRule {
    /// Before any spurious loss or feedback: the packet threshold
    /// `initial`, growing by `reordering` up to `max_threshold`; the time
    /// threshold raised by T_r if `repair_delay`.
    pub fn new(
        reordering: Reordering,
        initial: u32,
        max_threshold: u32,
        repair_delay: bool,
    ) -> LossRule {
        LossRule {
            reordering,
            threshold: initial,
            max_threshold: max_threshold.max(initial),
            repair_delay,
            tunnel_rtt: None,
            reported_repair: Duration::ZERO,
        }
    }

    /// Packet `pn`, declared lost, was acknowledged; `largest_acked` was
    /// the largest packet acknowledged before.
    pub fn on_spurious_loss(&mut self, pn: u64, largest_acked: u64) {
        let grown = match self.reordering {
            Reordering::Fixed => return,
            Reordering::Step => u64::from(self.threshold) + 1,
            Reordering::Distance => largest_acked.saturating_sub(pn).saturating_add(1),
        };
        let capped = grown.min(u64::from(self.max_threshold)) as u32;
        self.threshold = self.threshold.max(capped);
    }

    /// The packet threshold the connection should use now (`None`: the
    /// endpoint's own, for [`Reordering::Fixed`]).
    pub fn packet_threshold(&self) -> Option<u32> {
        (self.reordering != Reordering::Fixed).then_some(self.threshold)
    }

    /// The current packet threshold, whether or not it adapts.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }

    /// A feedback said the tunnel's minimum RTT is `t_t` and its recent
    /// repairs took up to `repair` (first send to acknowledgement).
    pub fn on_feedback(&mut self, t_t: Duration, repair: Duration) {
        self.tunnel_rtt = Some(t_t);
        self.reported_repair = repair;
    }

    /// T_r, to add to the time threshold's 9/8 SRTT, given the server's
    /// smoothed and minimum RTT: the larger of 9/8 · (T_t + srtt − min
    /// RTT) and the tunnel's reported repair delay; zero before the first
    /// feedback or without `repair_delay`.
    pub fn repair_delay(&self, srtt: Option<Duration>, min_rtt: Option<Duration>) -> Duration {
        let Some(t_t) = self.tunnel_rtt.filter(|_| self.repair_delay) else {
            return Duration::ZERO;
        };
        let queueing = match (srtt, min_rtt) {
            (Some(srtt), Some(min)) => srtt.saturating_sub(min),
            _ => Duration::ZERO,
        };
        (t_t + queueing)
            .mul_f64(TUNNEL_TIME_THRESHOLD)
            .max(self.reported_repair)
    }

    /// The packet threshold given the server's sending rate (bytes per
    /// second) and MSS, and T_r (from [`LossRule::repair_delay`]): at
    /// least the packets sent during T_r, plus one (`None`: the endpoint's
    /// own, for [`Reordering::Fixed`]).
    pub fn packet_threshold_at(&self, rate: Option<u64>, mss: u64, t_r: Duration) -> Option<u32> {
        let adaptive = self.packet_threshold()?;
        let during_repair = match rate {
            Some(rate) if mss > 0 => {
                (rate as f64 * t_r.as_secs_f64() / mss as f64).ceil() as u64 + 1
            }
            _ => 0,
        };
        Some(adaptive.max(during_repair.min(u64::from(u32::MAX)) as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_grows_to_the_reordering_seen_plus_one_and_never_shrinks() {
        let mut rule = LossRule::new(Reordering::Distance, 3, 300, true);
        assert_eq!(rule.packet_threshold(), Some(3));
        // Packet 100 was deemed lost; 140 had been acknowledged before its
        // ACK: 40 packets overtook it, a threshold of 41 would have waited.
        rule.on_spurious_loss(100, 140);
        assert_eq!(rule.packet_threshold(), Some(41));
        // A smaller reordering leaves it.
        rule.on_spurious_loss(200, 210);
        assert_eq!(rule.packet_threshold(), Some(41));
        rule.on_spurious_loss(300, 359);
        assert_eq!(rule.packet_threshold(), Some(60));
    }

    #[test]
    fn step_grows_by_one_per_spurious_loss() {
        let mut rule = LossRule::new(Reordering::Step, 3, 300, true);
        rule.on_spurious_loss(100, 140);
        rule.on_spurious_loss(200, 201);
        assert_eq!(rule.packet_threshold(), Some(5));
    }

    #[test]
    fn both_stop_at_the_cap() {
        let mut distance = LossRule::new(Reordering::Distance, 3, 300, true);
        distance.on_spurious_loss(0, 5000);
        assert_eq!(distance.packet_threshold(), Some(300));
        let mut step = LossRule::new(Reordering::Step, 3, 5, true);
        for pn in 0..10 {
            step.on_spurious_loss(pn, pn + 20);
        }
        assert_eq!(step.packet_threshold(), Some(5));
    }

    #[test]
    fn the_packet_threshold_covers_what_is_sent_during_a_repair() {
        let rule = LossRule::new(Reordering::Distance, 3, 300, true);
        // 1.25 MB/s of 1250-byte packets for 400 ms: 400 packets, plus one,
        // past the cap of the adaptive rule.
        let t_r = Duration::from_millis(400);
        assert_eq!(
            rule.packet_threshold_at(Some(1_250_000), 1250, t_r),
            Some(401)
        );
        // Slower, the adaptive threshold is the larger.
        assert_eq!(rule.packet_threshold_at(Some(1_250), 1250, t_r), Some(3));
        assert_eq!(rule.packet_threshold_at(None, 1250, t_r), Some(3));
        let fixed = LossRule::new(Reordering::Fixed, 10, 300, false);
        assert_eq!(fixed.packet_threshold_at(Some(1_250_000), 1250, t_r), None);
    }

    #[test]
    fn fixed_leaves_the_endpoint_threshold() {
        let mut rule = LossRule::new(Reordering::Fixed, 10, 300, false);
        rule.on_spurious_loss(100, 140);
        assert_eq!(rule.packet_threshold(), None);
        assert_eq!(rule.threshold(), 10);
    }

    #[test]
    fn repair_delay_is_the_tunnels_loss_delay() {
        let ms = Duration::from_millis;
        let mut rule = LossRule::new(Reordering::Distance, 3, 300, true);
        // Before any feedback: plain 9/8 SRTT.
        assert_eq!(rule.repair_delay(Some(ms(120)), Some(ms(100))), ms(0));
        rule.on_feedback(ms(40), ms(0));
        // 9/8 · (40 ms + 120 ms − 100 ms) = 67.5 ms.
        assert_eq!(
            rule.repair_delay(Some(ms(120)), Some(ms(100))),
            Duration::from_micros(67_500)
        );
        // Without an RTT sample, the tunnel's RTT alone: 45 ms.
        assert_eq!(rule.repair_delay(None, None), ms(45));
        // The tunnel reports repairs of up to 200 ms: that, the larger.
        rule.on_feedback(ms(40), ms(200));
        assert_eq!(rule.repair_delay(Some(ms(120)), Some(ms(100))), ms(200));
        let mut off = LossRule::new(Reordering::Distance, 3, 300, false);
        off.on_feedback(ms(40), ms(200));
        assert_eq!(off.repair_delay(Some(ms(120)), Some(ms(100))), ms(0));
    }
}

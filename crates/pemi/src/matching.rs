//! Matching the replies assigned to one flowlet with its sent packets
//! (§4.2.3): none, one-to-one in order, abandoned when the replies
//! outnumber the packets, and otherwise the dynamic programme of Figure 6
//! that minimises Σ |(t_reply − t_sent) − RTT̂| over order-preserving
//! matchings of every reply to a distinct packet, with the fresh RTT̂
//! rule.
//!
//! Times are integer nanoseconds, costs are sums of them: the result is
//! the same on every machine. A reply cannot answer a packet sent after
//! it, so such pairs are not allowed; if no matching is left (replies
//! assigned before the packets they could answer), the flowlet is not
//! matched at all.

use netsim::Time;
use std::time::Duration;

/// How a flowlet's packets and replies were matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matching {
    /// No replies: nothing to match (case 1).
    NoReplies,
    /// As many replies as packets, matched in order (case 2).
    OneToOne,
    /// More replies than packets: not matched (case 3).
    Abandoned,
    /// Fewer replies than packets, matched by the dynamic programme
    /// (case 4); the matching is in the scratch ([`Scratch::reply_of`]),
    /// so that matching allocates nothing once its tables have grown.
    Partial {
        /// The RTT̂ the matching used.
        rtt: Duration,
    },
    /// Fewer replies than packets, but no order-preserving matching puts
    /// every reply after its packet.
    Infeasible,
}

/// The fresh RTT̂ of §4.2.3: when the replies' width exceeds
/// `ratio_percent` of the packets' (they line up), the gap between the
/// last reply and the last packet it can answer, otherwise `srtt`.
///
/// The paper takes the last packet sent. But a receiver that
/// acknowledges every `threshold`-th packet leaves up to `threshold − 1`
/// packets at the end unanswered, and the last packet may be the one that
/// was lost: the gap is then short by an inter-packet interval or more,
/// and every match shifts by one. So of the last `threshold + 1` packets
/// sent before the last reply, the one whose gap is closest to `srtt` is
/// taken (docs/pemi.md).
pub fn fresh_rtt(
    sent: &[Time],
    replies: &[Time],
    srtt: Duration,
    ratio_percent: u64,
    threshold: usize,
) -> Duration {
    let (Some(&s0), Some(&s1), Some(&r0), Some(&r1)) =
        (sent.first(), sent.last(), replies.first(), replies.last())
    else {
        return srtt;
    };
    let w_sent = (s1 - s0).as_nanos();
    let w_reply = (r1 - r0).as_nanos();
    if w_reply * 100 <= w_sent * u128::from(ratio_percent) {
        return srtt;
    }
    let before = sent.partition_point(|&s| s <= r1);
    (before.saturating_sub(threshold.max(1) + 1)..before)
        .map(|i| r1 - sent[i])
        .min_by_key(|gap| gap.abs_diff(srtt))
        .unwrap_or(srtt)
}

/// Cost of matching reply `r` with packet `s` for RTT̂ `rtt`; `None` if
/// the reply came first.
fn cost(s: Time, r: Time, rtt: Duration) -> Option<u64> {
    (r >= s).then(|| {
        let gap = (r - s).as_nanos() as u64;
        gap.abs_diff(rtt.as_nanos() as u64)
    })
}

/// Reusable tables for [`match_flowlet`]: two rows of the cost table, the
/// choices as bits, and the result.
#[derive(Debug, Default)]
pub struct Scratch {
    row: Vec<u64>,
    previous: Vec<u64>,
    matched: Vec<u64>,
    reply_of: Vec<Option<u16>>,
}

impl Scratch {
    /// After [`Matching::Partial`]: per sent packet, the index of the
    /// reply matched with it.
    pub fn reply_of(&self) -> &[Option<u16>] {
        &self.reply_of
    }
}

/// What the matching takes besides the times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// The smoothed RTT to the receiver.
    pub srtt: Duration,
    /// The fresh-RTT width ratio, in percent.
    pub ratio_percent: u64,
    /// The estimated eliciting threshold.
    pub threshold: usize,
}

/// Matches `replies` (sorted) with `sent` (sorted) as §4.2.3 says.
pub fn match_flowlet(
    sent: &[Time],
    replies: &[Time],
    estimate: Estimate,
    scratch: &mut Scratch,
) -> Matching {
    let (n, m) = (sent.len(), replies.len());
    if m == 0 {
        return Matching::NoReplies;
    }
    if m == n {
        return Matching::OneToOne;
    }
    if m > n || n > usize::from(u16::MAX) {
        return Matching::Abandoned;
    }
    let rtt = fresh_rtt(
        sent,
        replies,
        estimate.srtt,
        estimate.ratio_percent,
        estimate.threshold,
    );
    const INF: u64 = u64::MAX / 4;
    // cost(i, j): the best cost of matching the first j replies with some
    // of the first i packets, kept for rows i - 1 (`previous`) and i
    // (`row`); matched(i, j), bit i · width + j: whether packet i-1 takes
    // reply j-1 in it (ties go to the match, so the later packet wins).
    let width = m + 1;
    let Scratch {
        row,
        previous,
        matched,
        reply_of,
    } = scratch;
    previous.clear();
    previous.resize(width, INF);
    previous[0] = 0;
    row.clear();
    row.resize(width, INF);
    matched.clear();
    matched.resize(((n + 1) * width).div_ceil(64), 0);
    for i in 1..=n {
        row.fill(INF);
        row[0] = 0;
        // Packet i-1 can only take replies j-1 with j ≤ i and with at most
        // n - i replies left for the packets after it.
        let lowest = 1.max((i + m).saturating_sub(n));
        for j in lowest..=m.min(i) {
            let skip = previous[j];
            let take = match cost(sent[i - 1], replies[j - 1], rtt) {
                Some(c) => previous[j - 1].saturating_add(c),
                None => INF,
            };
            if take < INF && take <= skip {
                row[j] = take;
                let bit = i * width + j;
                matched[bit / 64] |= 1 << (bit % 64);
            } else {
                row[j] = skip;
            }
        }
        std::mem::swap(row, previous);
    }
    if previous[m] >= INF {
        return Matching::Infeasible;
    }
    reply_of.clear();
    reply_of.resize(n, None);
    let (mut i, mut j) = (n, m);
    while j > 0 && i > 0 {
        let bit = i * width + j;
        if matched[bit / 64] & (1 << (bit % 64)) != 0 {
            reply_of[i - 1] = Some((j - 1) as u16);
            j -= 1;
        }
        i -= 1;
    }
    Matching::Partial { rtt }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms_times: &[f64]) -> Vec<Time> {
        ms_times
            .iter()
            .map(|&ms| Time::from_nanos((ms * 1e6) as u64))
            .collect()
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn estimate(srtt: Duration, threshold: usize) -> Estimate {
        Estimate {
            srtt,
            ratio_percent: 80,
            threshold,
        }
    }

    #[test]
    fn the_four_cases() {
        let mut s = Scratch::default();
        let sent = at(&[0.0, 1.0, 2.0]);
        assert_eq!(
            match_flowlet(&sent, &[], estimate(ms(10), 1), &mut s),
            Matching::NoReplies
        );
        let three = at(&[10.0, 11.0, 12.0]);
        assert_eq!(
            match_flowlet(&sent, &three, estimate(ms(10), 1), &mut s),
            Matching::OneToOne
        );
        let four = at(&[10.0, 11.0, 12.0, 13.0]);
        assert_eq!(
            match_flowlet(&sent, &four, estimate(ms(10), 1), &mut s),
            Matching::Abandoned
        );
        let one = at(&[11.0]);
        assert!(matches!(
            match_flowlet(&sent, &one, estimate(ms(10), 1), &mut s),
            Matching::Partial { .. }
        ));
    }

    /// Figure 6: five packets 1 ms apart, RTT 10 ms, the second and fourth
    /// lost; the three replies (to packets 0, 2 and 4) carry a little
    /// jitter. The matching finds the packets they answer.
    #[test]
    fn figure_6_partly_replied_flowlet() {
        let sent = at(&[0.0, 1.0, 2.0, 3.0, 4.0]);
        let replies = at(&[10.2, 11.9, 14.1]);
        let mut s = Scratch::default();
        let Matching::Partial { rtt } = match_flowlet(&sent, &replies, estimate(ms(10), 1), &mut s)
        else {
            panic!("a partial matching")
        };
        // W_reply = 3.9 ms > 0.8 · 4 ms: the fresh RTT̂ is 14.1 − 4 ms.
        assert_eq!(rtt, Duration::from_micros(10_100));
        assert_eq!(s.reply_of(), [Some(0), None, Some(1), None, Some(2)]);
    }

    #[test]
    fn the_fresh_rtt_follows_the_flowlet_when_widths_agree() {
        // The path's RTT grew to 14 ms; srtt still says 10 ms.
        let sent = at(&[0.0, 1.0, 2.0, 3.0]);
        let replies = at(&[15.0, 17.0]);
        assert_eq!(fresh_rtt(&sent, &replies, ms(10), 80, 1), ms(10));
        let replies = at(&[14.0, 17.0]);
        assert_eq!(fresh_rtt(&sent, &replies, ms(10), 80, 1), ms(14));
        let mut s = Scratch::default();
        let Matching::Partial { rtt } = match_flowlet(&sent, &replies, estimate(ms(10), 1), &mut s)
        else {
            panic!("a partial matching")
        };
        assert_eq!(rtt, ms(14));
        assert_eq!(s.reply_of(), [Some(0), None, None, Some(1)]);
    }

    /// A receiver acknowledging every second packet leaves the last of an
    /// odd flowlet for its timer: the fresh RTT̂ comes from the packet
    /// before it, not from the unanswered one (which would say 1 ms).
    #[test]
    fn the_fresh_rtt_skips_a_tail_left_to_the_ack_timer() {
        let sent = at(&[0.0, 1.0, 2.0, 3.0, 4.0]);
        let replies = at(&[1.5, 5.0]);
        assert_eq!(fresh_rtt(&sent, &replies, ms(2), 80, 2), ms(2));
        // The last packet lost, the one before answered: 2 ms, not 1.
        assert_eq!(fresh_rtt(&sent, &replies, ms(2), 80, 1), ms(2));
        // The flowlet's RTT drifted to 2.4 ms.
        let replies = at(&[2.0, 5.4]);
        assert_eq!(
            fresh_rtt(&sent, &replies, ms(2), 80, 1),
            Duration::from_micros(2400)
        );
    }

    #[test]
    fn replies_before_their_packets_are_not_matched() {
        let sent = at(&[5.0, 6.0, 7.0]);
        let early = at(&[1.0, 2.0]);
        assert_eq!(
            match_flowlet(&sent, &early, estimate(ms(1), 1), &mut Scratch::default()),
            Matching::Infeasible
        );
        // One early reply: the other is matched after its packet.
        let mixed = at(&[5.5, 8.0]);
        let mut s = Scratch::default();
        let Matching::Partial { .. } = match_flowlet(&sent, &mixed, estimate(ms(1), 1), &mut s)
        else {
            panic!("a partial matching")
        };
        assert_eq!(s.reply_of(), [Some(0), None, Some(1)]);
    }
}

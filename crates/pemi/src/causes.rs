//! Why PEMI's inferences went wrong, from the simulator's ground truth
//! (beyond the paper): every wrong inference (a packet inferred lost that
//! arrived) and every missed loss (a packet the link to the receiver
//! dropped that PEMI did not infer lost) gets one cause, the first of its
//! list that applies.
//!
//! The receiver's *own reply* to a packet is, as in [`crate::accuracy`],
//! the receiver's next packet after the packet arrived; its arrival at
//! PEMI less the packet's departure is the packet's true RTT.
//!
//! A wrong inference:
//!
//! 1. [`Causes::fp_reply_lost`]: its own reply was dropped on the way back
//!    (nothing PEMI sees tells it apart from a loss).
//! 2. [`Causes::fp_rtt_lag`]: its true RTT differed from the estimate the
//!    flowlet was inferred with by more than the flowlet's Δmargin (the
//!    estimate lagging a queue that grows and drains).
//! 3. [`Causes::fp_wrong_flowlet`]: the estimate was within Δmargin, but its
//!    own reply was not assigned to its flowlet (projected to another
//!    flowlet, or excluded: flowlet boundaries that bursty service split or
//!    merged).
//! 4. [`Causes::fp_ack_thinning`]: its own reply was in the flowlet but also
//!    answered the flowlet's next packet (one reply for several, the
//!    receiver's ACK thinning), and the unreplied run was not forgiven
//!    (the eliciting threshold misjudged).
//! 5. [`Causes::fp_matching`]: its own reply was in the flowlet and answered
//!    it alone, and the matching gave it to another packet.
//!
//! A missed loss:
//!
//! 1. [`Causes::miss_calibration`]: its flowlet was dropped by a
//!    calibration reset.
//! 2. [`Causes::miss_no_flowlet`]: in no finished flowlet (abandoned past N
//!    packets, over the flowlet bound, or unfinished at the end).
//! 3. [`Causes::miss_tail_grace`]: inferred, then forgiven by the tail
//!    grace (the receiver sent something when its ACK timer would have).
//! 4. [`Causes::miss_unmatched`]: its flowlet had at least as many replies
//!    as packets (replies of other flowlets projected into it), so nothing
//!    in it was inferred.
//! 5. [`Causes::miss_wrong_reply`]: the matching gave it another packet's
//!    reply.
//! 6. [`Causes::miss_forgiven`]: unmatched, but forgiven as a run shorter
//!    than the eliciting threshold or within `close_interval` of a replied
//!    packet.
//!
//! The simulator's links are FIFO (its jitter keeps packets in order), so
//! reordering causes nothing here.

use crate::matching::{Estimate, Matching, Scratch, match_flowlet};
use crate::stats::{FlowletTrace, Record};
use netsim::{Fate, FateRecord, Time};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// The causes of one run's wrong inferences and missed losses (distinct
/// packets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Causes {
    /// Wrong inferences whose own reply was lost.
    pub fp_reply_lost: u64,
    /// Wrong inferences whose RTT estimate was off by more than Δmargin.
    pub fp_rtt_lag: u64,
    /// Wrong inferences whose own reply went to another flowlet.
    pub fp_wrong_flowlet: u64,
    /// Wrong inferences whose reply also answered the next packet.
    pub fp_ack_thinning: u64,
    /// Wrong inferences whose reply the matching gave to another packet.
    pub fp_matching: u64,
    /// Missed losses in flowlets dropped by a calibration reset.
    pub miss_calibration: u64,
    /// Missed losses in no finished flowlet.
    pub miss_no_flowlet: u64,
    /// Missed losses the tail grace forgave.
    pub miss_tail_grace: u64,
    /// Missed losses in flowlets with as many replies as packets or more.
    pub miss_unmatched: u64,
    /// Missed losses matched with another packet's reply.
    pub miss_wrong_reply: u64,
    /// Missed losses forgiven by the threshold's or close interval's rule.
    pub miss_forgiven: u64,
}

/// Where a packet was last inferred on: its flowlet and its index there.
type Place<'r> = (&'r FlowletTrace, usize);

/// The causes of a run's mistakes from its record and the truth: `data`,
/// the link from PEMI to the receiver, `replies`, the link back (as for
/// [`crate::accuracy`]); `width_ratio_percent` as the engine's.
pub fn causes(
    record: &Record,
    data: &[FateRecord],
    replies: &[FateRecord],
    width_ratio_percent: u64,
) -> Causes {
    let mut first: HashMap<u64, &FateRecord> = HashMap::with_capacity(data.len());
    for fate in data {
        first.entry(fate.fingerprint).or_insert(fate);
    }
    let mut place: HashMap<u64, Place<'_>> = HashMap::new();
    for trace in &record.flowlets {
        for (index, &(_, fingerprint)) in trace.sent.iter().enumerate() {
            place.entry(fingerprint).or_insert((trace, index));
        }
    }
    let inferred: HashSet<u64> = record.inferred.iter().map(|i| i.fingerprint).collect();
    let dropped: HashSet<u64> = record.calibration_drops.iter().copied().collect();
    let mut causes = Causes::default();
    let mut scratch = Scratch::default();
    for &(fingerprint, _) in &record.forwarded {
        let Some(fate) = first.get(&fingerprint) else {
            continue;
        };
        match fate.fate {
            Fate::Deliver { at } if inferred.contains(&fingerprint) => {
                let place = place.get(&fingerprint).copied();
                classify_wrong(&mut causes, replies, fate.offered, at, place);
            }
            Fate::Dropped(_) if !inferred.contains(&fingerprint) => {
                if dropped.contains(&fingerprint) {
                    causes.miss_calibration += 1;
                    continue;
                }
                let Some((trace, index)) = place.get(&fingerprint).copied() else {
                    causes.miss_no_flowlet += 1;
                    continue;
                };
                classify_missed(&mut causes, trace, index, width_ratio_percent, &mut scratch);
            }
            _ => {}
        }
    }
    causes
}

fn classify_wrong(
    causes: &mut Causes,
    replies: &[FateRecord],
    sent: Time,
    arrived: Time,
    place: Option<Place<'_>>,
) {
    let next = replies.partition_point(|r| r.offered < arrived);
    let Some(reply) = replies.get(next) else {
        causes.fp_reply_lost += 1;
        return;
    };
    let Fate::Deliver { at: back } = reply.fate else {
        causes.fp_reply_lost += 1;
        return;
    };
    let Some((trace, index)) = place else {
        causes.fp_wrong_flowlet += 1;
        return;
    };
    if (back - sent).abs_diff(trace.srtt) > trace.margin {
        causes.fp_rtt_lag += 1;
    } else if !trace.replies.contains(&back) {
        causes.fp_wrong_flowlet += 1;
    } else if trace
        .sent
        .get(index + 1)
        .is_some_and(|&(next_sent, _)| next_sent + (arrived - sent) <= reply.offered)
    {
        causes.fp_ack_thinning += 1;
    } else {
        causes.fp_matching += 1;
    }
}

fn classify_missed(
    causes: &mut Causes,
    trace: &FlowletTrace,
    index: usize,
    width_ratio_percent: u64,
    scratch: &mut Scratch,
) {
    if trace.lost.contains(&index) {
        causes.miss_tail_grace += 1;
        return;
    }
    let sent: Vec<Time> = trace.sent.iter().map(|&(at, _)| at).collect();
    let estimate = Estimate {
        srtt: trace.srtt,
        ratio_percent: width_ratio_percent,
        threshold: usize::from(trace.threshold),
    };
    match match_flowlet(&sent, &trace.replies, estimate, scratch) {
        Matching::OneToOne | Matching::Abandoned | Matching::Infeasible => {
            causes.miss_unmatched += 1;
        }
        Matching::Partial { .. } if scratch.reply_of()[index].is_some() => {
            causes.miss_wrong_reply += 1;
        }
        _ => causes.miss_forgiven += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::tests::fate;
    use crate::stats::Inferred;
    use std::time::Duration;

    #[test]
    fn each_mistake_gets_its_cause() {
        let ms = Duration::from_millis;
        let t = Time::from_millis;
        // Packets 1–4 leave at 0–3 ms, 1 ms to the receiver; 2 and 4 are
        // dropped. The receiver answers at 3 ms (after 1; back at 5) and 5
        // ms (dropped on the way back).
        let data = [
            fate(0, 1, Some(1)),
            fate(1, 2, None),
            fate(2, 3, Some(3)),
            fate(3, 4, None),
        ];
        let replies = [fate(1, 100, Some(5)), fate(3, 101, None)];
        // One flowlet of 1–3 with the reply at 5 ms (estimate 5 ms,
        // margin 1 ms), 4 dropped with its flowlet by a calibration
        // reset; PEMI inferred 1 and 3 lost.
        let record = Record {
            forwarded: vec![(1, ms(5)), (2, ms(5)), (3, ms(5)), (4, ms(5))],
            flowlets: vec![FlowletTrace {
                finished: t(20),
                srtt: ms(5),
                margin: ms(1),
                threshold: 2,
                tail_replied: false,
                sent: vec![(t(0), 1), (t(1), 2), (t(2), 3)],
                replies: vec![t(5)],
                lost: vec![0, 2],
                waiting: Vec::new(),
            }],
            inferred: [1, 3]
                .iter()
                .map(|&fingerprint| Inferred {
                    at: t(20),
                    fingerprint,
                    retransmitted: true,
                })
                .collect(),
            calibration_drops: vec![4],
        };
        let c = causes(&record, &data, &replies, 80);
        // 1: its reply (offered at 1, back at 5: RTT 5, as estimated) was in
        // the flowlet, and answered it alone: the matching's mistake.
        assert_eq!(c.fp_matching, 1, "{c:?}");
        // 3: its reply was dropped.
        assert_eq!(c.fp_reply_lost, 1, "{c:?}");
        // 2: matched with 1's reply (the matching's choice).
        assert_eq!(c.miss_wrong_reply + c.miss_forgiven, 1, "{c:?}");
        assert_eq!(c.miss_calibration, 1, "{c:?}");
        // With an estimate of 9 ms, 1's inference is the lagging RTT's.
        let mut lagging = record.clone();
        lagging.flowlets[0].srtt = ms(9);
        let c = causes(&lagging, &data, &replies, 80);
        assert_eq!((c.fp_rtt_lag, c.fp_matching), (1, 0), "{c:?}");
    }
}

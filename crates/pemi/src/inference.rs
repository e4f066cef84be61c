//! Loss inference in a finished flowlet (§4.3.1).
//!
//! Three cases: as many replies as packets or more — nothing lost; no
//! reply — everything lost; some — the packets the matching left without
//! a reply, except (1) runs shorter than the eliciting threshold that a
//! matched reply follows (the receiver acknowledges every second packet:
//! Figure 7's two-pointer scan), (2) packets within `close_interval` of a
//! replied one (one reply may acknowledge a whole batch). The matched
//! pairs give RTT samples (§4.4.2).
//!
//! PEMI's own retransmissions stay in the flowlet (the receiver answers
//! the copy of a packet it lost), but an unanswered copy is neutral: the
//! copy of a packet that had arrived is a duplicate nobody answers, and
//! counting it as unreplied would make its neighbours look lost.
//!
//! One addition, `tail_replied` (docs/pemi.md): a run at the *end* of the
//! flowlet, shorter than the threshold, is followed by no matched reply
//! of its own flowlet — its ACK waits for the receiver's timer or for the
//! next packets — so it is forgiven when the receiver sent anything within
//! `max_ack_delay` of when its reply was due. Until then it is
//! [`Verdict::tail`]: lost only if that reply does not come, decided apart
//! from the rest of the flowlet, whose losses need not wait for it.

use crate::matching::{Estimate, Matching, Scratch, match_flowlet};
use netsim::Time;
use std::time::Duration;

/// What inference needs besides the flowlet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Context {
    /// The smoothed RTT to the receiver.
    pub(crate) srtt: Duration,
    /// The estimated eliciting threshold (1 or 2).
    pub(crate) threshold: usize,
    /// §4.3.1's close interval.
    pub(crate) close_interval: Duration,
    /// The fresh-RTT width ratio, in percent.
    pub(crate) width_ratio_percent: u64,
    /// Whether the receiver sent something when the flowlet's trailing
    /// packets would have been acknowledged by its timer.
    pub(crate) tail_replied: bool,
}

/// The inference on one flowlet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Indices of the packets inferred lost.
    pub(crate) lost: Vec<usize>,
    /// The packets of `lost` that `tail_replied` would forgive (empty when
    /// it is set): the flowlet's trailing run shorter than the threshold,
    /// lost only if the receiver's timer does not answer it.
    pub(crate) tail: Vec<usize>,
    /// RTT samples from matched pairs.
    pub(crate) samples: Vec<Duration>,
    /// Replies that were matched.
    pub(crate) matched: usize,
    /// The flowlet could not be matched (more replies than packets, or
    /// replies before the packets they could answer).
    pub(crate) unmatched: bool,
    /// PEMI's copies the matching paired with a reply, and those it left
    /// without (the evidence of `selfcheck.rs`).
    pub(crate) copies_answered: u32,
    pub(crate) copies_unanswered: u32,
}

/// Reusable lists for [`infer_into`]: once they have grown, inferring a
/// flowlet's losses allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Buffers {
    replied: Vec<bool>,
    keep: Vec<usize>,
    kept_sent: Vec<Time>,
    kept_replied: Vec<bool>,
    graced: Vec<bool>,
    matching: Scratch,
}

/// Infers the losses of a flowlet whose packets were sent at `sent`
/// (`copies[i]`: PEMI's own retransmission) and which was assigned
/// replies arriving at `replies`.
#[cfg(test)]
pub(crate) fn infer(
    sent: &[Time],
    copies: &[bool],
    replies: &[Time],
    context: &Context,
) -> Verdict {
    let mut verdict = Verdict::default();
    infer_into(
        sent,
        copies,
        replies,
        context,
        &mut Buffers::default(),
        &mut verdict,
    );
    verdict
}

/// [`infer`] into `verdict` (emptied first), with `buffers`.
pub(crate) fn infer_into(
    sent: &[Time],
    copies: &[bool],
    replies: &[Time],
    context: &Context,
    buffers: &mut Buffers,
    verdict: &mut Verdict,
) {
    let n = sent.len();
    verdict.lost.clear();
    verdict.tail.clear();
    verdict.samples.clear();
    verdict.matched = 0;
    verdict.unmatched = false;
    verdict.copies_answered = 0;
    verdict.copies_unanswered = 0;
    let estimate = Estimate {
        srtt: context.srtt,
        ratio_percent: context.width_ratio_percent,
        threshold: context.threshold,
    };
    let Buffers {
        replied,
        keep,
        kept_sent,
        kept_replied,
        graced,
        matching,
    } = buffers;
    match match_flowlet(sent, replies, estimate, matching) {
        Matching::NoReplies => {
            verdict.copies_unanswered = count(copies);
            let short = n < context.threshold;
            if !(short && context.tail_replied) {
                verdict.lost.extend((0..n).filter(|&i| !copies[i]));
            }
            if short && !context.tail_replied {
                verdict.tail.extend_from_slice(&verdict.lost);
            }
            return;
        }
        Matching::OneToOne => {
            verdict.matched = n;
            verdict.copies_answered = count(copies);
            verdict.samples.extend(
                sent.iter()
                    .zip(replies)
                    .filter(|(s, r)| r >= s)
                    .map(|(&s, &r)| r - s),
            );
            return;
        }
        Matching::Abandoned | Matching::Infeasible => {
            verdict.unmatched = true;
            return;
        }
        Matching::Partial { .. } => {}
    }
    let reply_of = matching.reply_of();
    replied.clear();
    replied.extend(reply_of.iter().map(Option::is_some));
    for (i, reply) in reply_of.iter().enumerate() {
        if let Some(j) = *reply {
            verdict.matched += 1;
            verdict.samples.push(replies[usize::from(j)] - sent[i]);
        }
        if copies[i] {
            if reply.is_some() {
                verdict.copies_answered += 1;
            } else {
                verdict.copies_unanswered += 1;
            }
        }
    }
    // Unanswered copies are neutral: taken out before the scan.
    keep.clear();
    keep.extend((0..n).filter(|&i| replied[i] || !copies[i]));
    kept_sent.clear();
    kept_sent.extend(keep.iter().map(|&i| sent[i]));
    kept_replied.clear();
    kept_replied.extend(keep.iter().map(|&i| replied[i]));
    graced.clear();
    graced.extend_from_slice(kept_replied);
    forgive(kept_sent, kept_replied, context);
    verdict.lost.extend(
        keep.iter()
            .zip(kept_replied.iter())
            .filter(|(_, r)| !**r)
            .map(|(&i, _)| i),
    );
    if !context.tail_replied && !verdict.lost.is_empty() {
        let with_tail = Context {
            tail_replied: true,
            ..*context
        };
        forgive(kept_sent, graced, &with_tail);
        verdict.tail.extend(
            keep.iter()
                .zip(kept_replied.iter().zip(graced.iter()))
                .filter(|(_, (r, g))| !**r && **g)
                .map(|(&i, _)| i),
        );
    }
}

/// How many of `copies` are set.
fn count(copies: &[bool]) -> u32 {
    copies.iter().filter(|&&c| c).count() as u32
}

/// Both rules of §4.3.1 on the replied flags of packets sent at `sent`.
fn forgive(sent: &[Time], replied: &mut [bool], context: &Context) {
    forgive_short_runs(replied, context);
    forgive_close_packets(sent, replied, context.close_interval);
}

/// Figure 7's two-pointer scan: each maximal unreplied run `[l, r)` shorter
/// than the threshold and followed by a replied packet (or, at the end,
/// with `tail_replied`) is marked replied.
fn forgive_short_runs(replied: &mut [bool], context: &Context) {
    let n = replied.len();
    let mut left = 0;
    while left < n {
        if replied[left] {
            left += 1;
            continue;
        }
        let mut right = left;
        while right < n && !replied[right] {
            right += 1;
        }
        let followed = right < n || context.tail_replied;
        if right - left < context.threshold && followed {
            replied[left..right].fill(true);
        }
        left = right;
    }
}

/// Packets closer than `close` to their neighbours form a batch; a batch
/// with a replied packet is replied as a whole.
fn forgive_close_packets(sent: &[Time], replied: &mut [bool], close: Duration) {
    let n = sent.len();
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && sent[end] - sent[end - 1] < close {
            end += 1;
        }
        if replied[start..end].iter().any(|&r| r) {
            replied[start..end].fill(true);
        }
        start = end;
    }
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

    fn context(threshold: usize) -> Context {
        Context {
            srtt: Duration::from_millis(10),
            threshold,
            close_interval: Duration::from_micros(100),
            width_ratio_percent: 80,
            tail_replied: false,
        }
    }

    fn infer_with(sent: &[Time], replies: &[Time], context: &Context) -> Verdict {
        infer(sent, &vec![false; sent.len()], replies, context)
    }

    #[test]
    fn unanswered_copies_are_neutral() {
        // Packets 0–5, 1 ms apart, ACKed in pairs (1, 3, 5); PEMI's copy of
        // an earlier packet went out at 2.5 ms and was not answered.
        let sent = at(&[0.0, 1.0, 2.0, 2.5, 3.0, 4.0, 5.0]);
        let copies = [false, false, false, true, false, false, false];
        let replies = at(&[11.0, 13.0, 15.0]);
        let v = infer(&sent, &copies, &replies, &context(2));
        assert!(v.lost.is_empty(), "{v:?}");
        // Counted as a packet, the copy would make 2 look lost.
        let v = infer_with(&sent, &replies, &context(2));
        assert_eq!(v.lost, vec![2, 3]);
    }

    #[test]
    fn all_replied_none_replied() {
        let sent = at(&[0.0, 1.0]);
        let v = infer_with(&sent, &at(&[10.0, 11.0]), &context(2));
        assert_eq!(v.lost, Vec::<usize>::new());
        assert_eq!(v.samples, vec![Duration::from_millis(10); 2]);
        let v = infer_with(&sent, &at(&[10.0, 11.0, 12.0]), &context(2));
        assert!(v.lost.is_empty() && v.samples.is_empty() && v.unmatched);
        assert_eq!(infer_with(&sent, &[], &context(2)).lost, vec![0, 1]);
        // A lone packet of a threshold-2 receiver waits for its timer.
        let lone = at(&[0.0]);
        assert_eq!(infer_with(&lone, &[], &context(2)).lost, vec![0]);
        let graced = Context {
            tail_replied: true,
            ..context(2)
        };
        assert!(infer_with(&lone, &[], &graced).lost.is_empty());
        assert_eq!(
            infer_with(
                &lone,
                &[],
                &Context {
                    tail_replied: true,
                    ..context(1)
                }
            )
            .lost,
            vec![0]
        );
    }

    /// Figure 7 (eliciting threshold 2): ten packets 1 ms apart; the
    /// receiver acknowledges packets 1, 3, 6 and 9. Packet 0 and packet 2
    /// are single unreplied packets before a reply — ACK aggregation —
    /// while the runs 4–5 and 7–8 are as long as the threshold: lost.
    #[test]
    fn figure_7_eliciting_threshold() {
        let sent = at(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        let replies = at(&[11.0, 13.0, 16.0, 19.0]);
        let v = infer_with(&sent, &replies, &context(2));
        assert_eq!(v.lost, vec![4, 5, 7, 8]);
        assert_eq!(v.matched, 4);
        assert_eq!(v.samples, vec![Duration::from_millis(10); 4]);
        // A threshold-1 receiver acknowledges every packet: all six lost.
        let v = infer_with(&sent, &replies, &context(1));
        assert_eq!(v.lost, vec![0, 2, 4, 5, 7, 8]);
    }

    #[test]
    fn trailing_runs_need_the_grace_to_be_forgiven() {
        // Eleven packets, replies to 1, 3, 5, 7, 9: packet 10 waits for the
        // receiver's ACK timer.
        let sent: Vec<Time> = (0..11).map(Time::from_millis).collect();
        let replies: Vec<Time> = (0..5).map(|k| Time::from_millis(2 * k + 11)).collect();
        let v = infer_with(&sent, &replies, &context(2));
        assert_eq!((v.lost, v.tail), (vec![10], vec![10]));
        let graced = Context {
            tail_replied: true,
            ..context(2)
        };
        let v = infer_with(&sent, &replies, &graced);
        assert!(v.lost.is_empty() && v.tail.is_empty());
    }

    /// Only the trailing run shorter than the threshold waits for the
    /// grace: a loss earlier in the flowlet, or a trailing run as long as
    /// the threshold, is lost whatever the receiver's timer says.
    #[test]
    fn the_tail_is_only_the_short_trailing_run() {
        // Ten packets 1 ms apart, threshold 2; replies to 1, 3 and 7: the
        // run 4–6 is lost, and so is the trailing run 8–9, as long as the
        // threshold: nothing waits for the grace.
        let sent: Vec<Time> = (0..10).map(Time::from_millis).collect();
        let replies = at(&[11.0, 13.0, 17.0]);
        let v = infer_with(&sent, &replies, &context(2));
        assert_eq!(v.lost, vec![4, 5, 6, 8, 9]);
        assert!(v.tail.is_empty(), "{v:?}");
        // Nine packets: 8 alone trails the reply to 7.
        let v = infer_with(&sent[..9], &replies, &context(2));
        assert_eq!((v.lost, v.tail), (vec![4, 5, 6, 8], vec![8]));
        // A lone packet with no reply, threshold 2: the tail; threshold 1:
        // lost outright.
        let lone = at(&[0.0]);
        let v = infer_with(&lone, &[], &context(2));
        assert_eq!((v.lost, v.tail), (vec![0], vec![0]));
        let v = infer_with(&lone, &[], &context(1));
        assert_eq!((v.lost, v.tail), (vec![0], vec![]));
        // Two packets, no reply, threshold 2: lost outright.
        let v = infer_with(&sent[..2], &[], &context(2));
        assert_eq!((v.lost, v.tail), (vec![0, 1], vec![]));
    }

    #[test]
    fn packets_in_one_batch_share_a_reply() {
        // Packets 0–2 arrive within 50 µs of each other; the receiver
        // answers the batch once.
        let sent = at(&[0.0, 0.05, 0.1, 5.0, 6.0]);
        let replies = at(&[10.1, 16.0]);
        let v = infer_with(&sent, &replies, &context(1));
        assert_eq!(v.lost, vec![3]);
    }
}

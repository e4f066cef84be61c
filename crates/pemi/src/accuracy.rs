//! PEMI's inferences against the simulator's ground truth (beyond the
//! paper, which could only estimate its accuracy from logs).
//!
//! The truth is two recorded links ([`netsim::Simulator::record_fates`]):
//! the one that carries the protected packets from PEMI to the receiver,
//! and the one that carries the receiver's replies back. The engine's
//! [`Record`] says what it forwarded (with its RTT estimate of the time)
//! and what it inferred lost. Packets are matched by fingerprint; a
//! retransmission is byte-identical, so it shares its original's.
//!
//! * A **real loss** is a protected packet the PEMI-to-receiver link
//!   dropped (losses before PEMI are not PEMI's to repair).
//! * **Precision** = inferred ∩ real / inferred; **recall** = inferred ∩
//!   real / real (distinct packets).
//! * A **spurious retransmission** resent a packet that had arrived.
//! * A loss is **repaired before the endpoint** when PEMI's copy arrived
//!   within one base end-to-end RTT of the original leaving PEMI: the
//!   sender cannot have learnt of the loss and resent the data sooner
//!   (its first signal, the receiver's ACK of a later packet, needs a
//!   round trip to it and back).
//! * The **true RTT** at a packet is the PEMI-to-receiver link's delay for
//!   it plus the reply link's delay for the receiver's next packet — the
//!   network round trip the estimate should follow (it leaves out the
//!   receiver's own ACK delay, which no middlebox estimate should carry).

use crate::stats::{PemiStats, Record};
use netsim::{Fate, FateRecord, Time};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

/// What the accuracy report is computed from.
pub struct Truth<'a> {
    /// Fates on the link from PEMI to the protected receiver.
    pub data: &'a [FateRecord],
    /// Fates on the link from the receiver back to PEMI.
    pub replies: &'a [FateRecord],
    /// The path's base end-to-end RTT (propagation).
    pub e2e_rtt: Duration,
}

/// Inference accuracy of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Accuracy {
    /// Protected packets PEMI forwarded.
    pub protected: u64,
    /// Of those, packets the PEMI-to-receiver link dropped.
    pub real_losses: u64,
    /// Distinct packets PEMI inferred lost.
    pub inferred: u64,
    /// Inferred and really lost.
    pub true_positives: u64,
    /// true positives / inferred (`None` without inferences).
    pub precision: Option<f64>,
    /// true positives / real losses (`None` without losses).
    pub recall: Option<f64>,
    /// Retransmissions PEMI sent.
    pub retransmissions: u64,
    /// Retransmissions of packets that had arrived.
    pub spurious: u64,
    /// Real losses whose copy from PEMI arrived within one base
    /// end-to-end RTT of the original.
    pub repaired_early: u64,
    /// repaired early / real losses.
    pub repaired_share: Option<f64>,
    /// (forwarded + retransmitted) / forwarded protected packets.
    pub amplification: f64,
    /// RTT samples compared.
    pub rtt_samples: u64,
    /// Median |estimate − true RTT|, ms.
    pub rtt_error_p50_ms: Option<f64>,
    /// 90th percentile of |estimate − true RTT|, ms.
    pub rtt_error_p90_ms: Option<f64>,
    /// Median queueing delay of the protected packets on the link to the
    /// receiver (its delay above the smallest seen), ms.
    pub queue_delay_p50_ms: Option<f64>,
    /// Its 90th percentile, ms.
    pub queue_delay_p90_ms: Option<f64>,
}

/// Fates by fingerprint: the original's (first offered) and every later
/// copy's.
fn by_fingerprint(fates: &[FateRecord]) -> HashMap<u64, Vec<&FateRecord>> {
    let mut map: HashMap<u64, Vec<&FateRecord>> = HashMap::with_capacity(fates.len());
    for fate in fates {
        map.entry(fate.fingerprint).or_default().push(fate);
    }
    map
}

/// The value at rank ⌈q · n⌉ of sorted `values` (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1].as_secs_f64() * 1e3)
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// The accuracy of a run from its record, counters and truth.
pub fn accuracy(record: &Record, stats: &PemiStats, truth: &Truth<'_>) -> Accuracy {
    let fates = by_fingerprint(truth.data);
    let mut real = Vec::new();
    let mut errors = Vec::new();
    for &(fingerprint, estimate) in &record.forwarded {
        let Some(original) = fates.get(&fingerprint).and_then(|f| f.first()) else {
            continue;
        };
        match original.fate {
            Fate::Dropped(_) => real.push((fingerprint, original.offered)),
            Fate::Deliver { at } => {
                if let Some(rtt) = true_rtt(truth.replies, original.offered, at) {
                    errors.push(estimate.abs_diff(rtt));
                }
            }
        }
    }
    let real_set: HashMap<u64, Time> = real.iter().copied().collect();
    let mut inferred = HashMap::new();
    for entry in &record.inferred {
        let retransmitted = inferred.entry(entry.fingerprint).or_insert(false);
        *retransmitted |= entry.retransmitted;
    }
    let true_positives = inferred
        .keys()
        .filter(|fp| real_set.contains_key(fp))
        .count() as u64;
    let retransmitted: Vec<u64> = inferred
        .iter()
        .filter(|&(_, &r)| r)
        .map(|(&fp, _)| fp)
        .collect();
    let spurious = retransmitted
        .iter()
        .filter(|fp| !real_set.contains_key(fp))
        .count() as u64;
    let repaired_early = real
        .iter()
        .filter(|(fp, sent)| {
            fates.get(fp).is_some_and(|copies| {
                copies.iter().skip(1).any(|copy| match copy.fate {
                    Fate::Deliver { at } => at <= *sent + truth.e2e_rtt,
                    Fate::Dropped(_) => false,
                })
            })
        })
        .count() as u64;
    errors.sort_unstable();
    let mut delays: Vec<Duration> = truth
        .data
        .iter()
        .filter_map(|f| match f.fate {
            Fate::Deliver { at } => Some(at - f.offered),
            Fate::Dropped(_) => None,
        })
        .collect();
    let base = delays.iter().min().copied().unwrap_or_default();
    for delay in &mut delays {
        *delay -= base;
    }
    delays.sort_unstable();
    let real_losses = real.len() as u64;
    let inferred_count = inferred.len() as u64;
    Accuracy {
        protected: stats.protected,
        real_losses,
        inferred: inferred_count,
        true_positives,
        precision: ratio(true_positives, inferred_count),
        recall: ratio(true_positives, real_losses),
        retransmissions: stats.retransmissions,
        spurious,
        repaired_early,
        repaired_share: ratio(repaired_early, real_losses),
        amplification: stats.amplification(),
        rtt_samples: errors.len() as u64,
        rtt_error_p50_ms: quantile(&errors, 0.5),
        rtt_error_p90_ms: quantile(&errors, 0.9),
        queue_delay_p50_ms: quantile(&delays, 0.5),
        queue_delay_p90_ms: quantile(&delays, 0.9),
    }
}

/// The network round trip for a packet that left PEMI at `sent` and
/// reached the receiver at `arrived`: its own delay plus the delay of the
/// receiver's next packet back.
fn true_rtt(replies: &[FateRecord], sent: Time, arrived: Time) -> Option<Duration> {
    let next = replies.partition_point(|r| r.offered < arrived);
    let reply = replies.get(next)?;
    match reply.fate {
        Fate::Deliver { at } => Some((arrived - sent) + (at - reply.offered)),
        Fate::Dropped(_) => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stats::Inferred;
    use netsim::DropCause;

    /// A link fate for the tests: offered at `offered_ms`, delivered at
    /// `delivered_ms` or lost.
    pub(crate) fn fate(offered_ms: u64, fp: u64, delivered_ms: Option<u64>) -> FateRecord {
        FateRecord {
            offered: Time::from_millis(offered_ms),
            fingerprint: fp,
            fate: match delivered_ms {
                Some(ms) => Fate::Deliver {
                    at: Time::from_millis(ms),
                },
                None => Fate::Dropped(DropCause::Loss),
            },
        }
    }

    #[test]
    fn inferences_are_scored_against_the_fates() {
        // Packets 1–4 leave PEMI at 0–3 ms; 2 and 3 are dropped; PEMI
        // resends 2 (arrives at 20 ms) and, spuriously, 4.
        let data = [
            fate(0, 1, Some(1)),
            fate(1, 2, None),
            fate(2, 3, None),
            fate(3, 4, Some(4)),
            fate(19, 2, Some(20)),
            fate(19, 4, Some(20)),
        ];
        let replies = [fate(1, 100, Some(3)), fate(5, 101, Some(7))];
        let ms = Duration::from_millis;
        let record = Record {
            forwarded: vec![(1, ms(4)), (2, ms(4)), (3, ms(4)), (4, ms(4))],
            flowlets: Vec::new(),
            inferred: [(2, true), (4, true), (4, false)]
                .iter()
                .map(|&(fingerprint, retransmitted)| Inferred {
                    at: Time::from_millis(19),
                    fingerprint,
                    retransmitted,
                })
                .collect(),
            calibration_drops: Vec::new(),
        };
        let stats = PemiStats {
            protected: 4,
            retransmissions: 2,
            ..PemiStats::default()
        };
        let truth = Truth {
            data: &data,
            replies: &replies,
            e2e_rtt: ms(50),
        };
        let a = accuracy(&record, &stats, &truth);
        assert_eq!((a.real_losses, a.inferred, a.true_positives), (2, 2, 1));
        assert_eq!((a.precision, a.recall), (Some(0.5), Some(0.5)));
        assert_eq!((a.retransmissions, a.spurious, a.repaired_early), (2, 1, 1));
        assert_eq!(a.amplification, 1.5);
        // Packet 1: 1 ms there, the next reply 2 ms back: 3 ms, estimate 4.
        // Packet 4: 1 ms there, the next reply (offered at 5) 2 ms back.
        assert_eq!(a.rtt_samples, 2);
        assert_eq!(a.rtt_error_p50_ms, Some(1.0));
    }
}

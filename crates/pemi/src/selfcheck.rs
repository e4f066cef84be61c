//! Never do harm (beyond the paper): PEMI's own evidence of its
//! mistakes, and the back-off to forwarding while it says PEMI is wrong.
//!
//! Two pieces of evidence, either of which holds copies back:
//! [`Balance`], the count of inferences against the room the receiver's
//! replies leave for losses (it needs no matching, so it holds where
//! replies come in clumps), and [`SelfCheck`], the share of PEMI's
//! copies that drew a reply.
//!
//! The second's evidence is PEMI's own copies. A copy of a packet that was really
//! lost is news to the receiver, which answers it (at once, even when it
//! thins its ACKs: RFC 9000 §13.2.1 acknowledges an out-of-order packet
//! immediately); a copy of a packet that had arrived is a duplicate that
//! nobody answers. So when a flowlet holding copies is finished, each copy
//! that the matching paired with a reply counts as a right inference and
//! each copy left unanswered as a wrong one. The estimate is an
//! exponentially weighted share of answered copies (gain 1/16, from 1).
//!
//! The rule: once [`MIN_JUDGED`] copies have been judged, an estimate
//! under [`BACK_OFF_BELOW`] backs off — PEMI keeps inferring but, while
//! the RTT samples to the receiver vary (RTTVAR) by more than Δmargin
//! (where its inferences go wrong: docs/results/pemi.md's cause table),
//! sends only every [`PROBE_EVERY`]-th inferred loss,
//! so that evidence keeps coming — and once [`MIN_JUDGED`] more copies
//! have been judged, an estimate at or over [`RETURN_AT`] returns to
//! retransmitting every inference (the 10% cap still applies). With such
//! a queue, at most [`MAX_UNJUDGED`] copies are out without a verdict: a
//! burst of inferences waits for the verdict on its first copies.

/// Copies judged before the estimate can back off.
pub(crate) const MIN_JUDGED: u32 = 32;
/// Back off under this estimated precision, in percent.
pub(crate) const BACK_OFF_BELOW: u32 = 25;
/// Return at or over this estimated precision, in percent.
pub(crate) const RETURN_AT: u32 = 40;
/// While backed off, one inferred loss in this many is retransmitted.
pub(crate) const PROBE_EVERY: u32 = 8;
/// Copies sent and not yet judged beyond which no more are sent: a
/// burst of inferences (a whole flowlet's replies projected elsewhere)
/// waits for the verdict on its first copies.
pub(crate) const MAX_UNJUDGED: u32 = 16;

/// The estimate in 1/65536ths (fixed point, deterministic).
const ONE: u32 = 1 << 16;

/// Packets of finished flowlets in one window of the reply balance.
pub(crate) const BALANCE_WINDOW: u32 = 256;
/// The inferred losses a window of the reply balance tolerates beyond
/// twice the packets its replies leave unaccounted for, in percent of its
/// packets: PEMI's scope is random loss up to 5% (the paper's Figure 11),
/// where its inferences, at a precision of about 0.5, reach 10% of the
/// packets.
pub(crate) const BALANCE_SLACK_PERCENT: u32 = 15;
/// Plausible windows in a row after which copies resume.
pub(crate) const BALANCE_SETTLED: u32 = 4;

/// The reply balance: whether PEMI's inferences are as many as the
/// receiver's replies leave room for.
///
/// A receiver that acknowledges every `threshold`-th packet sends about
/// `packets / threshold` replies, fewer when packets are lost; so the
/// packets its replies do not account for, `packets − threshold ×
/// replies`, bound the losses there can have been (loosely where ACKs are
/// thinned: a gap draws an immediate ACK). Both are counted without the
/// assignment of replies to flowlets — the packets of finished flowlets,
/// every reply received — so where replies land among the flowlets (the
/// clumps a cellular link delivers at one instant) does not move them.
/// A window of [`BALANCE_WINDOW`] packets whose inferred losses exceed
/// twice the unaccounted packets plus [`BALANCE_SLACK_PERCENT`] of its
/// packets is implausible: from then on no copy is sent, until
/// [`BALANCE_SETTLED`] windows in a row are plausible.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Balance {
    packets: u32,
    replies: u32,
    inferred: u32,
    implausible: bool,
    /// Plausible windows in a row while implausible.
    settled: u32,
}

impl Balance {
    /// A reply, wherever it is assigned.
    pub(crate) fn on_reply(&mut self) {
        self.replies = self.replies.saturating_add(1);
    }

    /// A finished flowlet of `packets`, `inferred` of them lost, at the
    /// receiver's eliciting `threshold`.
    pub(crate) fn on_flowlet(&mut self, packets: u32, inferred: u32, threshold: u32) -> Change {
        self.packets = self.packets.saturating_add(packets);
        self.inferred = self.inferred.saturating_add(inferred);
        if self.packets < BALANCE_WINDOW {
            return Change::None;
        }
        let accounted = u64::from(self.replies) * u64::from(threshold);
        let unaccounted = u64::from(self.packets).saturating_sub(accounted);
        let tolerated =
            2 * unaccounted + u64::from(self.packets) * u64::from(BALANCE_SLACK_PERCENT) / 100;
        let plausible = u64::from(self.inferred) <= tolerated;
        let was = self.implausible;
        let settled = if plausible { self.settled + 1 } else { 0 };
        let implausible = !plausible || was && settled < BALANCE_SETTLED;
        *self = Balance {
            implausible,
            settled: if implausible { settled } else { 0 },
            ..Balance::default()
        };
        match (was, implausible) {
            (false, true) => Change::BackedOff,
            (true, false) => Change::Returned,
            _ => Change::None,
        }
    }

    /// Whether the last window's inferences outnumbered what its replies
    /// leave room for.
    pub(crate) fn implausible(&self) -> bool {
        self.implausible
    }
}

/// A connection's estimate of its own precision and its back-off state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SelfCheck {
    estimate: u32,
    judged: u32,
    backed_off: bool,
    /// Inferred losses since the last probe, while backed off.
    since_probe: u32,
    /// Copies judged since it backed off.
    judged_since: u32,
    /// Copies sent and not yet judged.
    unjudged: u32,
}

impl Default for SelfCheck {
    fn default() -> Self {
        SelfCheck {
            estimate: ONE,
            judged: 0,
            backed_off: false,
            since_probe: 0,
            judged_since: 0,
            unjudged: 0,
        }
    }
}

/// What changed with a verdict on copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing.
    None,
    /// It backed off.
    BackedOff,
    /// It returned.
    Returned,
}

impl SelfCheck {
    /// `answered` copies paired with a reply and `unanswered` ones left
    /// without, in a finished flowlet.
    pub(crate) fn on_copies(&mut self, answered: u32, unanswered: u32) -> Change {
        if answered + unanswered == 0 {
            return Change::None;
        }
        for x in std::iter::repeat_n(ONE, answered as usize)
            .chain(std::iter::repeat_n(0, unanswered as usize))
        {
            self.estimate = self.estimate - self.estimate / 16 + x / 16;
        }
        self.unjudged = self.unjudged.saturating_sub(answered + unanswered);
        self.judged = self.judged.saturating_add(answered + unanswered);
        self.judged_since = self.judged_since.saturating_add(answered + unanswered);
        let percent = (u64::from(self.estimate) * 100 / u64::from(ONE)) as u32;
        if !self.backed_off && self.judged >= MIN_JUDGED && percent < BACK_OFF_BELOW {
            self.backed_off = true;
            self.since_probe = 0;
            self.judged_since = 0;
            return Change::BackedOff;
        }
        if self.backed_off && self.judged_since >= MIN_JUDGED && percent >= RETURN_AT {
            self.backed_off = false;
            return Change::Returned;
        }
        Change::None
    }

    /// Whether an inferred loss may be retransmitted now (counted as
    /// sent if so).
    pub(crate) fn allows(&mut self) -> bool {
        if self.unjudged >= MAX_UNJUDGED {
            return false;
        }
        if !self.backed_off {
            self.unjudged += 1;
            return true;
        }
        self.since_probe += 1;
        if self.since_probe >= PROBE_EVERY {
            self.since_probe = 0;
            self.unjudged += 1;
            true
        } else {
            false
        }
    }

    /// `copies` that will never be judged (their flowlet was given up or
    /// could not be matched) are forgotten.
    pub(crate) fn forget(&mut self, copies: u32) {
        self.unjudged = self.unjudged.saturating_sub(copies);
    }

    /// Whether it is backed off.
    #[cfg(test)]
    pub(crate) fn backed_off(&self) -> bool {
        self.backed_off
    }

    /// The estimated precision, in percent.
    #[cfg(test)]
    pub(crate) fn percent(&self) -> u32 {
        (u64::from(self.estimate) * 100 / u64::from(ONE)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copies answered half the time (the steady link's precision of
    /// 0.5) never back off; copies nobody answers back off after the
    /// minimum, retransmit one loss in eight while backed off, and a run
    /// of answered copies brings it back.
    #[test]
    fn it_backs_off_on_unanswered_copies_and_returns_when_they_are_answered() {
        let mut check = SelfCheck::default();
        for _ in 0..200 {
            assert_eq!(check.on_copies(1, 1), Change::None);
            assert!(check.allows());
        }
        assert!((40..=60).contains(&check.percent()), "{}", check.percent());

        let mut check = SelfCheck::default();
        let mut changes = Vec::new();
        for _ in 0..MIN_JUDGED {
            changes.push(check.on_copies(0, 1));
        }
        // The estimate fell under 25% before 32 copies were judged; it
        // backs off at the 32nd.
        assert_eq!(
            changes.iter().filter(|&&c| c == Change::BackedOff).count(),
            1
        );
        assert_eq!(changes.last(), Some(&Change::BackedOff));
        assert!(check.backed_off());
        let allowed = (0..64).filter(|_| check.allows()).count();
        assert_eq!(allowed, 64 / PROBE_EVERY as usize);
        // Answered probes: back once 32 more were judged and the estimate
        // is at least 40%.
        let mut answered = 0;
        while check.on_copies(1, 0) != Change::Returned {
            answered += 1;
            assert!(answered < 40, "did not return");
        }
        assert!(!check.backed_off() && check.allows());
        assert!(check.percent() >= RETURN_AT);
    }

    /// The reply balance: a window whose inferences the replies leave
    /// room for stays plausible (5% loss with every-packet ACKs, PEMI
    /// inferring twice the real losses); a window of inferences that
    /// the replies account for (a receiver answering every second packet
    /// of a flow PEMI says lost a third of) is implausible at once, and
    /// copies resume only after four plausible windows in a row.
    #[test]
    fn the_reply_balance_backs_off_on_inferences_the_replies_rule_out() {
        let window = |balance: &mut Balance, replies: u32, inferred: u32, threshold: u32| {
            for _ in 0..replies {
                balance.on_reply();
            }
            balance.on_flowlet(BALANCE_WINDOW, inferred, threshold)
        };
        let mut balance = Balance::default();
        // 256 packets, 13 lost, 243 replies; 26 inferred.
        assert_eq!(window(&mut balance, 243, 26, 1), Change::None);
        assert!(!balance.implausible());
        // Below the window nothing is decided.
        assert_eq!(balance.on_flowlet(100, 100, 2), Change::None);
        assert!(!balance.implausible());
        let mut balance = Balance::default();
        assert_eq!(window(&mut balance, 128, 85, 2), Change::BackedOff);
        assert!(balance.implausible());
        for _ in 1..BALANCE_SETTLED {
            assert_eq!(window(&mut balance, 128, 0, 2), Change::None);
            assert!(balance.implausible());
        }
        assert_eq!(window(&mut balance, 128, 0, 2), Change::Returned);
        assert!(!balance.implausible());
        // One implausible window among plausible ones starts the count
        // again.
        assert_eq!(window(&mut balance, 128, 85, 2), Change::BackedOff);
        window(&mut balance, 128, 0, 2);
        window(&mut balance, 128, 85, 2);
        for _ in 1..BALANCE_SETTLED {
            window(&mut balance, 128, 0, 2);
        }
        assert!(balance.implausible());
        // The slack: 15% of a window's packets inferred where the replies
        // account for all of them is plausible, 16% is not.
        let mut balance = Balance::default();
        assert_eq!(window(&mut balance, 128, 38, 2), Change::None);
        assert_eq!(window(&mut balance, 128, 41, 2), Change::BackedOff);
    }

    /// A burst of inferences sends at most 16 copies before a verdict.
    #[test]
    fn a_burst_waits_for_the_verdict_on_its_first_copies() {
        let mut check = SelfCheck::default();
        let sent = (0..40).filter(|_| check.allows()).count();
        assert_eq!(sent, MAX_UNJUDGED as usize);
        // Four judged (answered): four more may go.
        check.on_copies(4, 0);
        assert_eq!((0..40).filter(|_| check.allows()).count(), 4);
        check.forget(16);
        assert!(check.allows());
    }
}

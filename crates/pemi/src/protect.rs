//! Protecting one connection's dominant direction: flowlets recorded as
//! packets pass (§4.2.1), replies assigned to them (§4.2.2), finished
//! flowlets matched and their losses inferred (§4.2.3, §4.3.1), lost
//! packets retransmitted once and at once, byte-identical (§4.3.2), RTT
//! samples taken (§4.4.2), and the rate enforced (§4.5).
//!
//! A flowlet is finished when a reply is assigned to a later one, or when
//! no reply can reach it any more: its last packet + RTT + Δmargin (the
//! exclusion window's end) if it is the only one (and no packet can join
//! it any more), plus the tail grace if later flowlets could still take a
//! late reply of its own. Its losses
//! are retransmitted then, except a trailing run shorter than the
//! eliciting threshold while the tail grace may still forgive it: that
//! waits until the grace is over ([`Tail`]).

use crate::Side;
use crate::config::PemiConfig;
use crate::copa::{Copa, Enforcer, Level};
use crate::flowlet::{Flowlet, Interval, Pool, Sent};
use crate::inference::{Buffers, Context, Verdict, infer_into};
use crate::rtt::RttEstimate;
use crate::selfcheck::{Balance, Change, SelfCheck};
use crate::spin::Spin;
use crate::stats::{FlowletTrace, Inferred, PemiStats, Record};
use bytes::Bytes;
use netsim::{Datagram, Time, Transmit};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// Recent reply times kept for the tail grace.
const RECENT_REPLIES: usize = 64;

/// What the engine lends a connection while it handles an event.
pub(crate) struct Env<'a> {
    pub(crate) config: &'a PemiConfig,
    pub(crate) now: Time,
    pub(crate) out: &'a mut VecDeque<Transmit>,
    pub(crate) stats: &'a mut PemiStats,
    /// Bytes buffered across all connections.
    pub(crate) buffered: &'a mut usize,
    pub(crate) record: &'a mut Option<Record>,
    pub(crate) work: &'a mut Work,
}

/// The engine's reusable storage, lent with [`Env`]: the flowlets' lists
/// and what a finished flowlet's inference needs, so that a connection in
/// steady state allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Work {
    pool: Pool,
    times: Vec<Time>,
    copies: Vec<bool>,
    verdict: Verdict,
    buffers: Buffers,
}

impl Env<'_> {
    fn unbuffer(&mut self, bytes: usize) {
        *self.buffered = self.buffered.saturating_sub(bytes);
        self.stats.buffered = *self.buffered as u64;
    }
}

/// The connection as protection sees it.
pub(crate) struct Path<'a> {
    /// The RTT to the receiver (the end that is not the sender).
    pub(crate) rtt: &'a mut RttEstimate,
    /// The end-to-end smoothed RTT.
    pub(crate) e2e: Duration,
    /// The protected sender's address.
    pub(crate) sender: SocketAddr,
    /// The receiver's address.
    pub(crate) receiver: SocketAddr,
}

impl Path<'_> {
    fn srtt(&self) -> Duration {
        self.rtt.srtt().unwrap_or(self.e2e / 2)
    }
}

/// The reply/sent ratio of a connection's protected packets, counted
/// from the end of its first window (the handshake's and slow start's
/// extra replies left out), as the paper keeps it: for the whole
/// connection.
#[derive(Clone, Copy, Debug, Default)]
struct ReplyRatio {
    /// (sent, replies) in the first window, which does not count.
    first: (u64, u64),
    /// (sent, replies) since.
    counted: Option<(u64, u64)>,
}

impl ReplyRatio {
    fn on_sent(&mut self, window: u64) {
        match &mut self.counted {
            Some(counted) => counted.0 += 1,
            None => {
                self.first.0 += 1;
                if self.first.0 >= window.max(1) {
                    self.counted = Some((0, 0));
                }
            }
        }
    }

    fn on_reply(&mut self) {
        match &mut self.counted {
            Some(counted) => counted.1 += 1,
            None => self.first.1 += 1,
        }
    }

    /// 1 above `percent` replies per sent packet, else 2 (also until the
    /// first window is over and a packet has been counted).
    fn threshold(&self, percent: u64) -> usize {
        match self.counted {
            Some((sent, replies)) if sent > 0 && replies * 100 > sent * percent => 1,
            _ => 2,
        }
    }
}

/// A finished flowlet's trailing packet whose reply is the receiver's ACK
/// timer's: lost unless the receiver sends anything within `[from,
/// until]`, decided at `until` (the tail grace, docs/pemi.md). A run
/// shorter than the threshold (at most 2) is one packet.
#[derive(Clone, Debug)]
struct Tail {
    from: Time,
    until: Time,
    packet: Sent,
}

/// A reply held back behind later ones.
#[derive(Clone, Debug)]
struct Held {
    datagram: Datagram,
    /// Later replies still to pass it.
    remaining: u32,
    /// It leaves by then whatever passes.
    deadline: Time,
}

/// The protection state of a connection's dominant direction.
///
/// Laid out for the cache (`repr(C)`, declaration order; 64-byte
/// aligned): a datagram arriving after the engine's data left the cache
/// fetches each line it touches, so the fields every packet reads or
/// writes are packed into six lines (counted with
/// `examples/cold_lines.rs`) and the rest fill the lines between.
/// `Copa` keeps its per-packet field last, and `Spin` its first, and a
/// held reply's presence is read at the start of `held`.
#[repr(C, align(64))]
pub(crate) struct Protection {
    // Line 1: Copa's `last_down` at its end, then `sender`.
    copa: Copa,
    pub(crate) sender: Side,
    // Line 2.
    interval: Interval,
    /// The connection counts as active (worth probing) until then.
    pub(crate) active_until: Time,
    /// Protected packets forwarded (originals) and replies.
    pub(crate) sent: u64,
    pub(crate) replies: u64,
    buffered: usize,
    // Line 3.
    ratio: ReplyRatio,
    pub(crate) next_probe: Option<Time>,
    /// PEMI's retransmissions.
    pub(crate) resent: u64,
    // Line 4.
    flowlets: VecDeque<Flowlet>,
    /// Trailing packets of finished flowlets waiting for the tail grace,
    /// in order of `until` (at most `max_flowlets`).
    tails: VecDeque<Tail>,
    // Line 5: the enforcer, then the spin values seen (`Spin`'s head).
    enforcer: Enforcer,
    pub(crate) spin: Spin,
    // Line 6, after `Spin`'s rarely read part: `recent`, then `held`'s
    // start.
    recent: VecDeque<Time>,
    held: Option<Held>,
    /// Its own estimate of its precision (never do harm).
    check: SelfCheck,
    /// The reply balance (`selfcheck.rs`).
    balance: Balance,
}

impl Protection {
    /// A new protection of `sender`'s packets, on the heap. Not inlined:
    /// built in place in its caller, its 64-byte alignment would realign
    /// that caller's stack frame, which every datagram goes through.
    #[inline(never)]
    pub(crate) fn boxed(sender: Side, config: &PemiConfig) -> Box<Protection> {
        Box::new(Protection {
            sender,
            flowlets: VecDeque::new(),
            interval: Interval::default(),
            sent: 0,
            replies: 0,
            ratio: ReplyRatio::default(),
            resent: 0,
            buffered: 0,
            recent: VecDeque::new(),
            tails: VecDeque::new(),
            copa: Copa::new(config.initial_cwnd, config.copa_delta_percent),
            enforcer: Enforcer::default(),
            held: None,
            spin: Spin::default(),
            next_probe: None,
            active_until: Time::ZERO,
            check: SelfCheck::default(),
            balance: Balance::default(),
        })
    }

    /// The eliciting threshold the reply ratio implies (appendix A).
    pub(crate) fn threshold(&self, config: &PemiConfig) -> usize {
        self.ratio.threshold(config.threshold_ratio_percent)
    }

    /// Flowlets not yet finished.
    pub(crate) fn active_flowlets(&self) -> usize {
        self.flowlets.len()
    }

    /// The Copa window, in packets.
    pub(crate) fn cwnd(&self) -> u64 {
        self.copa.cwnd_packets()
    }

    fn timeout(&self, config: &PemiConfig, path: &Path<'_>) -> Duration {
        self.interval.timeout(config.alpha, path.srtt())
    }

    /// Counts `bytes` newly buffered.
    fn buffer(&mut self, env: &mut Env<'_>, bytes: usize) {
        self.buffered += bytes;
        *env.buffered += bytes;
        env.stats.buffered = *env.buffered as u64;
        env.stats.buffered_peak = env.stats.buffered_peak.max(env.stats.buffered);
    }

    /// Counts `bytes` freed.
    fn unbuffer(&mut self, env: &mut Env<'_>, bytes: usize) {
        self.buffered = self.buffered.saturating_sub(bytes);
        env.unbuffer(bytes);
    }

    /// Frees every buffer (the connection is forgotten or its direction
    /// changed).
    pub(crate) fn release(&mut self, env: &mut Env<'_>) {
        env.unbuffer(self.buffered);
        self.buffered = 0;
        for flowlet in self.flowlets.drain(..) {
            env.work.pool.recycle(flowlet);
        }
        self.tails.clear();
        if let Some(held) = self.held.take() {
            env.out.push_back(Transmit::at(env.now, held.datagram));
        }
    }

    /// A protected packet: recorded, buffered if there is room, forwarded
    /// at once.
    pub(crate) fn on_sent(&mut self, env: &mut Env<'_>, path: &mut Path<'_>, datagram: Datagram) {
        let now = env.now;
        self.active_until = now + path.e2e;
        self.interval.on_packet(now, path.e2e);
        self.sent += 1;
        self.ratio.on_sent(env.config.threshold_window);
        env.stats.protected += 1;
        self.enforcer.on_sent(false);
        let period = path.e2e.max(Duration::from_millis(10));
        let target = if self.copa.congested(now, 2 * period) {
            self.copa.target_pps(path.rtt.min().unwrap_or(path.srtt()))
        } else {
            u64::MAX
        };
        self.enforcer.tick(now, period, target);
        let len = datagram.payload.len();
        let fits = *env.buffered + len <= env.config.buffer_total
            && self.buffered + len <= env.config.buffer_per_connection;
        let fingerprint = if env.config.record {
            datagram.fingerprint()
        } else {
            0
        };
        if let Some(record) = env.record.as_mut() {
            record.forwarded(fingerprint, path.srtt());
        }
        let packet = Sent {
            at: now,
            copy: fits.then(|| datagram.payload.clone()),
            ttl: datagram.ttl,
            resent: false,
            retransmission: false,
            fingerprint,
        };
        self.record(env, path, packet);
        env.out.push_back(Transmit::at(now, datagram));
    }

    /// Adds a packet to the last flowlet or starts one.
    fn record(&mut self, env: &mut Env<'_>, path: &Path<'_>, packet: Sent) {
        let timeout = self.timeout(env.config, path);
        let max = env.config.max_flowlet;
        let joins = self
            .flowlets
            .back()
            .is_some_and(|last| packet.at - last.last <= timeout);
        if joins {
            let last = self.flowlets.back_mut().expect("checked");
            let change = last.push(packet, max, &mut env.work.pool);
            if change < 0 {
                env.stats.flowlets_abandoned += 1;
                self.unbuffer(env, change.unsigned_abs());
            } else {
                self.buffer(env, change.unsigned_abs());
            }
            return;
        }
        env.stats.flowlets += 1;
        let flowlet = Flowlet::new(packet, &mut env.work.pool);
        self.buffer(env, flowlet.buffered);
        self.flowlets.push_back(flowlet);
        if self.flowlets.len() > env.config.max_flowlets
            && let Some(oldest) = self.flowlets.pop_front()
        {
            env.stats.flowlets_dropped += 1;
            self.unbuffer(env, oldest.buffered);
            env.work.pool.recycle(oldest);
        }
    }

    /// A reply: assigned to a flowlet (finishing the earlier ones), then
    /// forwarded — at once, or slowed if the rate enforcement says so.
    pub(crate) fn on_reply(&mut self, env: &mut Env<'_>, path: &mut Path<'_>, datagram: Datagram) {
        let now = env.now;
        self.active_until = now + path.e2e;
        self.replies += 1;
        self.ratio.on_reply();
        self.balance.on_reply();
        env.stats.replies += 1;
        if self.recent.len() == RECENT_REPLIES {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        self.assign(env, path);
        self.forward_reply(env, path, datagram);
    }

    /// §4.2.2: the flowlet nearest to t_reply − RTT, within the exclusion
    /// window.
    fn assign(&mut self, env: &mut Env<'_>, path: &mut Path<'_>) {
        let (Some(front), Some(back)) = (self.flowlets.front(), self.flowlets.back()) else {
            return;
        };
        let now = env.now;
        let rtt = path.srtt();
        let margin = env.config.margin(self.timeout(env.config, path));
        let start = front.first + rtt - margin;
        let end = back.last + rtt + margin;
        if now < start || now > end {
            env.stats.replies_excluded += 1;
            return;
        }
        let projected = now - rtt;
        let mut nearest = 0;
        let mut best = Duration::MAX;
        for (k, flowlet) in self.flowlets.iter().enumerate() {
            let distance = flowlet.distance(projected);
            if distance < best {
                best = distance;
                nearest = k;
            }
        }
        env.stats.replies_assigned += 1;
        let flowlet = &mut self.flowlets[nearest];
        if flowlet.replies.len() <= 2 * env.config.max_flowlet {
            if flowlet.replies.capacity() == 0 {
                flowlet.replies = env.work.pool.replies();
            }
            flowlet.replies.push(now);
        }
        for _ in 0..nearest {
            if let Some(done) = self.flowlets.pop_front() {
                self.finish(env, path, done);
            }
        }
    }

    /// Forwards a reply as the enforcement allows.
    fn forward_reply(&mut self, env: &mut Env<'_>, path: &Path<'_>, datagram: Datagram) {
        let now = env.now;
        let action = self.enforcer.reply_action(env.config.enforcement, path.e2e);
        let at = match action.delay {
            Some(delay) => {
                env.stats.replies_delayed += 1;
                now + delay
            }
            None => now,
        };
        match (&mut self.held, action.reorder) {
            (None, Some(later)) => {
                env.stats.replies_reordered += 1;
                self.held = Some(Held {
                    datagram,
                    remaining: later,
                    deadline: at + path.e2e,
                });
            }
            (Some(held), _) => {
                env.out.push_back(Transmit::at(at, datagram));
                held.remaining = held.remaining.saturating_sub(1);
                if held.remaining == 0 {
                    let held = self.held.take().expect("present");
                    env.out.push_back(Transmit::at(at, held.datagram));
                }
            }
            (None, None) => env.out.push_back(Transmit::at(at, datagram)),
        }
    }

    /// When the front flowlet is finished by time, with the current RTT.
    /// Alone, at the end of the exclusion window, or once no packet can
    /// join it any more if that is later: from then on every reply is
    /// excluded (§4.2.2) until a new flowlet starts, so its inference
    /// cannot change and its losses are due (§4.3.2: at once). With later
    /// flowlets a late reply may still be assigned to it (the paper
    /// finishes it when one is assigned to a later flowlet): the window's
    /// end plus the tail grace.
    fn front_deadline(&self, config: &PemiConfig, path: &Path<'_>) -> Option<Time> {
        let front = self.flowlets.front()?;
        let timeout = self.timeout(config, path);
        let window_end = front.last + path.srtt() + config.margin(timeout);
        Some(match self.flowlets.len() {
            1 => window_end.max(front.last + timeout),
            _ => window_end + config.tail_grace.unwrap_or_default(),
        })
    }

    /// The next time [`Protection::on_timer`] has work.
    pub(crate) fn next_wake(&self, config: &PemiConfig, path: &Path<'_>) -> Option<Time> {
        let flowlet = self.front_deadline(config, path);
        let held = self.held.as_ref().map(|h| h.deadline);
        let tail = self.tails.front().map(|t| t.until);
        let probe = self.next_probe.filter(|&at| at <= self.active_until);
        [flowlet, held, tail, probe].into_iter().flatten().min()
    }

    /// Finishes the flowlets no reply can reach any more, decides the
    /// trailing packets whose grace is over and releases a held reply
    /// whose time is up.
    pub(crate) fn on_timer(&mut self, env: &mut Env<'_>, path: &mut Path<'_>) {
        while self
            .front_deadline(env.config, path)
            .is_some_and(|deadline| deadline <= env.now)
        {
            if let Some(done) = self.flowlets.pop_front() {
                self.finish(env, path, done);
            }
        }
        while self.tails.front().is_some_and(|t| t.until <= env.now) {
            if let Some(tail) = self.tails.pop_front() {
                self.decide_tail(env, path, tail);
            }
        }
        if self.held.as_ref().is_some_and(|h| h.deadline <= env.now)
            && let Some(held) = self.held.take()
        {
            env.out.push_back(Transmit::at(env.now, held.datagram));
        }
    }

    /// When `flowlet`'s trailing packets would be acknowledged by the
    /// receiver's ACK timer: after the flowlet's own replies, from its
    /// last packet + RTT − Δmargin to + Δmargin + the grace (`None`
    /// without a grace).
    fn tail_window(
        &self,
        config: &PemiConfig,
        path: &Path<'_>,
        flowlet: &Flowlet,
    ) -> Option<(Time, Time)> {
        let grace = config.tail_grace?;
        let rtt = path.srtt();
        let margin = config.margin(self.timeout(config, path));
        let due = flowlet.last + rtt;
        let from = due - margin;
        let from = flowlet
            .replies
            .last()
            .map_or(from, |&r| from.max(r + Duration::from_nanos(1)));
        Some((from, due + margin + grace))
    }

    /// Whether the receiver sent anything from `from` to `until`.
    fn replied_within(&self, (from, until): (Time, Time)) -> bool {
        self.recent.iter().any(|&t| t >= from && t <= until)
    }

    /// A trailing packet whose grace is over: forgiven if the receiver
    /// answered in its window, else lost and retransmitted.
    fn decide_tail(&mut self, env: &mut Env<'_>, path: &mut Path<'_>, mut tail: Tail) {
        let bytes = tail.packet.copy.as_ref().map_or(0, Bytes::len);
        if !self.replied_within((tail.from, tail.until)) {
            self.lost(env, path, &mut tail.packet);
        }
        self.unbuffer(env, bytes);
    }

    /// A packet inferred lost: counted, retransmitted if the rules allow,
    /// recorded.
    fn lost(&mut self, env: &mut Env<'_>, path: &Path<'_>, packet: &mut Sent) {
        env.stats.inferred_lost += 1;
        let retransmitted = self.retransmit(env, path, packet);
        if let Some(record) = env.record.as_mut() {
            record.inferred(Inferred {
                at: env.now,
                fingerprint: packet.fingerprint,
                retransmitted,
            });
        }
    }

    /// §4.3: a finished flowlet's inference, retransmissions and samples.
    fn finish(&mut self, env: &mut Env<'_>, path: &mut Path<'_>, mut flowlet: Flowlet) {
        self.unbuffer(env, flowlet.buffered);
        if flowlet.abandoned {
            // Its copies (if any) will not be judged.
            self.check.forget(u32::MAX);
            env.work.pool.recycle(flowlet);
            return;
        }
        let window = self.tail_window(env.config, path, &flowlet);
        let context = Context {
            srtt: path.srtt(),
            threshold: self.threshold(env.config),
            close_interval: env.config.close_interval,
            width_ratio_percent: env.config.width_ratio_percent,
            tail_replied: window.is_some_and(|w| self.replied_within(w)),
        };
        let mut verdict = std::mem::take(&mut env.work.verdict);
        let Work {
            times,
            copies,
            buffers,
            ..
        } = &mut *env.work;
        times.clear();
        times.extend(flowlet.sent.iter().map(|s| s.at));
        copies.clear();
        copies.extend(flowlet.sent.iter().map(|s| s.retransmission));
        infer_into(
            times,
            copies,
            &flowlet.replies,
            &context,
            buffers,
            &mut verdict,
        );
        let copies_in = copies.iter().filter(|&&c| c).count() as u32;
        // The trailing run the grace may still forgive waits for it; the
        // flowlet's other losses go now.
        let wait = window.filter(|&(_, until)| env.now < until && !verdict.tail.is_empty());
        if wait.is_none() {
            verdict.tail.clear();
        }
        if let Some(record) = env.record.as_mut() {
            record.flowlet(FlowletTrace {
                finished: env.now,
                srtt: context.srtt,
                margin: env.config.margin(self.timeout(env.config, path)),
                threshold: context.threshold as u8,
                tail_replied: context.tail_replied,
                sent: flowlet.sent.iter().map(|s| (s.at, s.fingerprint)).collect(),
                replies: flowlet.replies.clone(),
                lost: verdict.lost.clone(),
                waiting: verdict.tail.clone(),
            });
        }
        if verdict.unmatched {
            env.stats.flowlets_unmatched += 1;
        }
        let judged = verdict.copies_answered + verdict.copies_unanswered;
        self.check.forget(copies_in.saturating_sub(judged));
        env.stats.copies_answered += u64::from(verdict.copies_answered);
        env.stats.copies_unanswered += u64::from(verdict.copies_unanswered);
        let changes = [
            self.check
                .on_copies(verdict.copies_answered, verdict.copies_unanswered),
            self.balance.on_flowlet(
                flowlet.sent.len() as u32,
                verdict.lost.len() as u32,
                context.threshold as u32,
            ),
        ];
        for change in changes {
            match change {
                Change::BackedOff => env.stats.backoffs += 1,
                Change::Returned => env.stats.returns += 1,
                Change::None => {}
            }
        }
        for &sample in &verdict.samples {
            self.rtt_sample(env, path, sample);
        }
        for &index in &verdict.lost {
            let packet = &mut flowlet.sent[index];
            if let Some((from, until)) = wait.filter(|_| verdict.tail.contains(&index)) {
                let bytes = packet.copy.as_ref().map_or(0, Bytes::len);
                self.buffer(env, bytes);
                let at = self.tails.partition_point(|t| t.until <= until);
                let packet = packet.clone();
                self.tails.insert(
                    at,
                    Tail {
                        from,
                        until,
                        packet,
                    },
                );
                if self.tails.len() > env.config.max_flowlets
                    && let Some(oldest) = self.tails.pop_front()
                {
                    self.decide_tail(env, path, oldest);
                }
                continue;
            }
            self.lost(env, path, packet);
        }
        env.work.verdict = verdict;
        env.work.pool.recycle(flowlet);
    }

    /// A matched pair's RTT sample, for the estimate and the controller.
    fn rtt_sample(&mut self, env: &mut Env<'_>, path: &mut Path<'_>, sample: Duration) {
        env.stats.rtt_samples += 1;
        path.rtt.sample(env.now, sample, env.config.min_rtt_window);
        if env.config.congestion_control {
            let srtt = path.srtt();
            let min = path.rtt.min().unwrap_or(srtt);
            self.copa.on_sample(env.now, sample, srtt, min);
        }
    }

    /// Retransmits `packet` once if the rules allow (§4.3.2, §4.5.2,
    /// §4.6); returns whether it did.
    fn retransmit(&mut self, env: &mut Env<'_>, path: &Path<'_>, packet: &mut Sent) -> bool {
        if packet.resent {
            env.stats.lost_again += 1;
            return false;
        }
        if env.config.congestion_control && self.enforcer.level() >= Level::NoRetransmit {
            env.stats.withheld_congestion += 1;
            return false;
        }
        if (self.resent + 1) * 100 > self.sent * env.config.retransmit_cap_percent {
            env.stats.withheld_cap += 1;
            return false;
        }
        // The self-check (docs/pemi.md#never-do-harm): the reply balance
        // holds copies back wherever it finds the inferences implausible;
        // the answered-copies estimate only where the RTT to the receiver
        // varies by more than the exclusion window tolerates (the cause of
        // most wrong inferences on such paths).
        let margin = env.config.margin(self.timeout(env.config, path));
        let queued = path.rtt.rttvar() > margin;
        if env.config.self_check && (self.balance.implausible() || queued && !self.check.allows()) {
            env.stats.withheld_backoff += 1;
            return false;
        }
        let Some(copy) = packet.copy.take() else {
            env.stats.withheld_unbuffered += 1;
            return false;
        };
        packet.resent = true;
        self.resent += 1;
        env.stats.retransmissions += 1;
        self.enforcer.on_sent(true);
        let datagram = Datagram {
            src: path.sender,
            dst: path.receiver,
            ttl: packet.ttl,
            payload: copy,
            protocol: netsim::Protocol::Udp,
        };
        env.out.push_back(Transmit::at(env.now, datagram));
        // The receiver may answer the copy: it joins the flowlets, never
        // to be resent.
        let again = Sent {
            at: env.now,
            copy: None::<Bytes>,
            ttl: packet.ttl,
            resent: true,
            retransmission: true,
            fingerprint: packet.fingerprint,
        };
        self.record(env, path, again);
        true
    }

    /// A calibration sample (spin bit or ICMP, §4.4.3): if it deviates
    /// from the estimate by more than Δmargin, the estimate restarts from
    /// it and the flowlets already matched with replies are dropped.
    pub(crate) fn calibrate(&mut self, env: &mut Env<'_>, path: &mut Path<'_>, sample: Duration) {
        let margin = env.config.margin(self.timeout(env.config, path));
        if path.srtt().abs_diff(sample) <= margin {
            return;
        }
        env.stats.calibration_resets += 1;
        path.rtt.reset(env.now, sample);
        let mut freed = 0;
        let record = &mut *env.record;
        self.flowlets.retain(|flowlet| {
            let matched = !flowlet.replies.is_empty();
            if matched {
                freed += flowlet.buffered;
                if let Some(record) = record.as_mut() {
                    for sent in &flowlet.sent {
                        record.calibration_drop(sent.fingerprint);
                    }
                }
            }
            !matched
        });
        self.unbuffer(env, freed);
    }
}

#[cfg(test)]
mod tests {
    use super::ReplyRatio;

    /// The first window does not count (a handshake's and slow start's
    /// extra replies); afterwards the ratio is the whole connection's, so
    /// a stretch of extra replies cannot flip a long-settled estimate.
    #[test]
    fn the_reply_ratio_is_the_connections_after_its_first_window() {
        let mut ratio = ReplyRatio::default();
        // A first window answered one for one: still 2.
        for _ in 0..64 {
            ratio.on_sent(64);
            ratio.on_reply();
        }
        assert_eq!(ratio.threshold(60), 2);
        // 1000 packets, every second answered: 2.
        for i in 0..1000 {
            ratio.on_sent(64);
            if i % 2 == 0 {
                ratio.on_reply();
            }
        }
        assert_eq!(ratio.threshold(60), 2);
        // 100 answered one for one: 600 of 1100, under 60%: still 2.
        for _ in 0..100 {
            ratio.on_sent(64);
            ratio.on_reply();
        }
        assert_eq!(ratio.threshold(60), 2);
        // A receiver that answers everything from the start: 1.
        let mut every = ReplyRatio::default();
        for _ in 0..200 {
            every.on_sent(64);
            every.on_reply();
        }
        assert_eq!(every.threshold(60), 1);
    }
}

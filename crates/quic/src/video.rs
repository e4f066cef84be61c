//! The video workload (Proteus §4.4, §6.3): DASH-like chunks over one QUIC
//! connection, a BOLA-BASIC client with an emulated playback buffer, and
//! the Proteus-H threshold policy the client sends to the server.
//!
//! # Protocol
//!
//! The client opens one bidirectional stream and writes 17-byte messages:
//! a type (`b'R'` request, `b'T'` threshold) and two big-endian `u64`s. A
//! request carries the chunk's size in bytes and a threshold; a threshold
//! message carries a threshold. A threshold is bits/s, with 0 for "none
//! given" and 2⁶⁴ − 1 for infinite. The server answers each request, in
//! order, with that many bytes on the same stream, and hands every
//! threshold to its hook (which sets the Proteus-H threshold of its
//! controller). Requests are one at a time: the client asks for the next
//! chunk when the last has arrived and its buffer has room, so a full
//! buffer pauses the transfer.
//!
//! # Client
//!
//! Chunks last [`VideoConfig::chunk`] (3 s) at bitrates from the ladder,
//! each `bitrate × chunk` bytes, or, with [`VideoConfig::chunk_variability`],
//! that times the chunk's VBR multiplier ([`ChunkVariability`]); every
//! decision and the bitrate metric use the nominal bitrate (as dash.js
//! uses the manifest's), only the bytes sent change. Playback starts when
//! the first chunk has arrived and drains the buffer in real time; an
//! empty buffer stalls it (rebuffering) until the next chunk arrives. The client requests a chunk whenever it is not
//! downloading and the buffer holds less than the buffer target (30 s,
//! dash.js's). The bitrate is BOLA-BASIC's (dash.js `BolaRule`, without its
//! placeholder and abandonment rules): with utilities υ_m = ln(r_m/r_1) + 1,
//! γ_p = (υ_max − 1)/(T/B_min − 1) and V_p = B_min/γ_p, where B_min = 10 s
//! and T = max(30 s, 10 s + 2 s per bitrate), it picks the m maximising
//! (V_p·(υ_m + γ_p) − Q)/r_m for a buffer of Q seconds.
//!
//! The threshold policy (§4.4): the largest threshold that satisfies
//! (1) threshold ≤ G·bitrate_max with G = 1.5, and (2) threshold ≤
//! bitrate_current/(2 − f) while the free buffer f (in chunks) is under 2,
//! checked at each request; (3) while rebuffering, the threshold is
//! infinite. The client sends it with each request, at each stall and when
//! playback resumes.
//!
//! Metrics ([`VideoReport`]): the mean bitrate of the chunks received, the
//! time spent rebuffering after playback started, the rebuffer ratio
//! (stalled time over stalled plus played time) and the startup delay.

use crate::app::{App, AppFactory};
use crate::session::{Session, StreamId};
use crate::timed::AppTimer;
use netsim::{Rate, Time};
use std::time::Duration;

mod sizes;

use sizes::ChunkSizes;
pub use sizes::ChunkVariability;

/// A message's length: type and two `u64`s.
const MESSAGE_LEN: usize = 17;
/// A threshold code meaning "infinite".
const INFINITE: u64 = u64::MAX;
/// BOLA's minimum buffer B_min, seconds (dash.js `MINIMUM_BUFFER_S`).
const BOLA_MIN_BUFFER_S: f64 = 10.0;
/// The buffer BOLA adds per bitrate (dash.js
/// `MINIMUM_BUFFER_PER_BITRATE_LEVEL_S`).
const BOLA_PER_LEVEL_S: f64 = 2.0;
/// The sufficient-rate rule's margin G.
const SUFFICIENT_RATE_GAIN: f64 = 1.5;

/// What a video client plays and how.
#[derive(Clone, Debug, PartialEq)]
pub struct VideoConfig {
    /// The bitrates on offer, ascending.
    pub ladder: Vec<Rate>,
    /// A chunk's playing time (3 s).
    pub chunk: Duration,
    /// The buffer target: no request while the buffer holds this much (30 s).
    pub buffer_target: Duration,
    /// How long the client streams, from its start.
    pub duration: Duration,
    /// Send the Proteus-H threshold policy's thresholds.
    pub thresholds: bool,
    /// Always request the highest bitrate (Figure 13).
    pub force_highest: bool,
    /// How chunk sizes vary about `bitrate × chunk`.
    pub chunk_variability: ChunkVariability,
}

/// A threshold the client sends: a rate, or infinite.
pub type Threshold = Option<Rate>;

/// Receives the thresholds a server is sent (sets its controller's).
pub type ThresholdHook = Box<dyn FnMut(Threshold) + Send>;

/// One chunk as received.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChunkRecord {
    /// Its bitrate.
    pub bitrate: Rate,
    /// When it was requested.
    pub requested: Time,
    /// When its last byte arrived.
    pub arrived: Time,
}

/// The video client.
#[derive(Debug)]
pub struct VideoClient {
    config: VideoConfig,
    stream: Option<StreamId>,
    outbox: Vec<u8>,
    start: Option<Time>,
    /// The chunk being downloaded: (bitrate, bytes still to come, requested).
    downloading: Option<(Rate, u64, Time)>,
    chunks: Vec<ChunkRecord>,
    /// Seconds of video buffered at `updated`.
    level: f64,
    updated: Time,
    /// When playback started.
    playing_since: Option<Time>,
    /// When the current stall began, if stalled.
    stalled_since: Option<Time>,
    /// Rebuffering time finished so far.
    rebuffered: Duration,
    last_threshold: Option<u64>,
    done: bool,
    /// The chunks' size multipliers.
    sizes: ChunkSizes,
}

impl VideoClient {
    /// A client playing `config`.
    pub fn new(config: VideoConfig) -> VideoClient {
        VideoClient {
            sizes: ChunkSizes::new(config.chunk_variability),
            config,
            stream: None,
            outbox: Vec::new(),
            start: None,
            downloading: None,
            chunks: Vec::new(),
            level: 0.0,
            updated: Time::ZERO,
            playing_since: None,
            stalled_since: None,
            rebuffered: Duration::ZERO,
            last_threshold: None,
            done: false,
        }
    }

    /// The chunks received.
    pub fn chunks(&self) -> &[ChunkRecord] {
        &self.chunks
    }

    /// Drains the buffer by playback up to `now`, starting a stall where
    /// it empties.
    fn play_until(&mut self, now: Time) {
        if self.playing_since.is_some() && self.stalled_since.is_none() {
            let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
            // Within a nanosecond counts as empty (times are whole ns).
            if elapsed + 1e-9 >= self.level {
                let empty = self.updated + Duration::from_secs_f64(self.level);
                self.stalled_since = Some(empty.min(now));
                self.level = 0.0;
            } else {
                self.level -= elapsed;
            }
        }
        self.updated = now;
    }

    /// BOLA-BASIC's choice for a buffer of `level` seconds.
    fn bola(&self, level: f64) -> usize {
        let ladder = &self.config.ladder;
        if self.config.force_highest || ladder.len() < 2 {
            return ladder.len().saturating_sub(1);
        }
        let first = ladder[0].bits_per_sec().max(1) as f64;
        let utility = |rate: Rate| (rate.bits_per_sec().max(1) as f64 / first).ln() + 1.0;
        let top = utility(ladder[ladder.len() - 1]);
        let target = self
            .config
            .buffer_target
            .as_secs_f64()
            .max(BOLA_MIN_BUFFER_S + BOLA_PER_LEVEL_S * ladder.len() as f64);
        let gp = (top - 1.0) / (target / BOLA_MIN_BUFFER_S - 1.0);
        let vp = BOLA_MIN_BUFFER_S / gp;
        let mut best = (0, f64::NEG_INFINITY);
        for (m, &rate) in ladder.iter().enumerate() {
            let score = (vp * (utility(rate) + gp) - level) / rate.bits_per_sec().max(1) as f64;
            if score >= best.1 {
                best = (m, score);
            }
        }
        best.0
    }

    /// The threshold policy at a request of `bitrate` with `level` seconds
    /// buffered (rules 1 and 2).
    fn threshold(&self, bitrate: Rate) -> u64 {
        let top = self.config.ladder.last().map_or(0, |r| r.bits_per_sec()) as f64;
        let mut threshold = SUFFICIENT_RATE_GAIN * top;
        let free = (self.config.buffer_target.as_secs_f64() - self.level).max(0.0)
            / self.config.chunk.as_secs_f64();
        if free < 2.0 {
            threshold = threshold.min(bitrate.bits_per_sec() as f64 / (2.0 - free));
        }
        (threshold.round() as u64).clamp(1, INFINITE - 1)
    }

    fn message(&mut self, kind: u8, a: u64, b: u64) {
        self.outbox.push(kind);
        self.outbox.extend_from_slice(&a.to_be_bytes());
        self.outbox.extend_from_slice(&b.to_be_bytes());
    }

    /// Sends `threshold` if it changed.
    fn send_threshold(&mut self, threshold: u64) {
        if self.config.thresholds && self.last_threshold != Some(threshold) {
            self.last_threshold = Some(threshold);
            self.message(b'T', threshold, 0);
        }
    }

    fn request(&mut self, now: Time) {
        let index = self.bola(self.level);
        let bitrate = self.config.ladder[index];
        // Requests are one at a time: this is chunk number `chunks.len()`.
        let scale = self.sizes.multiplier(self.chunks.len());
        let bytes =
            (bitrate.bits_per_sec() as f64 / 8.0 * self.config.chunk.as_secs_f64() * scale) as u64;
        let threshold = if self.stalled_since.is_some() {
            INFINITE
        } else {
            self.threshold(bitrate)
        };
        let code = if self.config.thresholds { threshold } else { 0 };
        self.last_threshold = Some(code);
        self.message(b'R', bytes.max(1), code);
        self.downloading = Some((bitrate, bytes.max(1), now));
    }

    /// A chunk finished arriving at `now`.
    fn chunk_arrived(&mut self, now: Time, bitrate: Rate, requested: Time) {
        self.play_until(now);
        self.chunks.push(ChunkRecord {
            bitrate,
            requested,
            arrived: now,
        });
        self.level += self.config.chunk.as_secs_f64();
        if self.playing_since.is_none() {
            self.playing_since = Some(now);
        }
        if let Some(since) = self.stalled_since.take() {
            self.rebuffered += now.saturating_duration_since(since);
        }
    }

    fn session_end(&self) -> Option<Time> {
        self.start.map(|start| start + self.config.duration)
    }

    /// Whether its session ended by `end`.
    pub fn is_finished_by(&self, end: Time) -> bool {
        self.session_end().is_some_and(|session| session <= end)
    }

    /// What the client measured up to `end` (the trial's end).
    pub fn report(&self, end: Time) -> VideoReport {
        let end = self.session_end().map_or(end, |session| session.min(end));
        let mut rebuffered = self.rebuffered;
        // A stall still running at the end, or one that began since the
        // last update.
        let stalled_since = self.stalled_since.or_else(|| {
            let started = self.playing_since.is_some();
            let empty = self.updated + Duration::from_secs_f64(self.level);
            (started && empty < end).then_some(empty)
        });
        if let Some(since) = stalled_since {
            rebuffered += end.saturating_duration_since(since);
        }
        let watching = self
            .playing_since
            .map_or(Duration::ZERO, |since| end.saturating_duration_since(since));
        let counted: Vec<&ChunkRecord> = self.chunks.iter().filter(|c| c.arrived <= end).collect();
        let mean_bitrate = if counted.is_empty() {
            0.0
        } else {
            counted
                .iter()
                .map(|c| c.bitrate.bits_per_sec() as f64)
                .sum::<f64>()
                / counted.len() as f64
        };
        VideoReport {
            chunks: counted.len(),
            mean_bitrate_mbps: mean_bitrate / 1e6,
            rebuffer: rebuffered,
            rebuffer_ratio: if watching.is_zero() {
                0.0
            } else {
                rebuffered.as_secs_f64() / watching.as_secs_f64()
            },
            startup: match (self.start, self.playing_since) {
                (Some(start), Some(since)) => Some(since.saturating_duration_since(start)),
                _ => None,
            },
        }
    }
}

/// What a video client measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VideoReport {
    /// Chunks received.
    pub chunks: usize,
    /// Their mean bitrate, Mbit/s.
    pub mean_bitrate_mbps: f64,
    /// Time stalled after playback started.
    pub rebuffer: Duration,
    /// Stalled time over stalled plus played time.
    pub rebuffer_ratio: f64,
    /// From the client's start to playback.
    pub startup: Option<Duration>,
}

impl App for VideoClient {
    fn drive(&mut self, session: &mut Session<'_>) {
        let now = session.now();
        self.start.get_or_insert(now);
        if self.done || !session.is_connected() {
            return;
        }
        if self.session_end().is_some_and(|end| now >= end) {
            self.done = true;
            return;
        }
        let Some(stream) = session.open_bi_once(&mut self.stream) else {
            return;
        };
        let was_stalled = self.stalled_since.is_some();
        self.play_until(now);
        if !was_stalled && self.stalled_since.is_some() {
            self.send_threshold(INFINITE);
        }
        let mut received = 0u64;
        let _ = session.read(stream, |data| received += data.len() as u64);
        while received > 0 {
            let Some((bitrate, remaining, requested)) = self.downloading else {
                break;
            };
            let take = received.min(remaining);
            received -= take;
            if take == remaining {
                self.downloading = None;
                let stalled = self.stalled_since.is_some();
                self.chunk_arrived(now, bitrate, requested);
                if stalled {
                    // Playback resumes: the policy's threshold again.
                    let threshold = self.threshold(bitrate);
                    self.send_threshold(threshold);
                }
            } else {
                self.downloading = Some((bitrate, remaining - take, requested));
            }
        }
        let room = self.level < self.config.buffer_target.as_secs_f64() + 1e-9;
        if self.downloading.is_none() && room {
            self.request(now);
        }
        if !self.outbox.is_empty()
            && let Ok(written) = session.write(stream, &self.outbox)
        {
            self.outbox.drain(..written);
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

impl AppTimer for VideoClient {
    fn next_wakeup(&self) -> Option<Time> {
        if self.done {
            return None;
        }
        let end = self.session_end();
        let playing = self.playing_since.is_some() && self.stalled_since.is_none();
        // A wakeup is always after the last update (rounded up to the next
        // nanosecond), so that a drive at it moves past it.
        let after = |seconds: f64| {
            let nanos = (seconds.max(0.0) * 1e9).ceil().max(1.0);
            self.updated + Duration::from_nanos(nanos as u64)
        };
        let next = if !playing {
            None
        } else if self.downloading.is_some() {
            // The buffer runs dry (a stall: the emergency threshold).
            Some(after(self.level))
        } else {
            // The buffer falls below the target: request again.
            Some(after(self.level - self.config.buffer_target.as_secs_f64()))
        };
        match (next, end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The video server of one connection.
pub struct VideoServer {
    stream: Option<StreamId>,
    inbox: Vec<u8>,
    /// Bytes still to send, in request order.
    to_send: u64,
    hook: Option<ThresholdHook>,
    thresholds: u64,
}

impl std::fmt::Debug for VideoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VideoServer")
            .field("to_send", &self.to_send)
            .field("thresholds", &self.thresholds)
            .finish_non_exhaustive()
    }
}

impl VideoServer {
    /// Thresholds received.
    pub fn thresholds(&self) -> u64 {
        self.thresholds
    }

    fn on_threshold(&mut self, code: u64) {
        if code == 0 {
            return;
        }
        self.thresholds += 1;
        let threshold = (code != INFINITE).then(|| Rate::from_bps(code));
        if let Some(hook) = &mut self.hook {
            hook(threshold);
        }
    }
}

impl App for VideoServer {
    fn drive(&mut self, session: &mut Session<'_>) {
        if self.stream.is_none() {
            self.stream = session.accept_bi();
        }
        let Some(stream) = self.stream else {
            return;
        };
        let inbox = &mut self.inbox;
        let _ = session.read(stream, |data| inbox.extend_from_slice(data));
        let whole = self.inbox.len() / MESSAGE_LEN * MESSAGE_LEN;
        let messages: Vec<u8> = self.inbox.drain(..whole).collect();
        for message in messages.chunks_exact(MESSAGE_LEN) {
            let word = |at: usize| {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&message[at..at + 8]);
                u64::from_be_bytes(bytes)
            };
            match message[0] {
                b'R' => {
                    self.to_send = self.to_send.saturating_add(word(1));
                    self.on_threshold(word(9));
                }
                b'T' => self.on_threshold(word(1)),
                _ => {}
            }
        }
        if self.to_send > 0 {
            self.to_send -= crate::bulk::write_zeros(session, stream, self.to_send);
        }
    }

    fn is_done(&self) -> bool {
        false
    }
}

/// Makes a [`VideoServer`] per connection, each handing its thresholds to
/// a hook the factory makes.
pub struct VideoServerFactory {
    hook: Box<dyn FnMut() -> Option<ThresholdHook> + Send>,
}

impl VideoServerFactory {
    /// Servers whose thresholds go to the hooks `hook` makes.
    pub fn new(hook: impl FnMut() -> Option<ThresholdHook> + Send + 'static) -> VideoServerFactory {
        VideoServerFactory {
            hook: Box::new(hook),
        }
    }
}

impl AppFactory for VideoServerFactory {
    type App = VideoServer;

    fn make(&mut self) -> VideoServer {
        VideoServer {
            stream: None,
            inbox: Vec::new(),
            to_send: 0,
            hook: (self.hook)(),
            thresholds: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(force_highest: bool) -> VideoConfig {
        VideoConfig {
            ladder: [1, 2, 4, 8, 12].map(Rate::from_mbps).to_vec(),
            chunk: Duration::from_secs(3),
            buffer_target: Duration::from_secs(30),
            duration: Duration::from_secs(180),
            thresholds: true,
            force_highest,
            chunk_variability: ChunkVariability::Constant,
        }
    }

    #[test]
    fn bola_climbs_the_ladder_as_the_buffer_fills() {
        let client = VideoClient::new(config(false));
        let choices: Vec<usize> = [0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0]
            .iter()
            .map(|&level| client.bola(level))
            .collect();
        assert_eq!(choices[0], 0, "empty buffer: the lowest bitrate");
        assert_eq!(*choices.last().unwrap(), 4, "full: the highest");
        assert!(choices.windows(2).all(|w| w[0] <= w[1]), "{choices:?}");
        assert_eq!(VideoClient::new(config(true)).bola(0.0), 4);
    }

    #[test]
    fn the_threshold_policy() {
        let mut client = VideoClient::new(config(false));
        // Plenty of room: 1.5 × 12 Mbit/s.
        client.level = 10.0;
        assert_eq!(client.threshold(Rate::from_mbps(8)), 18_000_000);
        // 1.5 chunks free: 8 Mbit/s / (2 − 1.5) = 16 Mbit/s.
        client.level = 25.5;
        assert_eq!(client.threshold(Rate::from_mbps(8)), 16_000_000);
        // Half a chunk free: 8 / 1.5.
        client.level = 28.5;
        assert_eq!(client.threshold(Rate::from_mbps(8)), 5_333_333);
    }

    #[test]
    fn vbr_changes_the_bytes_not_the_bitrate() {
        let mut vbr = config(true);
        vbr.chunk_variability = ChunkVariability::Lognormal {
            cv: 0.37,
            peak: 2.0,
            seed: netsim::Seed::new(5),
        };
        let mut client = VideoClient::new(vbr.clone());
        let mut sizes = ChunkSizes::new(vbr.chunk_variability);
        let nominal = 12e6 / 8.0 * 3.0;
        let mut differ = false;
        for i in 0..20 {
            client.request(Time::from_secs(i));
            let (bitrate, bytes, _) = client.downloading.unwrap();
            assert_eq!(bitrate, Rate::from_mbps(12), "BOLA's choice is nominal");
            assert_eq!(bytes, (nominal * sizes.multiplier(i as usize)) as u64);
            differ |= bytes != nominal as u64;
            client.chunk_arrived(Time::from_secs(i), bitrate, Time::from_secs(i));
        }
        assert!(differ);
        assert!((client.report(Time::from_secs(20)).mean_bitrate_mbps - 12.0).abs() < 1e-12);
    }

    #[test]
    fn a_stall_counts_as_rebuffering_until_the_next_chunk() {
        let mut client = VideoClient::new(config(false));
        let s = Time::from_secs;
        client.start = Some(s(0));
        client.updated = s(0);
        client.chunk_arrived(s(1), Rate::from_mbps(1), s(0));
        // Plays 3 s from 1 s, stalls at 4 s; the next chunk comes at 6 s.
        client.play_until(s(5));
        assert_eq!(client.stalled_since, Some(s(4)));
        client.chunk_arrived(s(6), Rate::from_mbps(2), s(4));
        let report = client.report(s(7));
        assert_eq!(report.rebuffer, Duration::from_secs(2));
        assert_eq!(report.chunks, 2);
        assert!((report.mean_bitrate_mbps - 1.5).abs() < 1e-12);
        // Watching from 1 s to 7 s: 2 s of 6 stalled.
        assert!((report.rebuffer_ratio - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(report.startup, Some(Duration::from_secs(1)));
    }
}

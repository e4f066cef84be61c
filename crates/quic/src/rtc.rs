//! The RTC workload (PEMI §6.1.2): "dummy servers and clients to send
//! media frames at 30fps, 3000kbps ... The server sends a frame every
//! 33ms", measuring frame delay and frame-level jitter.
//!
//! The server ([`RtcSender`], made by [`RtcSenderFactory`]) sends frame `k`
//! of [`RtcConfig::frame_bytes`] bytes (12 500 B at 3000 kbit/s and
//! 30 fps) at its generation time `start + k · 1 s / fps` (integer
//! nanoseconds), where `start` is when the server sees the handshake
//! complete. PEMI does not say how its dummy applications map frames to
//! streams; we give each frame its own server-opened bidirectional stream
//! (a lost packet then delays only its own frame, as with RTP-over-QUIC
//! designs): the frame starts with a 16-byte header — the frame index and
//! its generation time in nanoseconds of virtual time, both big-endian
//! `u64` — followed by zeros, then FIN. The client ([`RtcReceiver`])
//! finishes its own half of each stream at once (so stream credit comes
//! back) and records a frame when it reads the frame's FIN. The server
//! is driven at its frame times through [`Timed`]: put
//! `Timed::new(QuicServer::new(.., RtcSenderFactory::new(config)))` in the
//! scenario.
//!
//! Metrics ([`RtcReport`]):
//!
//! * **frame delay** — PEMI: "time between the frame created at the server
//!   and completely received at the client": the client's read of the
//!   frame's FIN minus its generation time;
//! * **frame-level jitter** — PEMI: "statistical variance of the RTP frame
//!   interarrival time", which it reports as a distribution (median, 90th
//!   and 99th percentiles). We take the RFC 3550 §6.4.1 per-frame sample:
//!   the interarrival time's deviation from the send interval,
//!   `|D(k−1, k)| = |(R_k − R_{k−1}) − (S_k − S_{k−1})| = |d_k − d_{k−1}|`
//!   for consecutive frames `k−1, k` (by index, both received), with its
//!   mean, percentiles, and the RFC 3550 running estimate
//!   `J += (|D| − J) / 16` after the last frame.
//!
//! Percentiles are nearest-rank; every value is an integer [`Duration`].

use crate::app::{App, AppFactory};
use crate::client::QuicClient;
use crate::metrics::nearest_rank;
use crate::session::{Session, StreamId};
use crate::timed::AppTimer;
#[cfg(doc)]
use crate::timed::Timed;
use bytes::Bytes;
use netsim::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// The length of the frame header.
const HEADER_LEN: usize = 16;

/// The frame source's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtcConfig {
    /// Frames per second.
    pub fps: u64,
    /// Bytes per frame (header included; at least 16).
    pub frame_bytes: usize,
    /// Frames to send.
    pub frames: u64,
}

impl RtcConfig {
    /// PEMI's source: 30 frames per second at 3000 kbit/s (12 500-byte
    /// frames) for `seconds` seconds of video.
    pub fn pemi(seconds: u64) -> RtcConfig {
        RtcConfig {
            fps: 30,
            frame_bytes: 3_000_000 / 8 / 30,
            frames: seconds * 30,
        }
    }

    /// When frame `index` is generated, `start` being frame 0's time.
    pub fn generation_time(&self, start: Time, index: u64) -> Time {
        let nanos = u128::from(index) * 1_000_000_000 / u128::from(self.fps.max(1));
        start + Duration::from_nanos(nanos as u64)
    }
}

/// A frame being sent.
#[derive(Debug)]
struct Outgoing {
    stream: StreamId,
    data: Bytes,
    written: usize,
    fin_sent: bool,
    peer_fin: bool,
}

/// The server side: the frame source, one per connection.
#[derive(Debug)]
pub struct RtcSender {
    config: RtcConfig,
    start: Option<Time>,
    /// The index of the next frame to generate.
    next: u64,
    /// Generated frames waiting for a stream: index and generation time.
    waiting: VecDeque<(u64, Time)>,
    sending: Vec<Outgoing>,
    sent: u64,
}

impl RtcSender {
    /// A source with `config`.
    pub fn new(config: RtcConfig) -> RtcSender {
        RtcSender {
            config,
            start: None,
            next: 0,
            waiting: VecDeque::new(),
            sending: Vec::new(),
            sent: 0,
        }
    }

    /// When frame 0 was generated (the handshake's completion).
    pub fn start(&self) -> Option<Time> {
        self.start
    }

    /// Frames written in full with FIN.
    pub fn frames_sent(&self) -> u64 {
        self.sent
    }

    fn frame(&self, index: u64, generated: Time) -> Bytes {
        let mut data = vec![0u8; self.config.frame_bytes.max(HEADER_LEN)];
        data[..8].copy_from_slice(&index.to_be_bytes());
        data[8..16].copy_from_slice(&generated.as_nanos().to_be_bytes());
        Bytes::from(data)
    }
}

impl App for RtcSender {
    fn drive(&mut self, session: &mut Session<'_>) {
        if !session.is_connected() {
            return;
        }
        let now = session.now();
        let start = *self.start.get_or_insert(now);
        while self.next < self.config.frames {
            let at = self.config.generation_time(start, self.next);
            if at > now {
                break;
            }
            self.waiting.push_back((self.next, at));
            self.next += 1;
        }
        while let Some(&(index, generated)) = self.waiting.front() {
            let Some(stream) = session.open_bi() else {
                break;
            };
            self.waiting.pop_front();
            let data = self.frame(index, generated);
            self.sending.push(Outgoing {
                stream,
                data,
                written: 0,
                fin_sent: false,
                peer_fin: false,
            });
        }
        for frame in &mut self.sending {
            while frame.written < frame.data.len() {
                match session.write_bytes(frame.stream, frame.data.slice(frame.written..)) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => frame.written += n,
                }
            }
            if !frame.fin_sent && frame.written == frame.data.len() {
                frame.fin_sent = session.finish(frame.stream).is_ok();
                if frame.fin_sent {
                    self.sent += 1;
                }
            }
            // The client's half carries nothing but FIN; reading it frees
            // the stream.
            match session.read(frame.stream, |_| {}) {
                Ok(status) => frame.peer_fin |= status.finished,
                Err(_) => frame.peer_fin = true,
            }
        }
        self.sending.retain(|f| !(f.fin_sent && f.peer_fin));
    }

    fn is_done(&self) -> bool {
        self.sent == self.config.frames
    }
}

impl AppTimer for RtcSender {
    fn next_wakeup(&self) -> Option<Time> {
        let start = self.start?;
        (self.next < self.config.frames).then(|| self.config.generation_time(start, self.next))
    }
}

/// Makes an [`RtcSender`] for each connection.
#[derive(Clone, Copy, Debug)]
pub struct RtcSenderFactory {
    config: RtcConfig,
}

impl RtcSenderFactory {
    /// Senders with `config`.
    pub fn new(config: RtcConfig) -> RtcSenderFactory {
        RtcSenderFactory { config }
    }
}

impl AppFactory for RtcSenderFactory {
    type App = RtcSender;

    fn make(&mut self) -> RtcSender {
        RtcSender::new(self.config)
    }
}

/// One frame as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRecord {
    /// The frame's index.
    pub index: u64,
    /// When the sender generated it.
    pub generated: Time,
    /// When the receiver read its last byte (the FIN).
    pub completed: Time,
    /// Bytes received, header included.
    pub bytes: u64,
}

impl FrameRecord {
    /// The frame delay: `completed - generated`.
    pub fn delay(&self) -> Duration {
        self.completed - self.generated
    }
}

/// A frame being received.
#[derive(Debug)]
struct Incoming {
    stream: StreamId,
    header: Vec<u8>,
    bytes: u64,
}

/// The client side: receives `frames` frames, each on its own stream.
#[derive(Debug)]
pub struct RtcReceiver {
    expected: u64,
    incoming: Vec<Incoming>,
    frames: Vec<FrameRecord>,
}

impl RtcReceiver {
    /// A receiver expecting `frames` frames (it is done when all arrived).
    pub fn new(frames: u64) -> RtcReceiver {
        RtcReceiver {
            expected: frames,
            incoming: Vec::new(),
            frames: Vec::new(),
        }
    }

    /// The frames expected.
    pub fn expected(&self) -> u64 {
        self.expected
    }

    /// The frames received in full, in completion order.
    pub fn frames(&self) -> &[FrameRecord] {
        &self.frames
    }
}

impl App for RtcReceiver {
    fn drive(&mut self, session: &mut Session<'_>) {
        while let Some(stream) = session.accept_bi() {
            let _ = session.finish(stream);
            self.incoming.push(Incoming {
                stream,
                header: Vec::with_capacity(HEADER_LEN),
                bytes: 0,
            });
        }
        let now = session.now();
        let frames = &mut self.frames;
        self.incoming.retain_mut(|frame| {
            let header = &mut frame.header;
            let read = session.read(frame.stream, |data| {
                let take = (HEADER_LEN - header.len()).min(data.len());
                header.extend_from_slice(&data[..take]);
            });
            match read {
                Ok(status) => {
                    frame.bytes += status.bytes;
                    if !status.finished {
                        return true;
                    }
                    if frame.header.len() == HEADER_LEN {
                        let mut n = [0u8; 8];
                        n.copy_from_slice(&frame.header[..8]);
                        let index = u64::from_be_bytes(n);
                        n.copy_from_slice(&frame.header[8..]);
                        let generated = Time::from_nanos(u64::from_be_bytes(n));
                        frames.push(FrameRecord {
                            index,
                            generated,
                            completed: now,
                            bytes: frame.bytes,
                        });
                    }
                    false
                }
                Err(_) => false,
            }
        });
    }

    fn is_done(&self) -> bool {
        self.frames.len() as u64 >= self.expected
    }
}

/// Frame delays and jitter of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtcReport {
    /// Frames expected.
    pub expected: u64,
    /// The frames received, by index.
    pub frames: Vec<FrameRecord>,
    /// Each received frame's delay, by index.
    pub delays: Vec<Duration>,
    /// Median frame delay.
    pub delay_p50: Duration,
    /// 95th-percentile frame delay.
    pub delay_p95: Duration,
    /// 99th-percentile frame delay.
    pub delay_p99: Duration,
    /// Largest frame delay.
    pub delay_max: Duration,
    /// Per-frame jitter samples `|d_k − d_{k−1}|` for consecutive indices
    /// both received, in index order.
    pub jitter: Vec<Duration>,
    /// Mean of the jitter samples (truncated to whole nanoseconds).
    pub jitter_mean: Duration,
    /// Median jitter sample.
    pub jitter_p50: Duration,
    /// 95th-percentile jitter sample.
    pub jitter_p95: Duration,
    /// 99th-percentile jitter sample.
    pub jitter_p99: Duration,
    /// The RFC 3550 running jitter estimate after the last frame.
    pub jitter_rfc3550: Duration,
}

fn sorted(values: &[Duration]) -> Vec<Duration> {
    let mut values = values.to_vec();
    values.sort();
    values
}

impl RtcReport {
    /// The report of the client's frames, if it received any.
    pub fn from_client(client: &QuicClient<RtcReceiver>) -> Option<RtcReport> {
        RtcReport::from_receiver(client.app()?)
    }

    /// The report of a receiver's frames, if it received any.
    pub fn from_receiver(receiver: &RtcReceiver) -> Option<RtcReport> {
        RtcReport::from_frames(receiver.expected(), receiver.frames().to_vec())
    }

    /// The report of `frames` out of `expected` (any order; e.g. as an
    /// independent QUIC stack's RTC client recorded them), if there are
    /// any.
    pub fn from_frames(expected: u64, mut frames: Vec<FrameRecord>) -> Option<RtcReport> {
        if frames.is_empty() {
            return None;
        }
        frames.sort_by_key(|f| f.index);
        let delays: Vec<Duration> = frames.iter().map(FrameRecord::delay).collect();
        let mut jitter = Vec::new();
        let mut running: u128 = 0;
        for pair in frames.windows(2) {
            if pair[1].index != pair[0].index + 1 {
                continue;
            }
            let sample = pair[1].delay().abs_diff(pair[0].delay());
            let d = sample.as_nanos();
            // J += (|D| − J) / 16, in integer nanoseconds.
            running = if d >= running {
                running + (d - running) / 16
            } else {
                running - (running - d) / 16
            };
            jitter.push(sample);
        }
        let jitter_mean = if jitter.is_empty() {
            Duration::ZERO
        } else {
            let total: u128 = jitter.iter().map(Duration::as_nanos).sum();
            Duration::from_nanos((total / jitter.len() as u128) as u64)
        };
        let sorted_delays = sorted(&delays);
        let sorted_jitter = sorted(&jitter);
        Some(RtcReport {
            expected,
            delay_p50: nearest_rank(&sorted_delays, 50)?,
            delay_p95: nearest_rank(&sorted_delays, 95)?,
            delay_p99: nearest_rank(&sorted_delays, 99)?,
            delay_max: *sorted_delays.last()?,
            jitter_mean,
            jitter_p50: nearest_rank(&sorted_jitter, 50).unwrap_or_default(),
            jitter_p95: nearest_rank(&sorted_jitter, 95).unwrap_or_default(),
            jitter_p99: nearest_rank(&sorted_jitter, 99).unwrap_or_default(),
            jitter_rfc3550: Duration::from_nanos(running as u64),
            frames,
            delays,
            jitter,
        })
    }
}

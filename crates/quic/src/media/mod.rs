//! The low-latency media workload of Sidekick §5.1: an audio-like stream
//! of 240-byte datagrams every 20 ms over plain UDP (no QUIC), with an
//! AEAD-sealed sequence number, receiver NACKs and a de-jitter buffer.
//!
//! # What it models
//!
//! It follows the authors' media client and server
//! (`sidekick:media_integration/media/src/bin/*.rs`):
//!
//! * **Sender** ([`MediaSender`], the paper's client): media packet `k`
//!   (sequence numbers from 1) leaves at `start + (k − 1) · 20 ms` for the
//!   configured duration (3000 packets in 60 s, 96 kbit/s of payload). A
//!   NACK queues a retransmission, sent at once; so does
//!   [`MediaSender::retransmit`], the hook for a Sidekick sender engine.
//!   There is no congestion or flow control. After the last packet it sends
//!   [`MediaConfig::end_packets`] end-of-stream packets, one per interval
//!   (the reference sends 100 "timeout" packets); ours carry the last
//!   sequence number so the receiver can NACK trailing holes.
//! * **Receiver** ([`MediaReceiver`], the paper's server): stores each
//!   packet in a de-jitter buffer covering `next ..= highest` and plays
//!   out, in order, every packet whose predecessors have all been played.
//!   After every arrival it NACKs each hole at once and re-NACKs a hole at
//!   most once per [`MediaConfig::renack_interval`] (the reference's
//!   `--rtt 52`); like the reference this is checked only when a packet
//!   arrives, so the receiver has no timer.
//!
//! # The de-jitter delay
//!
//! For every packet, **de-jitter delay = play-out time − time it was stored
//! in the buffer** (its first arrival). This is the paper's definition
//! ("the length of time between when the packet is stored to when it can be
//! played in-order", §5.1) and what the reference server records
//! (`now − time_recv` at play-out) and Figure 4a plots. A packet that arrives
//! in order plays at once (delay 0), and so does a retransmission that fills
//! the head hole. The packets queued behind a hole carry the wait. With a
//! 20 ms interval and a 52 ms RTT, one loss recovered end to end delays the
//! next three packets by about 52, 32 and 12 ms: the three steps of
//! Figure 4a. [`DelaySummary`] gives p50/p95/p99/max as integer
//! nanoseconds (`Duration`), with the reference's percentile index.
//!
//! # Wire format and opacity
//!
//! Every datagram is sealed with ChaCha20-Poly1305 (*ring*) under a key
//! derived from the scenario seed and the two addresses (label
//! `media/<sender>-><receiver>/key`), standing in for a pre-shared key. A
//! fresh 96-bit nonce per transmission comes from the sender's seeded
//! generator (label `media/<addr>/nonce`), so runs are byte-identical for a
//! seed, and a middlebox sees only opaque bytes. Data payload (240 B):
//!
//! | offset | length | field |
//! |---|---|---|
//! | 0 | 12 | nonce (random per transmission) |
//! | 12 | 1 | sealed kind: 0 media, 1 end of stream |
//! | 13 | 4 | sealed sequence number (u32 BE) |
//! | 17 | 207 | sealed filler (`0xFF` in the clear) |
//! | 224 | 16 | Poly1305 tag |
//!
//! Bytes 21..25 ([`MEDIA_ID_OFFSET`]) are keystream-covered filler under a
//! fresh nonce: pseudorandom for every transmission, retransmissions
//! included, which is where a Sidekick proxy takes its identifier (the
//! reference client writes a random u32 there). [`MediaSender::transmissions`]
//! logs each transmission's identifier. A NACK is 33 B: nonce, sealed kind
//! 2 and sequence number, tag, with its own associated data. A datagram that
//! has the wrong length, fails authentication or has an unknown kind is
//! counted as rejected and otherwise ignored.
//!
//! # What it does not do
//!
//! * No playout deadline: a packet is never skipped, it waits for its hole
//!   (as in the reference). No audio codec, no RTP/SRTP framing.
//! * No Sidekick logic here: quACKs, resets and the proxy live elsewhere;
//!   they drive [`MediaSender::retransmit`] and read
//!   [`MediaSender::transmissions`].
//! * One flow per host pair; the receiver sends NACKs to the configured
//!   sender address.

mod config;
mod dejitter;
mod receiver;
mod sender;
mod stats;
mod wire;

pub use config::MediaConfig;
pub use receiver::MediaReceiver;
pub use sender::{MediaSender, MediaTransmission};
pub use stats::{DelaySummary, MediaReceiverStats, MediaSenderStats};
pub use wire::{MEDIA_DATA_LEN, MEDIA_ID_OFFSET, MEDIA_NACK_LEN, MediaWireError};

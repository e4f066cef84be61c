//! The power-sum quACK: a selective acknowledgement of opaque packets
//! (Sidekick, NSDI 2024, section 3).
//!
//! A middlebox that cannot read sequence numbers names each packet by an
//! identifier taken from its pseudorandom bytes ([`IdentifierSource`]), and
//! summarises the multiset of identifiers it has received as the first `t`
//! power sums over a prime field, a count and the last identifier
//! ([`PowerSums`], sent as a [`Quack`]). The sender keeps the same sums over
//! what it sent; the difference of the two is the power sums of the
//! missing packets, and [`Quack::decode`] recovers them as long as at most
//! `t` are missing. [`SendLog`] turns that into what a sender needs: which
//! packets were received, which are lost (with a reordering rule), which are
//! indeterminate because of identifier collisions, and which are in flight.
//!
//! Layout:
//! * [`field`](Field): `GF(p)` for 16-, 32- and 64-bit identifiers, with
//!   reduction specialised to each prime's form `2^b - c`;
//! * `lanes`: the vectorised encode and evaluation kernels;
//! * [`PowerSums`] and [`Quack`]: insert, remove, subtract;
//! * [`Decoder`]: Newton's identities and batched root finding, with
//!   multiplicities;
//! * [`SendLog`]: the sender's classification of section 4.3.1;
//! * [`Message`]: the documented, versioned wire format;
//! * [`Scheme`], [`Encoder`]: the strawmen of section 3.3 behind the same
//!   interface as the power sum.
//!
//! The crate is sans-IO: no clocks, sockets or randomness. Untrusted bytes
//! (wire messages, payloads) give errors, never panics.
//!
//! ```
//! use quack::{F32, PowerSums};
//!
//! let mut proxy = PowerSums::<F32>::new(10).unwrap();
//! let mut sender = PowerSums::<F32>::new(10).unwrap();
//! let sent = [11, 22, 33, 44, 55];
//! for id in sent {
//!     sender.insert(id);
//!     if id != 33 {
//!         proxy.insert(id); // 33 was lost before the proxy
//!     }
//! }
//! let missing = (&sender - &proxy).decode(&sent).unwrap();
//! assert_eq!(missing, vec![33]);
//! ```
//!
//! The sender's view, as in the README:
//!
//! ```
//! use quack::{Classification, F32, PowerSums, SendLog, SendSeq};
//!
//! let mut proxy = PowerSums::<F32>::new(10).unwrap();
//! let mut log = SendLog::<F32>::new(10).unwrap();
//! for id in [11, 22, 33, 44, 55, 66] {
//!     log.push(id);
//!     if id != 22 {
//!         proxy.insert(id); // 22 is lost before the proxy
//!     }
//! }
//! let mut out = Classification::default();
//! log.apply(&proxy.quack(), &mut out).unwrap();
//! assert_eq!(out.lost, vec![SendSeq(1)]); // 22: three later packets arrived
//! assert_eq!(out.received.len(), 5);
//! ```

mod decode;
mod field;
mod identifier;
mod lanes;
mod power_sum;
mod send_log;
mod strawman;
mod sums;
mod wire;
pub mod workload;

pub use decode::{DecodeError, Decoder, Missing};
pub use field::{F16, F32, F64, Field, MAX_THRESHOLD};
pub use identifier::{IdentifierSource, QUIC_SHORT_HEADER_OFFSET, collision_probability};
pub use power_sum::{InvalidThreshold, PowerSums, Quack};
pub use send_log::{
    Classification, DEFAULT_REORDER_THRESHOLD, FeedbackError, SORTED_HASH_BUDGET, SendLog, SendSeq,
};
pub use strawman::{
    AnyEncoder, EchoEncoder, Encoder, Scheme, SearchError, SortedHashEncoder, WindowEncoder,
    search_sorted_hash,
};
pub use wire::{Kind, Message, VERSION, WireError};

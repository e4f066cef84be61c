//! A MASQUE QUIC-in-QUIC tunnel with TECC's collaborative feedback.
//!
//! (Design notes follow as the crate grows.)

pub mod wire;

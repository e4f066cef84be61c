//! The tunnel's wire formats. Every parser takes bytes a peer sent and
//! returns a [`WireError`] rather than panicking; lengths are bounded
//! before anything is allocated. Each has a fuzz target (`fuzz/`).

pub mod capsule;
pub mod datagram;
mod error;
pub mod feedback;
pub mod h3;
pub mod huffman;
pub mod qpack;
pub mod quic_header;
pub mod varint;

pub use error::WireError;

//! What can be wrong with bytes from the network.

/// A wire parser's refusal: the bytes are not a valid message of the kind
/// expected. Parsers never panic on what a peer sends; they return this.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The input ends inside a field.
    #[error("truncated: the input ends inside a field")]
    Truncated,
    /// A length or count exceeds what this implementation accepts.
    #[error("too large: {0}")]
    TooLarge(&'static str),
    /// The bytes break the protocol.
    #[error("malformed: {0}")]
    Malformed(&'static str),
    /// Valid, but a feature this implementation does not offer (the QPACK
    /// dynamic table).
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
}

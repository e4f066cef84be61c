//! The workload hook: an application running on one connection.

use crate::session::Session;

/// An application on one QUIC connection (one side of a workload).
///
/// The endpoint calls [`App::drive`] after every input to the connection
/// (a datagram, a timer, the handshake finishing); the application reads
/// and writes what it can through the [`Session`] and returns. It is a
/// sans-IO state machine like the connection itself.
pub trait App: Send + 'static {
    /// Do whatever can be done now.
    fn drive(&mut self, session: &mut Session<'_>);

    /// Whether the application has finished its work. A client closes its
    /// connection when its application is done.
    fn is_done(&self) -> bool;
}

/// Makes the server-side application of each accepted connection.
pub trait AppFactory: Send + 'static {
    /// The application type.
    type App: App;

    /// The application for a new connection.
    fn make(&mut self) -> Self::App;
}

//! The congestion-controller plumbing: the factory type `noq_proto`'s
//! transport configuration takes. Controllers are chosen by name one level
//! up (`cc::Controller`, the registry every driver uses); this crate takes
//! the factory it builds.

use noq_proto::congestion::ControllerFactory;
use std::sync::Arc;

/// A shareable controller factory, as `noq_proto::TransportConfig` takes it.
pub type SharedFactory = Arc<dyn ControllerFactory + Send + Sync>;

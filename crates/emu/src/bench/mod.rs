//! Benchmarks of the real-mode daemons: [`proxy_capacity`] measures the
//! packets per second the Sidekick proxy daemon sustains on one core
//! (`pepkit bench sidekick-proxy`).

pub mod proxy_capacity;

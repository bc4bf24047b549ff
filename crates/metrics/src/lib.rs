//! What a member (`bellwether-server`) and an application's client
//! (`bellwether-client`, whose task workers export their own figures)
//! both need for a `/metrics` endpoint: a latency histogram counted with
//! atomics, and the OpenMetrics text of a registry. A crate of its own so
//! that the server does not depend on the application client for them.

pub mod latency_histogram;
pub mod openmetrics;

pub use latency_histogram::LatencyHistogram;

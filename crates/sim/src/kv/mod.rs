//! The key-value workload: simulated clients, per-node state machines, and
//! the replication invariant checks that run with it.

mod app;
mod checks;
mod client;
mod codec;
mod machine;

pub use app::{KvApp, KvConfig};
pub use checks::ReplicationChecker;
pub use machine::KvMachine;

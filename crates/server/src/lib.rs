//! The bellwether node: one process, one Raft member.
//!
//! An event loop owns the Raft core (`node`); around it, IO tasks carry the
//! peer transport (`bellwether-transport`), ticks, and the write-ahead log; `http`
//! serves `/metrics`, `/health`, `/ready`, `/status` and the dashboard.
//! Everything between tasks is a bounded channel.

pub mod app_elections;
pub mod app_tasks;
pub mod client;
pub mod config;
pub mod data_dir;
pub mod durable_watermark;
pub mod etcd;
pub mod forwarding;
pub mod http;
pub mod id_serde;
pub(crate) mod lone_writes;
pub mod metrics;
pub mod node;
pub mod peer_message;
pub mod roster;
pub mod snapshot_file;
pub mod state_machine;
pub mod status;
mod status_tracker;
pub mod tls;

pub use client::{ClientError, NodeClient};
pub use metrics::Metrics;
pub use state_machine::{NullMachine, StateMachine};
pub use status::{LeadershipChange, MemberStatus, NodeStatus};

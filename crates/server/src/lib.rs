//! The bellwether node: one process, one Raft member.
//!
//! An event loop (`node`) carries out the member's decisions
//! (`bellwether-member`, which owns the Raft core); around it, IO tasks carry the
//! peer transport (`bellwether-transport`), ticks, and the write-ahead log; `http`
//! serves `/metrics`, `/health`, `/ready`, `/status` and the dashboard.
//! Everything between tasks is a bounded channel.

pub mod app_elections;
pub mod app_tasks;
pub mod client;
pub mod config;
pub mod data_dir;
pub mod etcd;
pub mod http;
pub mod id_serde;
pub mod member_calls;
pub mod metrics;
pub mod node;
pub mod peer_message;
pub mod snapshot_file;
pub mod status;
mod status_tracker;
pub mod tls;
pub mod zookeeper;

pub use bellwether_member::{NullMachine, StateMachine};
pub use client::{ClientError, NodeClient};
pub use metrics::Metrics;
pub use status::{LeadershipChange, MemberStatus, NodeStatus};

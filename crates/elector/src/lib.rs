//! Leader election inside your own application: its instances elect one of
//! themselves over TCP, with no coordination service to run.
//!
//! ```no_run
//! # async fn example() -> Result<(), bellwether_elector::ElectorError> {
//! use bellwether_elector::{Algorithm, Elector};
//! let peers = [
//!     (1, "127.0.0.1:7101".parse().unwrap()),
//!     (2, "127.0.0.1:7102".parse().unwrap()),
//!     (3, "127.0.0.1:7103".parse().unwrap()),
//! ];
//! let elector = Elector::builder()
//!     .algorithm(Algorithm::Raft)
//!     .id(1)
//!     .peers(peers)
//!     .data_dir("/var/lib/myapp/elector")
//!     .start()
//!     .await?;
//! let mut leadership = elector.leadership();
//! loop {
//!     let view = *leadership.borrow_and_update();
//!     if view.is_leader() {
//!         println!("leading with fencing token {}", view.token);
//!     }
//!     if leadership.changed().await.is_err() {
//!         break;
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The algorithms are the sans-IO cores of `bellwether-core`, the same code
//! the simulator checks under faults:
//! - **Raft** (election only, no log): a majority must vote, so at most one
//!   leader per term, and a partitioned minority elects nobody. With
//!   [`ElectorBuilder::leases`], a leader also gets a validity deadline.
//! - **Bully** and **Ring**, highest or lowest id wins: no quorum, so each
//!   side of a partition elects its own leader. Their epoch still grows, so
//!   a fencing check downstream can tell the later leader.
//!
//! The term or epoch is persisted (fsync, atomic replace, checksum) before
//! any message that depends on it leaves, so it never goes back across
//! restarts. The peer transport is the one bellwether members use, with
//! its handshake: a node of another group, with another algorithm, winner
//! rule or member list, is refused.

mod algorithm;
mod builder;
mod elector;
mod embeddable;
mod error;
mod leadership;
mod metrics;
mod runtime;
mod state_file;

pub use algorithm::Algorithm;
pub use bellwether_core::bully::Winner;
pub use bellwether_core::NodeId;
pub use bellwether_transport::{PeerTls, TlsError};
pub use builder::{ElectorBuilder, NODES_MAX, TICK};
pub use elector::Elector;
pub use error::ElectorError;
pub use leadership::Leadership;
pub use metrics::{ElectorMetrics, CONTENT_TYPE as METRICS_CONTENT_TYPE};
pub use state_file::persist_latency;

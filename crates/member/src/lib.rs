//! The bellwether member's decisions, as a sans-IO driver.
//!
//! A member is the Raft core plus everything around it that decides how a
//! client's request becomes a durable, answered write: what to persist and
//! where (on the event loop or on another thread), which messages may leave
//! before the fsync, which entries may be applied while it runs, when a
//! client is answered, how a follower forwards writes and reads to its
//! leader, when a snapshot is taken and when the log is compacted.
//!
//! [`Member`] holds all of that and does no IO: it takes events (a tick, a
//! peer's message, a client's request, a finished fsync) and returns what
//! to do, as a [`ReadyPlan`] and a queue of [`Effect`]s. The server's event
//! loop (`bellwether-server`'s `node.rs`) carries those out with tokio, a
//! write-ahead log and TCP connections; the simulator can carry out the very
//! same decisions on its virtual clock, network and disk.
//!
//! Each ordering rule the member relies on is asserted where it is decided,
//! in release builds too: no Raft message leaves before what it promises is
//! on disk ([`DurableWatermark`]), no entry is applied before it commits, and
//! a client's write is answered only from the apply of its committed entry.

mod apply;
mod client_error;
pub mod durable_watermark;
mod effect;
mod forward;
pub mod forwarding;
pub mod lone_writes;
mod member;
mod ready_plan;
mod requests;
pub mod roster;
mod runtime;
mod snapshots;
pub mod state_machine;

pub use client_error::ClientError;
pub use durable_watermark::DurableWatermark;
pub use effect::{Answer, Effect};
pub use forward::Forward;
pub use member::{Member, MemberParts};
pub use ready_plan::{AfterPersist, PlannedPersist, ReadyPlan, Step};
pub use requests::Request;
pub use roster::Roster;
pub use runtime::Runtime;
pub use snapshots::SnapshotSchedule;
pub use state_machine::{DecodedSnapshot, NullMachine, RestoreJob, SnapshotJob, StateMachine};

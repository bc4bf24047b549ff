//! Durable storage for bellwether's Raft log.
//!
//! The Raft core (paper Figure 2, "persistent state on all servers") keeps
//! its log in memory and does no IO. This crate is where that state goes to
//! survive a crash, and where it comes back from on restart:
//!
//! - [`Storage`] is the contract the runtime relies on: what is durable when,
//!   what recovery returns, and how several writes share one fsync (group
//!   commit).
//! - [`MemoryStorage`] keeps everything in memory but still tells synced from
//!   unsynced writes, so the simulator can crash a node and lose exactly what
//!   a real disk could lose.
//! - [`WalStorage`] is the real thing: a segmented, checksummed write-ahead
//!   log plus atomically written snapshot files, over a [`FileSystem`] that is
//!   either the real one or a simulated one that injects crashes, torn writes
//!   and full disks.
//!
//! The durability rules it implements are those of `ARCHITECTURE.md`: term,
//! vote and entries are fsync'd (with group commit) before anything that
//! depends on them leaves the node; a torn tail is truncated on recovery;
//! any other corruption stops the node with an error naming the file and the
//! byte offset, and nothing is silently dropped.

#![deny(missing_docs)]

mod codec;
mod contract;
mod corruption;
mod error;
pub mod fs;
mod memory;
mod recovered;
mod storage;
pub mod wal;

pub use corruption::Corruption;
pub use error::StorageError;
pub use fs::{FileSystem, RealFileSystem, SimFault, SimFileSystem, UnsyncedData, WalFile};
pub use memory::{MemoryStorage, PENDING_WRITES_MAX};
pub use recovered::Recovered;
pub use storage::Storage;
pub use wal::{WalOptions, WalStorage};

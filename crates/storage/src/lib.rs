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
//!
//! # Example
//!
//! A node's runtime stages the core's output, syncs once per batch (group
//! commit), and only then sends the messages that depend on it. Here on a
//! simulated disk that loses power:
//!
//! ```
//! use bellwether_core::raft::{Entry, HardState, Payload};
//! use bellwether_core::{LogIndex, NodeId, Term};
//! use bellwether_storage::{SimFileSystem, Storage, UnsyncedData, WalOptions, WalStorage};
//!
//! let disk = SimFileSystem::new();
//! let mut wal = WalStorage::with_file_system(disk.clone(), "/node-1/wal", WalOptions::default())?;
//! let recovered = wal.recover()?; // always first: reads back and repairs
//! assert!(recovered.entries.is_empty());
//!
//! let entry = |index| Entry { term: Term(1), index: LogIndex(index), payload: Payload::Noop };
//! wal.save_hard_state(&HardState { term: Term(1), voted_for: Some(NodeId(2)), commit: LogIndex(0) })?;
//! wal.append(&[entry(1), entry(2)])?;
//! wal.sync()?; // one write, one fsync: now the vote and entries may be relied on
//! wal.append(&[entry(3)])?; // staged, not yet durable
//!
//! disk.reboot(UnsyncedData::Lost); // power loss before the next sync
//! let mut wal = WalStorage::with_file_system(disk, "/node-1/wal", WalOptions::default())?;
//! let recovered = wal.recover()?;
//! assert_eq!(recovered.entries, vec![entry(1), entry(2)]);
//! assert_eq!(recovered.hard_state.voted_for, Some(NodeId(2)));
//! # Ok::<(), bellwether_storage::StorageError>(())
//! ```

#![deny(missing_docs)]

pub mod codec;
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
pub use fs::{
    FileSystem, RealFileSystem, SimFault, SimFileSystem, Unsynced, UnsyncedData, WalFile,
};
pub use memory::{MemoryStorage, PENDING_WRITES_MAX};
pub use recovered::Recovered;
pub use storage::Storage;
pub use wal::{
    PromiseFile, SnapshotFileData, SnapshotStream, SnapshotWriter, WalOptions, WalStorage,
};

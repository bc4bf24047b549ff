//! [`SnapshotWriter`]: writes a member's own snapshot file beside the log,
//! on another thread, so that the log's appends and fsyncs do not wait for
//! it.
//!
//! A snapshot saved through [`Storage::persist`](crate::Storage::persist)
//! is written in the log's order: every append staged after it waits for
//! its write and fsync. For a snapshot the member takes of its own applied
//! state, that order buys nothing. Its entries stay in the log until the
//! snapshot is recorded ([`WalStorage::record_snapshot`](super::WalStorage::record_snapshot)),
//! and recovery reads the newest complete snapshot file whether it was
//! recorded or not, so a crash at any point recovers either the older
//! snapshot and the entries, or the newer snapshot. A million leases make
//! a 3 MB snapshot every two seconds under a lease flood (`bench abuse`),
//! whose write and fsync stalled every member's appends at once.

use super::snapshot_file::{snapshot_file_bytes, write_snapshot, SnapshotStream};
use crate::error::StorageError;
use crate::fs::{FileSystem, RealFileSystem};
use bellwether_core::raft::Snapshot;
use std::path::PathBuf;

/// Writes snapshot files into one log's directory; cheap to clone and
/// `Send`, for a blocking thread.
#[derive(Clone, Debug)]
pub struct SnapshotWriter<F: FileSystem = RealFileSystem> {
    /// The log's file system.
    fs: F,
    /// The log's directory.
    dir: PathBuf,
    /// The log's bound on a snapshot file ([`super::WalOptions::snapshot_bytes_max`]).
    bytes_max: u64,
}

impl<F: FileSystem> SnapshotWriter<F> {
    pub(crate) fn new(fs: F, dir: PathBuf, bytes_max: u64) -> Self {
        SnapshotWriter { fs, dir, bytes_max }
    }

    /// Writes `snapshot` atomically and durably (a temporary file, fsync,
    /// rename, directory fsync), or refuses one over the log's bound.
    pub fn write(&self, snapshot: &Snapshot) -> Result<PathBuf, StorageError> {
        let bytes = snapshot_file_bytes(snapshot);
        if bytes > self.bytes_max {
            return Err(StorageError::SnapshotTooLarge {
                index: snapshot.meta.last_index,
                bytes,
                bytes_max: self.bytes_max,
            });
        }
        write_snapshot(&self.fs, &self.dir, snapshot)
    }

    /// Starts a snapshot file for `index` that the state machine streams its
    /// data into as it encodes it; [`SnapshotStream::finish`] (with
    /// [`bytes_max`](Self::bytes_max)) makes it durable. No image of the
    /// whole state is held in memory on the way.
    pub fn stream(
        &self,
        index: bellwether_core::LogIndex,
    ) -> Result<SnapshotStream<F>, StorageError> {
        SnapshotStream::create(self.fs.clone(), &self.dir, index, self.bytes_max)
    }

    /// The log's bound on a snapshot file.
    pub fn bytes_max(&self) -> u64 {
        self.bytes_max
    }

    /// The path of the snapshot file for `index` in this log's directory.
    pub fn path_of(&self, index: bellwether_core::LogIndex) -> PathBuf {
        self.dir.join(super::file_name::snapshot_name(index))
    }
}

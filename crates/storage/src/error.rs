//! Why a storage call failed, with enough context (path, operation, byte
//! offset) for an operator to act on it.

use crate::corruption::Corruption;
use bellwether_core::LogIndex;
use std::io;
use std::path::PathBuf;

/// A failed storage call.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The operating system refused an operation: disk full, permission
    /// denied, an fsync that failed. The storage is poisoned afterwards.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done: "write", "fsync", "create", "rename", ...
        operation: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A file holds something no crash can produce. Recovery refuses to start
    /// rather than drop data silently.
    #[error(
        "{path} is corrupt at byte {offset}: {reason}. Refusing to start: restore \
         this node's data directory from a backup, or wipe it and let the node \
         rejoin from its peers"
    )]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Byte offset of the first damaged record or header in that file.
        offset: u64,
        /// What is wrong there.
        reason: Corruption,
    },
    /// One entry does not fit in a single WAL record. Nothing was written.
    #[error(
        "entry {index} needs a {bytes}-byte record, above the {bytes_max}-byte limit \
         (WalOptions::record_bytes_max); split the command or raise the limit"
    )]
    RecordTooLarge {
        /// The entry that does not fit.
        index: LogIndex,
        /// Bytes its record would take, header included.
        bytes: u64,
        /// The configured limit.
        bytes_max: u64,
    },
    /// A snapshot is larger than the configured limit. Nothing was written.
    #[error(
        "snapshot at {index} is {bytes} bytes, above the {bytes_max}-byte limit \
         (WalOptions::snapshot_bytes_max)"
    )]
    SnapshotTooLarge {
        /// The snapshot's last index.
        index: LogIndex,
        /// Its encoded size.
        bytes: u64,
        /// The configured limit.
        bytes_max: u64,
    },
    /// An earlier IO error left the on-disk state unknown, so this store
    /// accepts nothing more. Reopen it and recover.
    #[error("storage is unusable after an earlier failure ({cause}); reopen it to recover")]
    Poisoned {
        /// The first error, as text.
        cause: String,
    },
    /// [`WalOptions`](crate::WalOptions) that cannot work together.
    #[error("invalid WAL options: {0}")]
    InvalidOptions(String),
}

impl StorageError {
    /// Wraps an IO error with the operation and the path it concerned.
    pub(crate) fn io(operation: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        StorageError::Io {
            operation,
            path: path.into(),
            source,
        }
    }

    /// A corruption found at `offset` in `path`.
    pub(crate) fn corrupt(path: impl Into<PathBuf>, offset: u64, reason: Corruption) -> Self {
        StorageError::Corrupt {
            path: path.into(),
            offset,
            reason,
        }
    }
}

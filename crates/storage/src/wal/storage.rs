//! [`WalStorage`]: the [`Storage`] contract over a write-ahead log.

use super::open_wal::OpenWal;
use super::options::WalOptions;
use super::recovery;
use super::snapshot_writer::SnapshotWriter;
use crate::contract;
use crate::error::StorageError;
use crate::fs::{FileSystem, RealFileSystem};
use crate::recovered::Recovered;
use crate::storage::Storage;
use bellwether_core::raft::{Entry, HardState, Snapshot, SnapshotMeta};
use bellwether_core::LogIndex;
use std::path::{Path, PathBuf};

/// A [`Storage`] backed by a segmented, checksummed write-ahead log and
/// snapshot files in one directory. See the [module docs](super) for the
/// format and the crash guarantees.
///
/// Open it, then call [`Storage::recover`] once before writing: recovery is
/// where the log is read back, a torn tail is repaired and the active
/// segment is reopened.
#[derive(Debug)]
pub struct WalStorage<F: FileSystem = RealFileSystem> {
    /// The WAL directory.
    dir: PathBuf,
    /// Limits and thresholds, validated.
    options: WalOptions,
    /// The file system, until recovery takes it over.
    unopened: Option<F>,
    /// The open log, after recovery.
    wal: Option<OpenWal<F>>,
    /// The first IO error, after which the store refuses all writes: the
    /// on-disk state is no longer known.
    poisoned: Option<String>,
}

impl WalStorage<RealFileSystem> {
    /// A WAL in `dir` on the real file system; the directory is created on
    /// recovery if missing.
    pub fn open(dir: impl Into<PathBuf>, options: WalOptions) -> Result<Self, StorageError> {
        WalStorage::with_file_system(RealFileSystem::default(), dir, options)
    }
}

impl<F: FileSystem> WalStorage<F> {
    /// A WAL in `dir` on `fs` (a [`SimFileSystem`](crate::SimFileSystem) in
    /// crash tests and the simulator).
    pub fn with_file_system(
        fs: F,
        dir: impl Into<PathBuf>,
        options: WalOptions,
    ) -> Result<Self, StorageError> {
        options.validate()?;
        Ok(WalStorage {
            dir: dir.into(),
            options,
            unopened: Some(fs),
            wal: None,
            poisoned: None,
        })
    }

    /// The WAL directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of segment files, 0 before recovery; for tests and metrics.
    pub fn segment_count(&self) -> usize {
        self.wal.as_ref().map_or(0, OpenWal::segment_count)
    }

    /// A writer of snapshot files beside this log, for another thread (see
    /// [`SnapshotWriter`]). Call after recovery.
    pub fn snapshot_writer(&self) -> SnapshotWriter<F>
    where
        F: Clone,
    {
        self.wal
            .as_ref()
            .expect("call recover() before asking for a snapshot writer")
            .snapshot_writer()
    }

    /// Takes over the snapshot file for `meta`, written by this log's
    /// [`SnapshotWriter`], as the current snapshot, and deletes the
    /// segments it covers. If a later snapshot was saved meanwhile (one
    /// installed from the leader), this one's file is deleted instead.
    pub fn record_snapshot(&mut self, meta: &SnapshotMeta) -> Result<(), StorageError> {
        let result = self.writable()?.record_snapshot(meta);
        self.guard(result)
    }

    /// The open log, or why it cannot be written.
    fn writable(&mut self) -> Result<&mut OpenWal<F>, StorageError> {
        if let Some(cause) = &self.poisoned {
            return Err(StorageError::Poisoned {
                cause: cause.clone(),
            });
        }
        Ok(self
            .wal
            .as_mut()
            .expect("call recover() before writing to a WalStorage"))
    }

    /// Poisons the store if `result` is an IO error.
    fn guard(&mut self, result: Result<(), StorageError>) -> Result<(), StorageError> {
        if let Err(error @ StorageError::Io { .. }) = &result {
            self.poisoned.get_or_insert_with(|| error.to_string());
        }
        result
    }
}

impl<F: FileSystem> Storage for WalStorage<F> {
    fn recover(&mut self) -> Result<Recovered, StorageError> {
        if let Some(cause) = &self.poisoned {
            return Err(StorageError::Poisoned {
                cause: cause.clone(),
            });
        }
        let fs = self
            .unopened
            .take()
            .expect("recover() is called once per WalStorage; open a new one to recover again");
        match recovery::recover(fs, &self.dir, &self.options) {
            Ok((recovered, wal)) => {
                self.wal = Some(wal);
                Ok(recovered)
            }
            Err(error) => {
                self.poisoned = Some(error.to_string());
                Err(error)
            }
        }
    }

    fn append(&mut self, entries: &[Entry]) -> Result<(), StorageError> {
        if entries.is_empty() {
            return Ok(());
        }
        let wal = self.writable()?;
        let previous_term = wal.term_at(LogIndex(entries[0].index.0.saturating_sub(1)));
        contract::check_append(
            entries,
            wal.last_index(),
            wal.snapshot_index(),
            previous_term,
        );
        let result = wal.append(entries);
        self.guard(result)
    }

    fn save_hard_state(&mut self, state: &HardState) -> Result<(), StorageError> {
        let wal = self.writable()?;
        contract::check_hard_state(&wal.hard_state(), state);
        let result = wal.save_hard_state(state);
        self.guard(result)
    }

    fn save_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StorageError> {
        let wal = self.writable()?;
        contract::check_snapshot(wal.snapshot_index(), snapshot.meta.last_index);
        let result = wal.save_snapshot(snapshot);
        self.guard(result)
    }

    fn compact(&mut self, through: LogIndex) -> Result<(), StorageError> {
        let wal = self.writable()?;
        contract::check_compact(through, wal.snapshot_index());
        let result = wal.compact(through);
        self.guard(result)
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        let result = self.writable()?.sync();
        self.guard(result)
    }

    /// 0 before recovery.
    fn last_index(&self) -> LogIndex {
        self.wal.as_ref().map_or(LogIndex(0), OpenWal::last_index)
    }

    /// The default hard state before recovery.
    fn hard_state(&self) -> HardState {
        self.wal
            .as_ref()
            .map_or_else(HardState::default, OpenWal::hard_state)
    }

    /// `None` before recovery.
    fn snapshot_meta(&self) -> Option<&SnapshotMeta> {
        self.wal.as_ref().and_then(OpenWal::snapshot_meta)
    }
}

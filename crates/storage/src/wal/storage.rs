//! [`WalStorage`]: the [`Storage`] contract over a write-ahead log.

use super::open_wal::OpenWal;
use super::options::WalOptions;
use super::promise_file::PromiseFile;
use super::recovery;
use super::snapshot_writer::SnapshotWriter;
use crate::contract;
use crate::error::StorageError;
use crate::fs::{FileSystem, RealFileSystem};
use crate::recovered::Recovered;
use crate::storage::Storage;
use bellwether_core::raft::{Entry, HardState, PromiseRecord, Repair, Snapshot, SnapshotMeta};
use bellwether_core::{LogIndex, Term};
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
    /// The promise record kept beside the log, once
    /// [`WalStorage::keep_promises`] opened it: rewritten after every sync
    /// that changed the term, the vote or the last entry, before the sync
    /// returns (so before any message that depends on it leaves).
    promises: Option<PromiseFile<F>>,
    /// The repair under way, written into every promise record.
    repair: Option<Repair>,
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
            promises: None,
            repair: None,
        })
    }

    /// The WAL directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The files compaction set aside since the last call (covered
    /// segments, replaced snapshots), renamed so that they are no longer
    /// part of the log: the caller deletes them, on a thread where the
    /// time that takes (freeing their cached pages) stalls nothing.
    /// Recovery deletes any left over.
    pub fn take_set_aside(&mut self) -> Vec<std::path::PathBuf> {
        self.wal
            .as_mut()
            .map_or_else(Vec::new, OpenWal::take_set_aside)
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

    /// Opens the promise record at `path` (outside the log's directory, so
    /// that losing the log does not lose it) and returns what it held,
    /// `None` for a new file. From now on every sync keeps it up to date.
    /// Call after recovery, then audit the recovered log against the record
    /// (`bellwether_core::raft::audit`) and call [`WalStorage::write_promises`].
    pub fn keep_promises(
        &mut self,
        fs: &F,
        path: &Path,
    ) -> Result<Option<PromiseRecord>, StorageError>
    where
        F: Clone,
    {
        assert!(self.wal.is_some(), "recover() before keep_promises()");
        let (file, found) = PromiseFile::open(fs.clone(), path)?;
        self.promises = Some(file);
        Ok(found)
    }

    /// Sets the repair written into the promise record from the next write
    /// on (`None` once the member's log holds what it had promised).
    pub fn set_repair(&mut self, repair: Option<Repair>) {
        self.repair = repair;
    }

    /// The repair the promise record carries.
    pub fn repair(&self) -> Option<Repair> {
        self.repair
    }

    /// Writes the promise record for what the log holds now, if it
    /// changed. The log must be synced (nothing staged).
    pub fn write_promises(&mut self) -> Result<(), StorageError> {
        let Some(now) = self.promise_now() else {
            return Ok(());
        };
        let result = self.promises.as_mut().expect("promises kept").write(&now);
        self.guard(result)
    }

    /// Term of the entry at `index`, if the log still tracks it.
    pub fn term_at(&self, index: LogIndex) -> Option<Term> {
        self.wal.as_ref().and_then(|wal| wal.term_at(index))
    }

    /// What the promise record should say of the log as it stands, once
    /// synced; `None` when no record is kept.
    fn promise_now(&self) -> Option<PromiseRecord> {
        self.promises.as_ref()?;
        let wal = self.wal.as_ref()?;
        let hard = wal.hard_state();
        let last_index = wal.last_index();
        Some(PromiseRecord {
            term: hard.term,
            voted_for: hard.voted_for,
            last_term: wal.term_at(last_index).unwrap_or_default(),
            last_index,
            repair: self.repair,
        })
    }

    /// Before the log drops entries from `from` on (a conflict truncation or
    /// a snapshot that replaces them), lowers the record's last entry to
    /// `from - 1`, which the log holds before and after the change, so that
    /// a crash in between never reads as lost entries. The term and vote
    /// stay those already recorded: the log's may not be synced yet.
    fn record_before_dropping(&mut self, from: LogIndex) -> Result<(), StorageError> {
        let (Some(promises), Some(wal)) = (self.promises.as_mut(), self.wal.as_ref()) else {
            return Ok(());
        };
        let Some(current) = promises.current() else {
            return Ok(());
        };
        if current.last_index < from {
            return Ok(());
        }
        let kept = LogIndex(from.0.saturating_sub(1));
        let lowered = PromiseRecord {
            last_index: kept,
            // Compacted away: the snapshot covers it, whatever its term.
            last_term: wal.term_at(kept).unwrap_or(current.last_term),
            ..current
        };
        let result = promises.write(&lowered);
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

impl<F: FileSystem> WalStorage<F> {
    /// [`Storage::recover`], calling `on_snapshot` with the newest
    /// snapshot (read and checked whole) before the segments after it are
    /// read. A runtime can start decoding the snapshot on another thread
    /// meanwhile: at a million keys the two took 0.36 and 0.48 s one after
    /// the other. What recovery returns is still what counts: an audit may
    /// set this log aside after all.
    pub fn recover_observing(
        &mut self,
        on_snapshot: &mut dyn FnMut(&Snapshot),
    ) -> Result<Recovered, StorageError> {
        if let Some(cause) = &self.poisoned {
            return Err(StorageError::Poisoned {
                cause: cause.clone(),
            });
        }
        let fs = self
            .unopened
            .take()
            .expect("recover() is called once per WalStorage; open a new one to recover again");
        match recovery::recover(fs, &self.dir, &self.options, on_snapshot) {
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
}

impl<F: FileSystem> Storage for WalStorage<F> {
    fn recover(&mut self) -> Result<Recovered, StorageError> {
        self.recover_observing(&mut |_| {})
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
        let truncates = entries[0].index <= wal.last_index();
        if truncates {
            self.record_before_dropping(entries[0].index)?;
        }
        let result = self.writable()?.append(entries);
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
        let meta = &snapshot.meta;
        let keeps_log = wal.term_at(meta.last_index) == Some(meta.last_term);
        if !keeps_log {
            // The log is replaced from the first entry the snapshot and the
            // log may disagree on.
            let agreed = meta.last_index.min(wal.last_index());
            self.record_before_dropping(LogIndex(agreed.0.max(1)))?;
        }
        let result = self.writable()?.save_snapshot(snapshot);
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
        self.guard(result)?;
        self.write_promises()
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

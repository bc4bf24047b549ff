//! The WAL after recovery: Raft's writes turned into records, snapshot files
//! and segment deletions.

use super::file_name::snapshot_name;
use super::options::WalOptions;
use super::record::{RecordKind, RECORD_HEADER_BYTES};
use super::segment_log::{SegmentLog, SegmentStart};
use super::snapshot_file::{snapshot_file_bytes, write_snapshot};
use super::term_runs::TermRuns;
use crate::codec::{
    encode_entries, encode_hard_state, encode_snapshot_reset, entry_encoded_bytes,
    ENTRIES_HEADER_BYTES, HARD_STATE_BYTES, SNAPSHOT_RESET_BYTES,
};
use crate::error::StorageError;
use crate::fs::FileSystem;
use bellwether_core::raft::{Entry, HardState, Snapshot, SnapshotMeta};
use bellwether_core::{LogIndex, Term};

/// Bytes every entry record spends besides its entries.
const ENTRY_RECORD_OVERHEAD_BYTES: usize = RECORD_HEADER_BYTES + ENTRIES_HEADER_BYTES;

/// A recovered WAL, open for writing.
#[derive(Debug)]
pub(crate) struct OpenWal<F: FileSystem> {
    /// The segment files.
    log: SegmentLog<F>,
    /// Terms of the stored entries, and where the log ends.
    terms: TermRuns,
    /// Latest hard state, synced or not.
    hard_state: HardState,
    /// The current snapshot's metadata.
    snapshot_meta: Option<SnapshotMeta>,
    /// From [`WalOptions::record_bytes_max`].
    record_bytes_max: u64,
    /// From [`WalOptions::snapshot_bytes_max`].
    snapshot_bytes_max: u64,
}

impl<F: FileSystem> OpenWal<F> {
    /// Wraps what recovery rebuilt.
    pub(crate) fn new(
        log: SegmentLog<F>,
        terms: TermRuns,
        hard_state: HardState,
        snapshot_meta: Option<SnapshotMeta>,
        options: &WalOptions,
    ) -> Self {
        let snapshot_index = snapshot_meta
            .as_ref()
            .map_or(LogIndex(0), |meta| meta.last_index);
        assert!(
            terms.last_index() >= snapshot_index,
            "the log reaches the snapshot"
        );
        OpenWal {
            log,
            terms,
            hard_state,
            snapshot_meta,
            record_bytes_max: options.record_bytes_max,
            snapshot_bytes_max: options.snapshot_bytes_max,
        }
    }

    /// Index of the last entry.
    pub(crate) fn last_index(&self) -> LogIndex {
        self.terms.last_index()
    }

    /// Term of the entry at `index`, if still tracked.
    pub(crate) fn term_at(&self, index: LogIndex) -> Option<Term> {
        self.terms.term_at(index)
    }

    /// Latest hard state.
    pub(crate) fn hard_state(&self) -> HardState {
        self.hard_state
    }

    /// Current snapshot's metadata.
    pub(crate) fn snapshot_meta(&self) -> Option<&SnapshotMeta> {
        self.snapshot_meta.as_ref()
    }

    /// Last index of the current snapshot, 0 without one.
    pub(crate) fn snapshot_index(&self) -> LogIndex {
        self.snapshot_meta
            .as_ref()
            .map_or(LogIndex(0), |meta| meta.last_index)
    }

    /// Number of segment files.
    pub(crate) fn segment_count(&self) -> usize {
        self.log.segment_count()
    }

    /// What a segment created now would record about the log.
    fn start(&self) -> SegmentStart {
        SegmentStart {
            first_index: LogIndex(self.terms.last_index().0 + 1),
            prev_term: self.terms.last_term(),
            hard_state: self.hard_state,
        }
    }

    /// Refuses, before writing anything, an entry that fits in no record.
    fn check_record_sizes(&self, entries: &[Entry]) -> Result<(), StorageError> {
        for entry in entries {
            let bytes = (ENTRY_RECORD_OVERHEAD_BYTES + entry_encoded_bytes(entry)) as u64;
            if bytes > self.record_bytes_max {
                return Err(StorageError::RecordTooLarge {
                    index: entry.index,
                    bytes,
                    bytes_max: self.record_bytes_max,
                });
            }
        }
        Ok(())
    }

    /// Stages `entries` (already checked against the contract) as one or
    /// more records, each as large as the record limit and the room left in
    /// the active segment allow.
    pub(crate) fn append(&mut self, entries: &[Entry]) -> Result<(), StorageError> {
        self.check_record_sizes(entries)?;
        let mut rest = entries;
        // Each pass writes at least one entry or rotates, and a pass after a
        // rotation always writes: at most two passes per entry.
        let passes_max = 2 * entries.len();
        for _ in 0..passes_max {
            if rest.is_empty() {
                break;
            }
            let room = self.log.room_bytes().min(self.record_bytes_max) as usize;
            let capacity_bytes = room.saturating_sub(ENTRY_RECORD_OVERHEAD_BYTES);
            let (count, payload_bytes) = leading_fit(rest, capacity_bytes);
            if count == 0 {
                self.log.rotate(&self.start())?;
                continue;
            }
            let (chunk, tail) = rest.split_at(count);
            let start = self.start();
            self.log.push_record(
                RecordKind::Entries,
                ENTRIES_HEADER_BYTES + payload_bytes,
                &start,
                |buffer| encode_entries(buffer, chunk),
            )?;
            for entry in chunk {
                self.terms.append(entry.index, entry.term);
            }
            rest = tail;
        }
        assert!(rest.is_empty(), "every entry fits a fresh segment");
        Ok(())
    }

    /// Stages a hard state, unless it is the current one.
    pub(crate) fn save_hard_state(&mut self, state: &HardState) -> Result<(), StorageError> {
        if *state == self.hard_state {
            return Ok(());
        }
        let start = self.start();
        self.log
            .push_record(RecordKind::HardState, HARD_STATE_BYTES, &start, |buffer| {
                encode_hard_state(buffer, state);
            })?;
        self.hard_state = *state;
        Ok(())
    }

    /// Stores a snapshot durably, then reconciles the log with it (Raft §7).
    pub(crate) fn save_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StorageError> {
        let meta = &snapshot.meta;
        let bytes = snapshot_file_bytes(snapshot);
        if bytes > self.snapshot_bytes_max {
            return Err(StorageError::SnapshotTooLarge {
                index: meta.last_index,
                bytes,
                bytes_max: self.snapshot_bytes_max,
            });
        }
        // Whatever was staged before the snapshot is durable before it, so
        // that a crash never keeps the snapshot and loses earlier writes.
        self.log.sync()?;
        write_snapshot(self.log.fs(), self.log.dir(), snapshot)?;
        self.make_current(meta)
    }

    /// Takes over the snapshot file for `meta` that a
    /// [`SnapshotWriter`](super::SnapshotWriter) wrote beside the log, and
    /// deletes the segments it covers. A later snapshot saved meanwhile (one
    /// from the leader) wins: this file is then deleted.
    pub(crate) fn record_snapshot(&mut self, meta: &SnapshotMeta) -> Result<(), StorageError> {
        let path = self.log.dir().join(snapshot_name(meta.last_index));
        if meta.last_index <= self.snapshot_index() {
            if meta.last_index < self.snapshot_index() {
                match self.log.set_aside(&path) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        return Err(StorageError::io("rename", &path, error));
                    }
                    _ => self.log.mark_dir_dirty(),
                }
            }
            return self.log.sync();
        }
        // The segments this file replaces are deleted below: it must exist.
        self.log
            .fs()
            .file_len(&path)
            .map_err(|error| StorageError::io("stat", &path, error))?;
        self.log.sync()?;
        self.make_current(meta)?;
        self.compact(meta.last_index)
    }

    /// Records the durable snapshot file for `meta` as the current one,
    /// deletes the previous one, and resets the log if it does not contain
    /// the snapshot's last entry.
    fn make_current(&mut self, meta: &SnapshotMeta) -> Result<(), StorageError> {
        let previous = self.snapshot_meta.replace(meta.clone());
        if let Some(previous) = previous.filter(|previous| previous.last_index != meta.last_index) {
            let path = self.log.dir().join(snapshot_name(previous.last_index));
            self.log
                .set_aside(&path)
                .map_err(|error| StorageError::io("rename", &path, error))?;
        }
        if self.terms.term_at(meta.last_index) != Some(meta.last_term) {
            // The log does not contain the snapshot's last entry: it is
            // discarded, and the next entry follows the snapshot. A segment
            // created for the reset record describes the log before it.
            let start = self.start();
            self.terms = TermRuns::anchored(meta.last_index, meta.last_term);
            self.log.push_record(
                RecordKind::SnapshotReset,
                SNAPSHOT_RESET_BYTES,
                &start,
                |buffer| encode_snapshot_reset(buffer, meta.last_index, meta.last_term),
            )?;
        }
        self.log.sync()
    }

    /// A writer of snapshot files into this log's directory, for another
    /// thread.
    pub(crate) fn snapshot_writer(&self) -> super::SnapshotWriter<F>
    where
        F: Clone,
    {
        super::SnapshotWriter::new(
            self.log.fs().clone(),
            self.log.dir().to_path_buf(),
            self.snapshot_bytes_max,
        )
    }

    /// Syncs, then deletes the segments compaction through `through` frees.
    pub(crate) fn compact(&mut self, through: LogIndex) -> Result<(), StorageError> {
        assert!(through <= self.snapshot_index(), "checked by the caller");
        self.log.sync()?;
        self.log.compact(through)?;
        self.terms.compact(through);
        Ok(())
    }

    /// The files set aside for deletion since the last call: covered
    /// segments and replaced snapshots, renamed (see
    /// `file_name::DELETED_SUFFIX`), for the runtime to delete off its loop.
    pub(crate) fn take_set_aside(&mut self) -> Vec<std::path::PathBuf> {
        self.log.take_set_aside()
    }

    /// Makes everything staged durable; free when nothing is.
    pub(crate) fn sync(&mut self) -> Result<(), StorageError> {
        if !self.log.is_dirty() {
            return Ok(());
        }
        self.log.sync()
    }
}

/// How many leading entries of `entries` fit in `capacity_bytes`, and the
/// bytes they take.
fn leading_fit(entries: &[Entry], capacity_bytes: usize) -> (usize, usize) {
    let mut used_bytes = 0;
    for (count, entry) in entries.iter().enumerate() {
        let bytes = entry_encoded_bytes(entry);
        if used_bytes + bytes > capacity_bytes {
            return (count, used_bytes);
        }
        used_bytes += bytes;
    }
    (entries.len(), used_bytes)
}

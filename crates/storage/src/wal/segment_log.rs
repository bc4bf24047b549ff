//! The WAL's segment files: appending records, rotating to a new segment at
//! the size limit, syncing, and deleting segments a snapshot has covered.
//!
//! Ordering rules that recovery relies on:
//!
//! - a segment is fsync'd before the next one is created, so every segment
//!   but the last is complete on disk, and only the last can have a torn
//!   tail;
//! - every segment starts with its header and a hard-state record, so
//!   deleting older segments never loses the latest hard state;
//! - segments are deleted only after everything staged is durable, and only
//!   when the segment after them starts at or before the compaction point,
//!   so what they held is covered by the snapshot.

use super::active_segment::ActiveSegment;
use super::file_name::segment_name;
use super::options::WalOptions;
use super::record::{RecordKind, RECORD_HEADER_BYTES};
use super::segment_header::SegmentHeader;
use crate::codec::encode_hard_state;
use crate::error::StorageError;
use crate::fs::{FileSystem, WalFile};
use bellwether_core::raft::HardState;
use bellwether_core::{LogIndex, Term};
use std::io;
use std::path::{Path, PathBuf};

/// A segment that is no longer appended to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SealedSegment {
    /// Its sequence number.
    pub(crate) sequence: u64,
    /// Index its first entry may take, from its header.
    pub(crate) first_index: LogIndex,
    /// Where it is, for deletion.
    pub(crate) path: PathBuf,
}

/// What a new segment's preamble records about the log at its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentStart {
    /// Index the next entry will take.
    pub(crate) first_index: LogIndex,
    /// Term of the entry before it.
    pub(crate) prev_term: Term,
    /// The hard state in force, repeated at the start of every segment.
    pub(crate) hard_state: HardState,
}

/// The ordered segments of one WAL directory.
#[derive(Debug)]
pub(crate) struct SegmentLog<F: FileSystem> {
    /// Where the files live.
    fs: F,
    /// The WAL directory.
    dir: PathBuf,
    /// Rotation threshold, from [`WalOptions::segment_bytes_max`].
    segment_bytes_max: u64,
    /// Flush threshold, from [`WalOptions::write_buffer_bytes_max`].
    write_buffer_bytes_max: usize,
    /// Older segments, in sequence order, oldest first.
    sealed: Vec<SealedSegment>,
    /// The segment being appended to.
    active: ActiveSegment<F::File>,
    /// Whether a file was created or removed since the directory was last
    /// fsync'd; until it is, the change may be undone by a crash.
    dir_dirty: bool,
    /// Files renamed for deletion that the runtime has not taken yet (see
    /// [`SegmentLog::set_aside`]).
    set_aside: Vec<PathBuf>,
}

impl<F: FileSystem> SegmentLog<F> {
    /// Assembles the log from recovered parts.
    pub(crate) fn new(
        fs: F,
        dir: PathBuf,
        options: &WalOptions,
        sealed: Vec<SealedSegment>,
        active: ActiveSegment<F::File>,
        dir_dirty: bool,
    ) -> Self {
        assert!(
            sealed
                .iter()
                .all(|segment| segment.sequence < active.sequence()),
            "sealed segments precede the active one"
        );
        SegmentLog {
            fs,
            dir,
            segment_bytes_max: options.segment_bytes_max,
            write_buffer_bytes_max: options.write_buffer_bytes_max,
            sealed,
            active,
            dir_dirty,
            set_aside: Vec::new(),
        }
    }

    /// Renames `path` for deletion (see `file_name::DELETED_SUFFIX`): it
    /// is no longer part of the WAL once the directory is synced, and the
    /// runtime deletes it later, off its loop
    /// ([`SegmentLog::take_set_aside`]); recovery deletes any left over.
    pub(crate) fn set_aside(&mut self, path: &Path) -> io::Result<()> {
        let mut aside = path.as_os_str().to_owned();
        aside.push(super::file_name::DELETED_SUFFIX);
        let aside = PathBuf::from(aside);
        self.fs.rename(path, &aside)?;
        self.dir_dirty = true;
        self.set_aside.push(aside);
        Ok(())
    }

    /// The files set aside for deletion since the last call.
    pub(crate) fn take_set_aside(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.set_aside)
    }

    /// Creates segment `sequence`, `bytes_max` long ahead of its writes
    /// (see [`WalFile::preallocate`](crate::fs::WalFile::preallocate)), and
    /// stages its header and hard state.
    pub(crate) fn create_segment(
        fs: &F,
        dir: &Path,
        sequence: u64,
        start: &SegmentStart,
        bytes_max: u64,
    ) -> Result<ActiveSegment<F::File>, StorageError> {
        let path = dir.join(segment_name(sequence, start.first_index));
        let mut file = fs
            .create_new(&path)
            .map_err(|error| StorageError::io("create", &path, error))?;
        file.preallocate(bytes_max)
            .map_err(|error| StorageError::io("preallocate", &path, error))?;
        let header = SegmentHeader {
            sequence,
            first_index: start.first_index,
            prev_term: start.prev_term,
        };
        let mut segment = ActiveSegment::created(file, path, header);
        segment.push_record(RecordKind::HardState, |buffer| {
            encode_hard_state(buffer, &start.hard_state);
        });
        Ok(segment)
    }

    /// The file system, shared with snapshot writing.
    pub(crate) fn fs(&self) -> &F {
        &self.fs
    }

    /// The WAL directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes the active segment can still take before rotation.
    pub(crate) fn room_bytes(&self) -> u64 {
        self.segment_bytes_max
            .saturating_sub(self.active.len_bytes())
    }

    /// Number of segment files, for tests and metrics.
    pub(crate) fn segment_count(&self) -> usize {
        self.sealed.len() + 1
    }

    /// Whether the active segment holds a hard-state record.
    pub(crate) fn active_has_hard_state(&self) -> bool {
        self.active.has_hard_state()
    }

    /// Records that a file in the directory was created, renamed or removed
    /// outside this type, so the next sync also syncs the directory.
    pub(crate) fn mark_dir_dirty(&mut self) {
        self.dir_dirty = true;
    }

    /// Stages one record of `payload_bytes` bytes, rotating first if it does
    /// not fit in the active segment.
    pub(crate) fn push_record(
        &mut self,
        kind: RecordKind,
        payload_bytes: usize,
        start: &SegmentStart,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), StorageError> {
        let record_bytes = (RECORD_HEADER_BYTES + payload_bytes) as u64;
        if record_bytes > self.room_bytes() {
            self.rotate(start)?;
        }
        assert!(
            record_bytes <= self.room_bytes(),
            "options guarantee a record fits a fresh segment"
        );
        let before = self.active.len_bytes();
        self.active.push_record(kind, encode);
        assert_eq!(
            self.active.len_bytes() - before,
            record_bytes,
            "predicted and encoded record sizes must agree, or rotation overshoots"
        );
        if self.active.buffered_bytes() >= self.write_buffer_bytes_max {
            self.active.flush()?;
        }
        Ok(())
    }

    /// Stages a record in the active segment even if it overflows
    /// `segment_bytes_max`. Recovery uses it for the few bytes of repair
    /// records, whose segment header could not describe the log correctly
    /// if they started a new segment (the log's end before a snapshot reset
    /// may be unknown). It overshoots by at most one reset and one
    /// hard-state record.
    pub(crate) fn push_repair_record(
        &mut self,
        kind: RecordKind,
        payload_bytes: usize,
        encode: impl FnOnce(&mut Vec<u8>),
    ) {
        assert!(
            matches!(kind, RecordKind::SnapshotReset | RecordKind::HardState),
            "only small repair records bypass rotation"
        );
        let before = self.active.len_bytes();
        self.active.push_record(kind, encode);
        assert_eq!(
            self.active.len_bytes() - before,
            (RECORD_HEADER_BYTES + payload_bytes) as u64
        );
    }

    /// Seals the active segment (after making it durable, and cutting the
    /// space preallocated past its last record) and starts the next one.
    pub(crate) fn rotate(&mut self, start: &SegmentStart) -> Result<(), StorageError> {
        self.active.sync()?;
        self.active.seal()?;
        let sequence = self.active.sequence() + 1;
        let next =
            Self::create_segment(&self.fs, &self.dir, sequence, start, self.segment_bytes_max)?;
        let sealed = std::mem::replace(&mut self.active, next);
        self.sealed.push(SealedSegment {
            sequence: sealed.sequence(),
            first_index: sealed.first_index(),
            path: sealed.path().to_path_buf(),
        });
        self.dir_dirty = true;
        assert!(
            self.room_bytes() >= self.segment_bytes_max - super::options::SEGMENT_PREAMBLE_BYTES
        );
        Ok(())
    }

    /// Whether a sync would have anything to do.
    pub(crate) fn is_dirty(&self) -> bool {
        self.active.is_dirty() || self.dir_dirty
    }

    /// Makes everything staged durable: one write, one fsync of the active
    /// segment, and one of the directory if a file was created or removed.
    pub(crate) fn sync(&mut self) -> Result<(), StorageError> {
        self.active.sync()?;
        if self.dir_dirty {
            self.fs
                .sync_dir(&self.dir)
                .map_err(|error| StorageError::io("fsync directory", &self.dir, error))?;
            self.dir_dirty = false;
        }
        assert!(!self.is_dirty());
        Ok(())
    }

    /// Deletes the oldest segments whose entries all lie at or before
    /// `through`: those followed by a segment that starts at or before
    /// `through + 1`. The active segment is never deleted. Returns how many
    /// were deleted; they are set aside (renamed) durably on return, and
    /// removed by whoever takes them (`take_set_aside`).
    pub(crate) fn compact(&mut self, through: LogIndex) -> Result<usize, StorageError> {
        let next_first = |i: usize| {
            self.sealed
                .get(i + 1)
                .map_or(self.active.first_index(), |segment| segment.first_index)
        };
        let removable = (0..self.sealed.len())
            .filter(|&i| next_first(i).0 <= through.0 + 1)
            .map(|i| i + 1)
            .max()
            .unwrap_or(0);
        if removable == 0 {
            return Ok(0);
        }
        assert!(
            !self.is_dirty(),
            "segments are deleted only once everything is durable"
        );
        let covered: Vec<SealedSegment> = self.sealed.drain(..removable).collect();
        for segment in covered {
            self.set_aside(&segment.path)
                .map_err(|error| StorageError::io("rename", &segment.path, error))?;
        }
        self.sync()?;
        Ok(removable)
    }
}

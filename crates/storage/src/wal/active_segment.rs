//! The segment currently appended to, with its write buffer.
//!
//! Records are encoded into an in-memory buffer and handed to the operating
//! system in one `write` when the buffer is full or at the next sync, so a
//! group commit of many appends costs one write and one fsync.

use super::record::{begin_record, finish_record, RecordKind};
use super::segment_header::SegmentHeader;
use crate::error::StorageError;
use crate::fs::WalFile;
use bellwether_core::LogIndex;
use std::path::{Path, PathBuf};

/// The open, growing end of the WAL.
#[derive(Debug)]
pub(crate) struct ActiveSegment<W: WalFile> {
    /// The open file; appends go after its last record.
    file: W,
    /// Its path, for error messages and for deletion once it is sealed.
    path: PathBuf,
    /// Its sequence number.
    sequence: u64,
    /// Index its first entry may take, from its header.
    first_index: LogIndex,
    /// Bytes already handed to the operating system.
    written_bytes: u64,
    /// Records encoded but not yet written. Cleared, not freed, after each
    /// write, so steady-state appends reuse one allocation.
    buffer: Vec<u8>,
    /// Whether bytes were written since the last fsync.
    unsynced: bool,
    /// Whether this segment holds a hard-state record; every segment must,
    /// so that deleting older segments never loses the latest hard state.
    has_hard_state: bool,
}

impl<W: WalFile> ActiveSegment<W> {
    /// A segment just created: its header is staged, nothing is written.
    pub(crate) fn created(file: W, path: PathBuf, header: SegmentHeader) -> Self {
        let mut segment = ActiveSegment {
            file,
            path,
            sequence: header.sequence,
            first_index: header.first_index,
            written_bytes: 0,
            buffer: Vec::new(),
            unsynced: false,
            has_hard_state: false,
        };
        header.encode(&mut segment.buffer);
        segment
    }

    /// An existing segment reopened after recovery, `len_bytes` long.
    pub(crate) fn resumed(
        file: W,
        path: PathBuf,
        header: SegmentHeader,
        len_bytes: u64,
        has_hard_state: bool,
    ) -> Self {
        ActiveSegment {
            file,
            path,
            sequence: header.sequence,
            first_index: header.first_index,
            written_bytes: len_bytes,
            buffer: Vec::new(),
            unsynced: false,
            has_hard_state,
        }
    }

    /// The segment's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The segment's sequence number.
    pub(crate) fn sequence(&self) -> u64 {
        self.sequence
    }

    /// Index its first entry may take.
    pub(crate) fn first_index(&self) -> LogIndex {
        self.first_index
    }

    /// Size the segment will have once the buffer is written.
    pub(crate) fn len_bytes(&self) -> u64 {
        self.written_bytes + self.buffer.len() as u64
    }

    /// Bytes staged in memory.
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.buffer.len()
    }

    /// Whether a hard-state record was written to (or staged in) it.
    pub(crate) fn has_hard_state(&self) -> bool {
        self.has_hard_state
    }

    /// Whether anything staged or written awaits an fsync.
    pub(crate) fn is_dirty(&self) -> bool {
        self.unsynced || !self.buffer.is_empty()
    }

    /// Stages one record whose payload `encode` appends.
    pub(crate) fn push_record(&mut self, kind: RecordKind, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = begin_record(&mut self.buffer);
        encode(&mut self.buffer);
        finish_record(&mut self.buffer, start, kind);
        if kind == RecordKind::HardState {
            self.has_hard_state = true;
        }
    }

    /// Hands the buffer to the operating system in one write.
    pub(crate) fn flush(&mut self) -> Result<(), StorageError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(&self.buffer)
            .map_err(|error| StorageError::io("write", &self.path, error))?;
        self.written_bytes += self.buffer.len() as u64;
        self.buffer.clear();
        self.unsynced = true;
        Ok(())
    }

    /// Cuts space preallocated past the last record, durably. Called on a
    /// synced segment that is about to stop being the last.
    pub(crate) fn seal(&mut self) -> Result<(), StorageError> {
        assert!(!self.is_dirty(), "only a synced segment is sealed");
        self.file
            .seal()
            .map_err(|error| StorageError::io("seal", &self.path, error))
    }

    /// Writes the buffer and fsyncs the file, if anything is pending.
    pub(crate) fn sync(&mut self) -> Result<(), StorageError> {
        self.flush()?;
        if self.unsynced {
            self.file
                .sync_data()
                .map_err(|error| StorageError::io("fsync", &self.path, error))?;
            self.unsynced = false;
        }
        assert!(!self.is_dirty(), "a synced segment has nothing pending");
        Ok(())
    }
}

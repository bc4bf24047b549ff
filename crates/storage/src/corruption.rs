//! The kinds of damage recovery refuses to repair.
//!
//! Only one kind of damage is repaired silently: a torn tail, the last
//! unsynced write cut short by a crash (see `wal::segment_scan`). Everything
//! listed here means bytes that were once durable have changed, or a file is
//! missing, and guessing would risk serving a log that Raft never agreed on.

use bellwether_core::{LogIndex, Term};

/// What is wrong at a given offset of a given file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Corruption {
    /// No record of the promise file passes its checksum.
    #[error("no valid promise record")]
    PromiseRecord,
    /// The file does not start with the magic number of its kind.
    #[error("bad magic number (not a bellwether {expected} file)")]
    BadMagic {
        /// "WAL segment" or "snapshot".
        expected: &'static str,
    },
    /// The file was written by a format this build does not read.
    #[error("format version {version} is not supported (this build reads version {supported})")]
    UnsupportedVersion {
        /// Version found.
        version: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// A header's own checksum does not match.
    #[error("header checksum mismatch")]
    HeaderChecksum,
    /// A record's payload checksum does not match, and valid data follows it.
    #[error("record checksum mismatch")]
    RecordChecksum,
    /// A record is cut short where no crash can have cut it (not at the end of
    /// the last segment).
    #[error("record truncated: {bytes_needed} bytes needed, {bytes_found} present")]
    Truncated {
        /// Bytes the header promised.
        bytes_needed: u64,
        /// Bytes present in the file.
        bytes_found: u64,
    },
    /// A record kind this build does not know.
    #[error("unknown record kind {kind}")]
    UnknownRecordKind {
        /// The kind byte found.
        kind: u8,
    },
    /// A record larger than the format allows.
    #[error("record of {bytes} bytes exceeds the format limit of {bytes_max} bytes")]
    RecordTooLarge {
        /// Size claimed by the header.
        bytes: u64,
        /// Hard limit of the format.
        bytes_max: u64,
    },
    /// A file larger than the format allows.
    #[error("file of {bytes} bytes exceeds the limit of {bytes_max} bytes")]
    FileTooLarge {
        /// Size found.
        bytes: u64,
        /// Limit.
        bytes_max: u64,
    },
    /// A checksummed payload that does not decode: a bug or a foreign writer.
    #[error("malformed payload: {0}")]
    Malformed(String),
    /// The log skips indexes, so entries are missing.
    #[error("log gap: expected an entry at or before {expected}, found {found}")]
    IndexGap {
        /// The next index the log could hold.
        expected: LogIndex,
        /// The index found instead.
        found: LogIndex,
    },
    /// A term goes down along the log, which Raft never produces.
    #[error("term decreases along the log: {term} at {index} follows {previous}")]
    TermDecreases {
        /// Where.
        index: LogIndex,
        /// Term found there.
        term: Term,
        /// Term of the entry before it.
        previous: Term,
    },
    /// A segment's header disagrees with the segments before it.
    #[error("segment header says the log ends at {header_index} (term {header_term}) before it, but the previous segments end at {log_index}{}", log_term.map(|term| format!(" (term {term})")).unwrap_or_default())]
    SegmentMismatch {
        /// Index the header claims precedes the segment.
        header_index: LogIndex,
        /// Term the header claims for it.
        header_term: Term,
        /// Where the replayed log actually ends.
        log_index: LogIndex,
        /// Term the replayed log has there, if known.
        log_term: Option<Term>,
    },
    /// A segment in the middle of the log is missing.
    #[error("segment {sequence} is missing and its entries are not covered by a snapshot")]
    MissingSegment {
        /// Sequence number of the missing segment.
        sequence: u64,
    },
    /// The log refers to a snapshot newer than any snapshot file present.
    #[error("the log records a snapshot at {marker_index}, but the newest snapshot file ends at {snapshot_index}")]
    MissingSnapshot {
        /// Snapshot index the log records.
        marker_index: LogIndex,
        /// Newest snapshot found.
        snapshot_index: LogIndex,
    },
    /// A file has a WAL extension but not a WAL name, so it may be a segment
    /// someone renamed; ignoring it could hide lost entries.
    #[error(
        "file name has a WAL extension but not the WAL's name format; move it out of the directory"
    )]
    UnrecognizedName,
    /// A file name and the header inside disagree.
    #[error("file name says {name_says}, header says {header_says}")]
    NameMismatch {
        /// What the name encodes.
        name_says: String,
        /// What the header encodes.
        header_says: String,
    },
}

impl Corruption {
    /// True for damage to bytes or files that were once written whole
    /// (checksums, cut records, gaps, missing segments or snapshots): a
    /// log its peers can give back. False for a directory this build
    /// cannot read but is not damaged (a newer format, a limit, a stray
    /// file name), which must stay as it is.
    pub fn is_lost_data(&self) -> bool {
        !matches!(
            self,
            Corruption::UnsupportedVersion { .. }
                | Corruption::FileTooLarge { .. }
                | Corruption::UnrecognizedName
                | Corruption::NameMismatch { .. }
        )
    }
}

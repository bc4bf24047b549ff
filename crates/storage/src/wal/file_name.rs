//! Names of the files in a WAL directory, and what a name says.
//!
//! ```text
//! {sequence:016x}-{first_index:016x}.wal   a log segment
//! {last_index:016x}.snap                    a complete snapshot
//! {last_index:016x}.snap.tmp                a snapshot being written
//! {any of the above}.deleted.tmp            a file set aside for deletion
//! ```
//!
//! Fixed-width hexadecimal makes lexical order numeric order, so a plain
//! `ls` lists segments in log order.

use bellwether_core::LogIndex;

/// Extension of segment files.
const SEGMENT_SUFFIX: &str = ".wal";
/// Extension of complete snapshot files.
const SNAPSHOT_SUFFIX: &str = ".snap";
/// Extension of snapshot files not yet renamed into place.
const TEMP_SUFFIX: &str = ".tmp";

/// What a directory entry is, judged by its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FileName {
    /// A log segment.
    Segment {
        /// Its sequence number.
        sequence: u64,
        /// The first index it may hold.
        first_index: LogIndex,
    },
    /// A complete snapshot.
    Snapshot {
        /// The last index it covers.
        last_index: LogIndex,
    },
    /// A leftover of an interrupted snapshot write.
    Temporary,
    /// Has a WAL extension but not the WAL's name shape: someone else wrote
    /// or renamed it, and ignoring it could hide a lost segment.
    Unrecognized,
    /// Not the WAL's business (`lost+found`, an editor's backup, ...).
    Foreign,
}

/// What a file set aside for deletion is renamed to: its name with this
/// appended. The rename is quick where deleting a large file (freeing its
/// cached pages: about 300 ms for a GiB of segments on the test machine)
/// is not, so the deletion itself is left to the runtime, off its loop; a
/// name that ends in [`TEMP_SUFFIX`] is a leftover recovery deletes.
pub(crate) const DELETED_SUFFIX: &str = ".deleted.tmp";

/// Name of the segment with this sequence number and first index.
pub(crate) fn segment_name(sequence: u64, first_index: LogIndex) -> String {
    format!("{sequence:016x}-{:016x}{SEGMENT_SUFFIX}", first_index.0)
}

/// Name of the snapshot ending at `last_index`.
pub(crate) fn snapshot_name(last_index: LogIndex) -> String {
    format!("{:016x}{SNAPSHOT_SUFFIX}", last_index.0)
}

/// Name under which that snapshot is written before it is renamed.
pub(crate) fn snapshot_temp_name(last_index: LogIndex) -> String {
    format!("{}{TEMP_SUFFIX}", snapshot_name(last_index))
}

fn hex16(text: &str) -> Option<u64> {
    if text.len() != 16 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
}

/// Classifies a directory entry by its name.
pub(crate) fn classify(name: &str) -> FileName {
    if name.ends_with(TEMP_SUFFIX) {
        return FileName::Temporary;
    }
    if let Some(stem) = name.strip_suffix(SEGMENT_SUFFIX) {
        let parsed = stem
            .split_once('-')
            .and_then(|(sequence, first)| Some((hex16(sequence)?, hex16(first)?)));
        return match parsed {
            Some((sequence, first_index)) => FileName::Segment {
                sequence,
                first_index: LogIndex(first_index),
            },
            None => FileName::Unrecognized,
        };
    }
    if let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX) {
        return match hex16(stem) {
            Some(last_index) => FileName::Snapshot {
                last_index: LogIndex(last_index),
            },
            None => FileName::Unrecognized,
        };
    }
    FileName::Foreign
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort_numerically() {
        let name = segment_name(10, LogIndex(255));
        assert_eq!(name, "000000000000000a-00000000000000ff.wal");
        assert_eq!(
            classify(&name),
            FileName::Segment {
                sequence: 10,
                first_index: LogIndex(255)
            }
        );
        assert!(segment_name(9, LogIndex(1)) < segment_name(10, LogIndex(1)));
        assert_eq!(
            classify(&snapshot_name(LogIndex(7))),
            FileName::Snapshot {
                last_index: LogIndex(7)
            }
        );
        assert_eq!(
            classify(&snapshot_temp_name(LogIndex(7))),
            FileName::Temporary
        );
    }

    #[test]
    fn lookalikes_are_flagged_and_strangers_ignored() {
        assert_eq!(classify("segment.wal"), FileName::Unrecognized);
        assert_eq!(classify("00000000000000zz.snap"), FileName::Unrecognized);
        assert_eq!(classify("lost+found"), FileName::Foreign);
        assert_eq!(classify("notes.txt"), FileName::Foreign);
    }
}

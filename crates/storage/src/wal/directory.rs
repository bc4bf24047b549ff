//! What a WAL directory holds, sorted out by file name before recovery reads
//! any file.

use super::file_name::{classify, FileName};
use crate::corruption::Corruption;
use crate::error::StorageError;
use crate::fs::FileSystem;
use bellwether_core::LogIndex;
use std::path::{Path, PathBuf};

/// A segment file as its name describes it (the header is checked later).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ListedSegment {
    /// Sequence number from the name.
    pub(crate) sequence: u64,
    /// First index from the name.
    pub(crate) first_index: LogIndex,
    /// Full path.
    pub(crate) path: PathBuf,
}

/// The WAL files of a directory, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DirectoryListing {
    /// Segments in sequence order.
    pub(crate) segments: Vec<ListedSegment>,
    /// Complete snapshots by last index, ascending.
    pub(crate) snapshots: Vec<(LogIndex, PathBuf)>,
    /// Leftovers of interrupted snapshot writes.
    pub(crate) temporaries: Vec<PathBuf>,
}

impl DirectoryListing {
    /// Lists `dir`, refusing names that look like WAL files but are not.
    pub(crate) fn read<F: FileSystem>(fs: &F, dir: &Path) -> Result<Self, StorageError> {
        let names = fs
            .list_dir(dir)
            .map_err(|error| StorageError::io("list", dir, error))?;
        let mut listing = DirectoryListing::default();
        for name in names {
            let path = dir.join(&name);
            match classify(&name) {
                FileName::Segment {
                    sequence,
                    first_index,
                } => listing.segments.push(ListedSegment {
                    sequence,
                    first_index,
                    path,
                }),
                FileName::Snapshot { last_index } => listing.snapshots.push((last_index, path)),
                FileName::Temporary => listing.temporaries.push(path),
                FileName::Unrecognized => {
                    return Err(StorageError::corrupt(path, 0, Corruption::UnrecognizedName));
                }
                FileName::Foreign => {}
            }
        }
        listing.segments.sort_by_key(|segment| segment.sequence);
        listing.snapshots.sort();
        for pair in listing.segments.windows(2) {
            if pair[0].sequence == pair[1].sequence {
                let reason = Corruption::Malformed(format!(
                    "two segments have sequence number {}",
                    pair[0].sequence
                ));
                return Err(StorageError::corrupt(&pair[1].path, 0, reason));
            }
        }
        Ok(listing)
    }

    /// Highest sequence number present, 0 if none.
    pub(crate) fn max_sequence(&self) -> u64 {
        self.segments.last().map_or(0, |segment| segment.sequence)
    }
}

/// Splits `segments` (in sequence order) into stale ones, which recovery
/// does not need, and live ones, which it replays.
///
/// Replay starts at the last segment created while the log ended at or
/// before the snapshot (`first_index <= snapshot_index + 1`). Nothing before
/// it can matter: every entry older segments held past the snapshot had been
/// truncated when that segment was created, it starts with the hard state of
/// its time, and its header records where the log ended. Starting there also
/// absorbs a compaction that a crash interrupted after deleting only some of
/// its segments, in any order. The live segments must then be consecutive,
/// or a segment holding needed entries is missing.
pub(crate) fn split_stale(
    segments: &[ListedSegment],
    snapshot_index: LogIndex,
) -> Result<(&[ListedSegment], &[ListedSegment]), StorageError> {
    let start = segments
        .iter()
        .rposition(|segment| segment.first_index.0 <= snapshot_index.0 + 1)
        .unwrap_or(0);
    let (stale, live) = segments.split_at(start);
    for pair in live.windows(2) {
        if pair[1].sequence != pair[0].sequence + 1 {
            let reason = Corruption::MissingSegment {
                sequence: pair[0].sequence + 1,
            };
            return Err(StorageError::corrupt(&pair[1].path, 0, reason));
        }
    }
    Ok((stale, live))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(segments: &[(u64, u64)]) -> Vec<ListedSegment> {
        segments
            .iter()
            .map(|&(sequence, first)| ListedSegment {
                sequence,
                first_index: LogIndex(first),
                path: PathBuf::from(format!("/wal/{sequence}")),
            })
            .collect()
    }

    #[test]
    fn replay_starts_at_the_last_segment_that_begins_within_the_snapshot() {
        let segments = listed(&[(1, 1), (2, 30), (3, 50), (4, 90)]);
        let (stale, live) = split_stale(&segments, LogIndex(60)).unwrap();
        assert_eq!(stale.len(), 2);
        assert_eq!(live.len(), 2);
        let (stale, live) = split_stale(&segments, LogIndex(0)).unwrap();
        assert!(stale.is_empty());
        assert_eq!(live.len(), 4);
    }

    #[test]
    fn a_missing_segment_after_the_start_is_corruption() {
        let segments = listed(&[(3, 50), (4, 60), (6, 90)]);
        let error = split_stale(&segments, LogIndex(55))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("segment 5 is missing") && error.contains("/wal/6"),
            "{error}"
        );
        assert!(
            split_stale(&segments, LogIndex(95)).is_ok(),
            "covered by the snapshot"
        );
    }
}

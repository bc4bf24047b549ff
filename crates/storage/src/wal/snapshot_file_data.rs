//! [`SnapshotFileData`]: a snapshot file's data as the node's
//! [`StoredSnapshot`], so that a member keeps its latest snapshot on disk
//! rather than in memory and reads only the chunks it sends.
//!
//! The file was written and synced by this log (or read and checked whole
//! at recovery), or is being written by a [`super::SnapshotStream`] whose
//! data is complete, before it is opened here (see `snapshot_file.rs` for
//! where the data lies). The open handle keeps the bytes readable after a
//! newer snapshot deletes the file's name.

use super::snapshot_file::data_offset_in;
use crate::corruption::Corruption;
use crate::error::StorageError;
use bellwether_core::raft::{SnapshotMeta, StoredSnapshot};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The data of one snapshot file, read a chunk at a time.
#[derive(Debug)]
pub struct SnapshotFileData {
    /// The open file.
    file: File,
    /// Its path, for the message of a failed read.
    path: PathBuf,
    /// Where the data starts in it.
    offset: u64,
    /// The data's length.
    len: u64,
}

impl SnapshotFileData {
    /// Opens the snapshot file at `path`, written for `meta` with `len`
    /// bytes of data; refuses a file too short for them.
    pub fn open(path: &Path, meta: &SnapshotMeta, len: u64) -> Result<Self, StorageError> {
        let file = File::open(path).map_err(|error| StorageError::io("open", path, error))?;
        let file_len = file
            .metadata()
            .map_err(|error| StorageError::io("stat", path, error))?
            .len();
        let mut head = [0; 16];
        file.read_exact_at(&mut head, 0)
            .map_err(|error| StorageError::io("read", path, error))?;
        let offset = data_offset_in(&head, meta).ok_or_else(|| {
            let reason = Corruption::BadMagic {
                expected: "snapshot",
            };
            StorageError::corrupt(path, 0, reason)
        })?;
        // Version 1 ends with the data; version 2 with a trailer after it.
        if file_len < offset + len {
            let reason = Corruption::Truncated {
                bytes_needed: offset + len,
                bytes_found: file_len,
            };
            return Err(StorageError::corrupt(path, 0, reason));
        }
        Ok(SnapshotFileData {
            file,
            path: path.to_path_buf(),
            offset,
            len,
        })
    }
}

impl super::SnapshotStream<crate::fs::RealFileSystem> {
    /// The data streamed so far, read from the file being written: what a
    /// leader sends lagging followers from before the file is finished.
    pub fn data(&self) -> Result<SnapshotFileData, StorageError> {
        let path = self.temp_path();
        let file = File::open(&path).map_err(|error| StorageError::io("open", &path, error))?;
        Ok(SnapshotFileData {
            file,
            path,
            offset: super::snapshot_file::SNAPSHOT_DATA_OFFSET,
            len: self.data_len(),
        })
    }
}

impl StoredSnapshot for SnapshotFileData {
    fn len(&self) -> u64 {
        self.len
    }

    /// Panics when the file cannot be read: the member wrote and synced
    /// it, so a failed read is a failed disk, and the member stops rather
    /// than send a follower anything else.
    fn read(&self, start: u64, end: u64) -> Vec<u8> {
        assert!(start <= end && end <= self.len, "a read within the data");
        let mut chunk = vec![0; (end - start) as usize];
        if let Err(error) = self.file.read_exact_at(&mut chunk, self.offset + start) {
            panic!(
                "cannot read the snapshot file {} at {}: {error}",
                self.path.display(),
                self.offset + start
            );
        }
        chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFileSystem;
    use crate::wal::snapshot_file::write_snapshot;
    use bellwether_core::raft::{ClusterConfig, Snapshot};
    use bellwether_core::{LogIndex, NodeId, Term};

    #[test]
    fn reads_the_data_it_was_written_with_and_refuses_a_longer_one() {
        let dir = std::env::temp_dir().join(format!("bw-snapshot-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let snapshot = Snapshot {
            meta: SnapshotMeta {
                last_index: LogIndex(7),
                last_term: Term(2),
                config: ClusterConfig::voters([NodeId(1), NodeId(2), NodeId(3)]),
            },
            data: data.clone().into(),
        };
        let path = write_snapshot(&RealFileSystem::default(), &dir, &snapshot).unwrap();
        let stored = SnapshotFileData::open(&path, &snapshot.meta, data.len() as u64).unwrap();
        assert_eq!(stored.len(), data.len() as u64);
        assert_eq!(stored.read(0, 10), data[..10]);
        assert_eq!(stored.read(65_536, 100_000), data[65_536..]);
        assert!(SnapshotFileData::open(&path, &snapshot.meta, 200_000).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_sealed_stream_reads_whole_where_writes_wait_for_their_fsync() {
        let dir = std::env::temp_dir().join(format!("bw-snapshot-held-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fs = RealFileSystem {
            unsynced: crate::fs::Unsynced::HeldInProcess,
        };
        let mut stream =
            super::super::SnapshotStream::create(fs, &dir, LogIndex(9), u64::MAX).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        std::io::Write::write_all(&mut stream, &data).unwrap();
        let file_len = |path: &Path| std::fs::metadata(path).unwrap().len();
        assert!(
            file_len(&stream.temp_path()) < data.len() as u64,
            "held in the process until sealed"
        );
        stream.seal_data().unwrap();
        let stored = stream.data().unwrap();
        assert_eq!(stored.read(0, data.len() as u64), data);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

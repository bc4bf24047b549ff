//! Snapshot files, written atomically.
//!
//! A snapshot is written to a temporary name, fsync'd, renamed into place
//! and the directory fsync'd. A rename is atomic, so after a crash the name
//! `{last_index}.snap` holds either nothing or a complete, synced snapshot;
//! a leftover `.tmp` is an interrupted write and is deleted on recovery.
//! Since a complete file cannot be torn, a snapshot that fails its checksum
//! is corruption, never a crash artefact.
//!
//! Version 2, written by this build, puts the data right after a short
//! header and everything that depends on it in a trailer, so the state
//! machine can stream its data into the file as it encodes it
//! ([`SnapshotStream`]) and no image of the whole state is assembled in
//! memory first:
//!
//! ```text
//! offset  size  field
//!      0     8  magic        "BWLSNP\r\n"
//!      8     4  version      u32 LE, 2
//!     12     4  reserved     zero
//!     16     …  data
//!      …     …  trailer      snapshot_meta, data_len:u64, data_crc:u32
//!      …     4  trailer_len  u32 LE, bytes of the trailer
//!      …     4  end_crc      crc32c of bytes 0..16, the trailer and trailer_len
//! ```
//!
//! Version 1, still read, put the checksums and the metadata before the
//! data:
//!
//! ```text
//!      0     8  magic        "BWLSNP\r\n"
//!      8     4  version      u32 LE, 1
//!     12     4  reserved     zero
//!     16     8  body_bytes   u64 LE
//!     24     4  body_crc     crc32c of the body
//!     28     4  header_crc   crc32c of bytes 0..28
//!     32     …  body         snapshot_meta, data_len:u64, data
//! ```

use super::file_name::{snapshot_name, snapshot_temp_name};
use crate::codec::{decode_snapshot_meta, encode_snapshot_meta, put_u32, put_u64, Reader};
use crate::corruption::Corruption;
use crate::error::StorageError;
use crate::fs::{FileSystem, WalFile};
use bellwether_core::raft::{Snapshot, SnapshotMeta};
use bellwether_core::LogIndex;
use std::io;
use std::path::{Path, PathBuf};

/// First bytes of every snapshot file.
const SNAPSHOT_MAGIC: [u8; 8] = *b"BWLSNP\r\n";

/// Format version written by this build.
const SNAPSHOT_FORMAT_VERSION: u32 = 2;

/// The version that put the metadata and checksums before the data.
const SNAPSHOT_FORMAT_VERSION_1: u32 = 1;

/// Bytes of a version 1 header.
const SNAPSHOT_HEADER_BYTES_V1: usize = 32;

/// Bytes of a version 2 header: where the data starts.
pub(crate) const SNAPSHOT_DATA_OFFSET: u64 = 16;

/// Bytes after the trailer: its length and the closing checksum.
const SNAPSHOT_END_BYTES: usize = 8;

/// The trailer of a version 2 file for `meta` and its data.
fn trailer(meta: &SnapshotMeta, data_len: u64, data_crc: u32) -> Vec<u8> {
    let mut trailer = Vec::new();
    encode_snapshot_meta(&mut trailer, meta);
    put_u64(&mut trailer, data_len);
    put_u32(&mut trailer, data_crc);
    trailer
}

/// The header of a version 2 file.
fn header() -> Vec<u8> {
    let mut head = SNAPSHOT_MAGIC.to_vec();
    put_u32(&mut head, SNAPSHOT_FORMAT_VERSION);
    put_u32(&mut head, 0);
    assert_eq!(head.len() as u64, SNAPSHOT_DATA_OFFSET);
    head
}

/// Size of the file `snapshot` is written as.
pub(crate) fn snapshot_file_bytes(snapshot: &Snapshot) -> u64 {
    let trailer = trailer(&snapshot.meta, snapshot.data.len(), 0);
    SNAPSHOT_DATA_OFFSET + snapshot.data.len() + (trailer.len() + SNAPSHOT_END_BYTES) as u64
}

/// A snapshot file being written as its data is encoded: the data goes to
/// a temporary file as it comes ([`io::Write`]), and
/// [`finish`](Self::finish) adds the trailer, syncs and renames it into
/// place. Dropped unfinished, it leaves the temporary file for the caller
/// to remove ([`SnapshotStream::temp_path`]) or recovery to delete.
pub struct SnapshotStream<F: FileSystem> {
    /// The log's file system.
    fs: F,
    /// The log's directory.
    dir: PathBuf,
    /// The index the snapshot will cover: its file's name.
    index: LogIndex,
    /// The temporary file.
    file: F::File,
    /// The crc32c of the data so far.
    data_crc: u32,
    /// Bytes of data so far.
    data_len: u64,
    /// Bytes written since the file was last synced.
    unsynced: u64,
    /// The log's bound on a snapshot file: a write past it fails at once.
    bytes_max: u64,
}

/// A [`SnapshotStream`] syncs its file every this many bytes. The log's
/// fsyncs share the disk with it: left to the end, a 400 MB snapshot's
/// writeback held a leader's log fsync (and so its loop) for about 200 ms,
/// long enough for its term of office to lapse. Synced as it goes, each
/// log fsync waits behind at most this much.
const STREAM_SYNC_EVERY_BYTES: u64 = 8 << 20;

impl<F: FileSystem> SnapshotStream<F> {
    /// Starts the file for the snapshot at `index` in `dir`, replacing a
    /// temporary file left by an interrupted write.
    pub(crate) fn create(
        fs: F,
        dir: &Path,
        index: LogIndex,
        bytes_max: u64,
    ) -> Result<Self, StorageError> {
        let temp = dir.join(snapshot_temp_name(index));
        match fs.remove_file(&temp) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                return Err(StorageError::io("remove", &temp, error));
            }
            _ => {}
        }
        let mut file = fs
            .create_new(&temp)
            .map_err(|error| StorageError::io("create", &temp, error))?;
        file.write_all(&header())
            .map_err(|error| StorageError::io("write", &temp, error))?;
        Ok(SnapshotStream {
            fs,
            dir: dir.to_path_buf(),
            index,
            file,
            data_crc: 0,
            data_len: 0,
            unsynced: 0,
            bytes_max,
        })
    }

    /// The temporary file being written.
    pub fn temp_path(&self) -> PathBuf {
        self.dir.join(snapshot_temp_name(self.index))
    }

    /// Bytes of data written so far.
    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// The index the snapshot covers.
    pub fn index(&self) -> LogIndex {
        self.index
    }

    /// The data is complete: hands every byte written to the file, so
    /// that another handle reads all of it (see `SnapshotFileData`) even
    /// where the file system holds writes until their fsync (`bellwether
    /// verify`'s members).
    pub fn seal_data(&mut self) -> Result<(), StorageError> {
        let temp = self.temp_path();
        self.file
            .seal()
            .map_err(|error| StorageError::io("write", &temp, error))
    }

    /// Adds the trailer for `meta`, syncs the file, renames it into place
    /// and syncs the directory; returns its path. Refuses a file over
    /// `bytes_max` (removing it) and a `meta` for another index.
    pub fn finish(mut self, meta: &SnapshotMeta, bytes_max: u64) -> Result<PathBuf, StorageError> {
        assert_eq!(
            meta.last_index, self.index,
            "the snapshot it was started for"
        );
        let temp = self.temp_path();
        let mut end = trailer(meta, self.data_len, self.data_crc);
        let trailer_len = u32::try_from(end.len()).expect("a trailer is small");
        put_u32(&mut end, trailer_len);
        let end_crc = crc32c::crc32c_append(crc32c::crc32c(&header()), &end);
        put_u32(&mut end, end_crc);
        let bytes = SNAPSHOT_DATA_OFFSET + self.data_len + end.len() as u64;
        if bytes > bytes_max {
            let _ = self.fs.remove_file(&temp);
            return Err(StorageError::SnapshotTooLarge {
                index: self.index,
                bytes,
                bytes_max,
            });
        }
        self.file
            .write_all(&end)
            .map_err(|error| StorageError::io("write", &temp, error))?;
        // Sealed, then synced: every byte is in the file before the rename
        // whatever the file system holds (the seal alone syncs only held
        // bytes).
        self.file
            .seal()
            .map_err(|error| StorageError::io("write", &temp, error))?;
        self.file
            .sync_data()
            .map_err(|error| StorageError::io("fsync", &temp, error))?;
        let path = self.dir.join(snapshot_name(self.index));
        self.fs
            .rename(&temp, &path)
            .map_err(|error| StorageError::io("rename", &temp, error))?;
        self.fs
            .sync_dir(&self.dir)
            .map_err(|error| StorageError::io("fsync directory", &self.dir, error))?;
        Ok(path)
    }
}

impl<F: FileSystem> io::Write for SnapshotStream<F> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let after = SNAPSHOT_DATA_OFFSET + self.data_len + bytes.len() as u64;
        if after > self.bytes_max {
            return Err(io::Error::other(format!(
                "the snapshot at {} passes the bound of {} bytes on a snapshot file",
                self.index.0, self.bytes_max
            )));
        }
        self.file.write_all(bytes)?;
        self.data_crc = crc32c::crc32c_append(self.data_crc, bytes);
        self.data_len += bytes.len() as u64;
        self.unsynced += bytes.len() as u64;
        if self.unsynced >= STREAM_SYNC_EVERY_BYTES {
            self.file.sync_data()?;
            self.unsynced = 0;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes `snapshot` into `dir` atomically and durably; returns its path.
pub(crate) fn write_snapshot<F: FileSystem>(
    fs: &F,
    dir: &Path,
    snapshot: &Snapshot,
) -> Result<PathBuf, StorageError> {
    let mut stream = SnapshotStream::create(fs.clone(), dir, snapshot.meta.last_index, u64::MAX)?;
    io::Write::write_all(&mut stream, snapshot.data.bytes())
        .map_err(|error| StorageError::io("write", stream.temp_path(), error))?;
    stream.finish(&snapshot.meta, u64::MAX)
}

/// Reads and verifies the snapshot file at `path`.
pub(crate) fn read_snapshot<F: FileSystem>(
    fs: &F,
    path: &Path,
    bytes_max: u64,
) -> Result<Snapshot, StorageError> {
    let len_bytes = fs
        .file_len(path)
        .map_err(|error| StorageError::io("stat", path, error))?;
    if len_bytes > bytes_max {
        let reason = Corruption::FileTooLarge {
            bytes: len_bytes,
            bytes_max,
        };
        return Err(StorageError::corrupt(path, 0, reason));
    }
    let bytes = fs
        .read(path, bytes_max)
        .map_err(|error| StorageError::io("read", path, error))?;
    decode_snapshot(&bytes).map_err(|(offset, reason)| StorageError::corrupt(path, offset, reason))
}

/// Where the data starts in a snapshot file whose first 16 bytes are
/// `head`, for `meta`: right after the header in version 2, after the
/// header and metadata in version 1.
pub(crate) fn data_offset_in(head: &[u8; 16], meta: &SnapshotMeta) -> Option<u64> {
    if head[..8] != SNAPSHOT_MAGIC {
        return None;
    }
    match u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")) {
        SNAPSHOT_FORMAT_VERSION => Some(SNAPSHOT_DATA_OFFSET),
        SNAPSHOT_FORMAT_VERSION_1 => {
            let mut encoded = Vec::new();
            encode_snapshot_meta(&mut encoded, meta);
            Some((SNAPSHOT_HEADER_BYTES_V1 + encoded.len() + 8) as u64)
        }
        _ => None,
    }
}

/// Decodes a whole snapshot file; errors carry the offset of the damage.
fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, (u64, Corruption)> {
    if bytes.len() < SNAPSHOT_DATA_OFFSET as usize {
        let reason = Corruption::Truncated {
            bytes_needed: SNAPSHOT_DATA_OFFSET,
            bytes_found: bytes.len() as u64,
        };
        return Err((0, reason));
    }
    if bytes[..8] != SNAPSHOT_MAGIC {
        return Err((
            0,
            Corruption::BadMagic {
                expected: "snapshot",
            },
        ));
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    match word(8) {
        SNAPSHOT_FORMAT_VERSION => decode_snapshot_v2(bytes),
        SNAPSHOT_FORMAT_VERSION_1 => decode_snapshot_v1(bytes),
        version => Err((
            8,
            Corruption::UnsupportedVersion {
                version,
                supported: SNAPSHOT_FORMAT_VERSION,
            },
        )),
    }
}

/// Decodes a version 2 file (see the module docs).
fn decode_snapshot_v2(bytes: &[u8]) -> Result<Snapshot, (u64, Corruption)> {
    let head = SNAPSHOT_DATA_OFFSET as usize;
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let truncated = |needed: usize| Corruption::Truncated {
        bytes_needed: needed as u64,
        bytes_found: bytes.len() as u64,
    };
    if bytes.len() < head + SNAPSHOT_END_BYTES {
        return Err((0, truncated(head + SNAPSHOT_END_BYTES)));
    }
    let end = bytes.len() - SNAPSHOT_END_BYTES;
    let trailer_len = word(end) as usize;
    let Some(trailer_start) = end.checked_sub(trailer_len).filter(|s| *s >= head) else {
        return Err((
            end as u64,
            truncated(head + trailer_len + SNAPSHOT_END_BYTES),
        ));
    };
    let end_crc = crc32c::crc32c_append(
        crc32c::crc32c(&bytes[..head]),
        &bytes[trailer_start..end + 4],
    );
    if word(12) != 0 || end_crc != word(end + 4) {
        return Err((trailer_start as u64, Corruption::HeaderChecksum));
    }
    let malformed = |m: crate::codec::Malformed| (trailer_start as u64, Corruption::Malformed(m.0));
    let mut reader = Reader::new(&bytes[trailer_start..end]);
    let meta = decode_snapshot_meta(&mut reader).map_err(malformed)?;
    let data_len = reader.u64("data length").map_err(malformed)?;
    let data_crc = reader.u32("data checksum").map_err(malformed)?;
    reader.finish("snapshot trailer").map_err(malformed)?;
    if data_len != (trailer_start - head) as u64 {
        return Err((head as u64, truncated(head + data_len as usize)));
    }
    let data = &bytes[head..trailer_start];
    if crc32c::crc32c(data) != data_crc {
        return Err((head as u64, Corruption::RecordChecksum));
    }
    Ok(Snapshot {
        meta,
        data: data.to_vec().into(),
    })
}

/// Decodes a version 1 file (see the module docs).
fn decode_snapshot_v1(bytes: &[u8]) -> Result<Snapshot, (u64, Corruption)> {
    if bytes.len() < SNAPSHOT_HEADER_BYTES_V1 {
        let reason = Corruption::Truncated {
            bytes_needed: SNAPSHOT_HEADER_BYTES_V1 as u64,
            bytes_found: bytes.len() as u64,
        };
        return Err((0, reason));
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let body_bytes = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    if word(28) != crc32c::crc32c(&bytes[..28]) || word(12) != 0 {
        return Err((0, Corruption::HeaderChecksum));
    }
    let body = &bytes[SNAPSHOT_HEADER_BYTES_V1..];
    let body_start = SNAPSHOT_HEADER_BYTES_V1 as u64;
    if body.len() as u64 != body_bytes {
        let reason = Corruption::Truncated {
            bytes_needed: body_bytes,
            bytes_found: body.len() as u64,
        };
        return Err((body_start, reason));
    }
    if crc32c::crc32c(body) != word(24) {
        return Err((body_start, Corruption::RecordChecksum));
    }
    let malformed = |m: crate::codec::Malformed| (body_start, Corruption::Malformed(m.0));
    let mut reader = Reader::new(body);
    let meta = decode_snapshot_meta(&mut reader).map_err(malformed)?;
    let data_len = reader.u64("data length").map_err(malformed)?;
    let data = reader
        .take(data_len as usize, "data")
        .map_err(malformed)?
        .to_vec();
    reader.finish("snapshot").map_err(malformed)?;
    Ok(Snapshot {
        meta,
        data: data.into(),
    })
}

/// Encodes `snapshot` as a version 1 file, for the tests that read one.
#[cfg(test)]
pub(crate) fn encode_snapshot_v1(snapshot: &Snapshot) -> Vec<u8> {
    let data = snapshot.data.bytes();
    let mut body = Vec::new();
    encode_snapshot_meta(&mut body, &snapshot.meta);
    put_u64(&mut body, data.len() as u64);
    body.extend_from_slice(data);
    let mut file = SNAPSHOT_MAGIC.to_vec();
    put_u32(&mut file, SNAPSHOT_FORMAT_VERSION_1);
    put_u32(&mut file, 0);
    put_u64(&mut file, body.len() as u64);
    put_u32(&mut file, crc32c::crc32c(&body));
    let header_crc = crc32c::crc32c(&file);
    put_u32(&mut file, header_crc);
    file.extend_from_slice(&body);
    file
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::SimFileSystem;
    use bellwether_core::raft::{ClusterConfig, SnapshotMeta};
    use bellwether_core::{LogIndex, NodeId, Term};

    fn sample() -> Snapshot {
        Snapshot {
            meta: SnapshotMeta {
                last_index: LogIndex(42),
                last_term: Term(3),
                config: ClusterConfig::voters([NodeId(1), NodeId(2), NodeId(3)]),
            },
            data: b"state machine bytes".to_vec().into(),
        }
    }

    #[test]
    fn round_trips_and_reports_its_size() {
        let fs = SimFileSystem::new();
        let dir = Path::new("/wal");
        fs.create_dir_all(dir).unwrap();
        let path = write_snapshot(&fs, dir, &sample()).unwrap();
        assert_eq!(path, dir.join("000000000000002a.snap"));
        assert_eq!(fs.file_len(&path).unwrap(), snapshot_file_bytes(&sample()));
        assert_eq!(read_snapshot(&fs, &path, 1 << 20).unwrap(), sample());
        assert_eq!(fs.list_dir(dir).unwrap(), vec!["000000000000002a.snap"]);
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let fs = SimFileSystem::new();
        let dir = Path::new("/wal");
        fs.create_dir_all(dir).unwrap();
        let path = write_snapshot(&fs, dir, &sample()).unwrap();
        let bytes = fs.contents(&path).unwrap();
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(decode_snapshot(&damaged).is_err(), "byte {at}");
        }
        assert!(decode_snapshot(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn a_version_1_file_still_reads_and_finds_its_data() {
        let v1 = encode_snapshot_v1(&sample());
        assert_eq!(decode_snapshot(&v1).unwrap(), sample());
        let head: [u8; 16] = v1[..16].try_into().unwrap();
        let offset = data_offset_in(&head, &sample().meta).unwrap() as usize;
        assert_eq!(&v1[offset..], b"state machine bytes");
    }

    #[test]
    fn a_streamed_file_equals_a_written_one_and_keeps_its_bound() {
        let fs = SimFileSystem::new();
        let dir = Path::new("/wal");
        fs.create_dir_all(dir).unwrap();
        let mut stream = SnapshotStream::create(fs.clone(), dir, LogIndex(42), u64::MAX).unwrap();
        for part in [&b"state "[..], b"machine ", b"bytes"] {
            io::Write::write_all(&mut stream, part).unwrap();
        }
        assert_eq!(stream.data_len(), 19);
        let path = stream.finish(&sample().meta, u64::MAX).unwrap();
        assert_eq!(read_snapshot(&fs, &path, 1 << 20).unwrap(), sample());
        let head: [u8; 16] = fs.contents(&path).unwrap()[..16].try_into().unwrap();
        assert_eq!(
            data_offset_in(&head, &sample().meta),
            Some(SNAPSHOT_DATA_OFFSET)
        );
        let mut over = SnapshotStream::create(fs.clone(), dir, LogIndex(43), u64::MAX).unwrap();
        io::Write::write_all(&mut over, &[0; 100]).unwrap();
        let mut meta = sample().meta;
        meta.last_index = LogIndex(43);
        assert!(matches!(
            over.finish(&meta, 64),
            Err(StorageError::SnapshotTooLarge { .. })
        ));
        assert_eq!(
            fs.list_dir(dir).unwrap(),
            vec!["000000000000002a.snap"],
            "the refused file is removed"
        );
        let mut early = SnapshotStream::create(fs.clone(), dir, LogIndex(44), 64).unwrap();
        io::Write::write_all(&mut early, &[0; 48]).unwrap();
        assert!(
            io::Write::write_all(&mut early, &[0; 1]).is_err(),
            "a write past the bound fails as it comes"
        );
    }
}

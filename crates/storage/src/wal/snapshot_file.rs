//! Snapshot files, written atomically.
//!
//! A snapshot is written to a temporary name, fsync'd, renamed into place
//! and the directory fsync'd. A rename is atomic, so after a crash the name
//! `{last_index}.snap` holds either nothing or a complete, synced snapshot;
//! a leftover `.tmp` is an interrupted write and is deleted on recovery.
//! Since a complete file cannot be torn, a snapshot that fails its checksum
//! is corruption, never a crash artefact.
//!
//! ```text
//! offset  size  field
//!      0     8  magic        "BWLSNP\r\n"
//!      8     4  version      u32 LE, currently 1
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
use std::io;
use std::path::{Path, PathBuf};

/// First bytes of every snapshot file.
const SNAPSHOT_MAGIC: [u8; 8] = *b"BWLSNP\r\n";

/// Format version written and read by this build.
const SNAPSHOT_FORMAT_VERSION: u32 = 1;

/// Bytes of the snapshot file header.
const SNAPSHOT_HEADER_BYTES: usize = 32;

/// Size of the file `snapshot` is written as.
pub(crate) fn snapshot_file_bytes(snapshot: &Snapshot) -> u64 {
    let mut meta = Vec::new();
    encode_snapshot_meta(&mut meta, &snapshot.meta);
    (SNAPSHOT_HEADER_BYTES + meta.len() + 8) as u64 + snapshot.data.len()
}

/// Where the data of a snapshot for `meta` starts in its file.
pub(crate) fn snapshot_data_offset(meta: &SnapshotMeta) -> u64 {
    let mut encoded = Vec::new();
    encode_snapshot_meta(&mut encoded, meta);
    (SNAPSHOT_HEADER_BYTES + encoded.len() + 8) as u64
}

/// Writes `snapshot` into `dir` atomically and durably; returns its path.
pub(crate) fn write_snapshot<F: FileSystem>(
    fs: &F,
    dir: &Path,
    snapshot: &Snapshot,
) -> Result<PathBuf, StorageError> {
    let index = snapshot.meta.last_index;
    let temp = dir.join(snapshot_temp_name(index));
    let path = dir.join(snapshot_name(index));
    match fs.remove_file(&temp) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => {
            return Err(StorageError::io("remove", &temp, error));
        }
        _ => {}
    }
    let mut file = fs
        .create_new(&temp)
        .map_err(|error| StorageError::io("create", &temp, error))?;
    // The data is written from the caller's buffer directly: only the small
    // header and metadata are assembled here.
    let mut body_head = Vec::new();
    encode_snapshot_meta(&mut body_head, &snapshot.meta);
    let data = snapshot.data.bytes();
    put_u64(&mut body_head, data.len() as u64);
    let body_bytes = (body_head.len() + data.len()) as u64;
    let body_crc = crc32c::crc32c_append(crc32c::crc32c(&body_head), data);
    let mut head = Vec::with_capacity(SNAPSHOT_HEADER_BYTES + body_head.len());
    head.extend_from_slice(&SNAPSHOT_MAGIC);
    put_u32(&mut head, SNAPSHOT_FORMAT_VERSION);
    put_u32(&mut head, 0);
    put_u64(&mut head, body_bytes);
    put_u32(&mut head, body_crc);
    let header_crc = crc32c::crc32c(&head);
    put_u32(&mut head, header_crc);
    assert_eq!(head.len(), SNAPSHOT_HEADER_BYTES);
    head.extend_from_slice(&body_head);
    let write = |file: &mut F::File, bytes: &[u8]| {
        file.write_all(bytes)
            .map_err(|error| StorageError::io("write", &temp, error))
    };
    write(&mut file, &head)?;
    write(&mut file, data)?;
    file.sync_data()
        .map_err(|error| StorageError::io("fsync", &temp, error))?;
    fs.rename(&temp, &path)
        .map_err(|error| StorageError::io("rename", &temp, error))?;
    fs.sync_dir(dir)
        .map_err(|error| StorageError::io("fsync directory", dir, error))?;
    Ok(path)
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

/// Decodes a whole snapshot file; errors carry the offset of the damage.
fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, (u64, Corruption)> {
    if bytes.len() < SNAPSHOT_HEADER_BYTES {
        let reason = Corruption::Truncated {
            bytes_needed: SNAPSHOT_HEADER_BYTES as u64,
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
    let body_bytes = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    if word(28) != crc32c::crc32c(&bytes[..28]) || word(12) != 0 {
        return Err((0, Corruption::HeaderChecksum));
    }
    let version = word(8);
    if version != SNAPSHOT_FORMAT_VERSION {
        let reason = Corruption::UnsupportedVersion {
            version,
            supported: SNAPSHOT_FORMAT_VERSION,
        };
        return Err((8, reason));
    }
    let body = &bytes[SNAPSHOT_HEADER_BYTES..];
    let body_start = SNAPSHOT_HEADER_BYTES as u64;
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
}

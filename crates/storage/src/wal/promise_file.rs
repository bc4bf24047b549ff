//! The promise record's file: a member's term, vote and last acknowledged
//! entry, kept beside (not inside) the write-ahead log, so that losing the
//! log does not lose the knowledge of what the log should hold (see
//! `bellwether_core::raft::audit`).
//!
//! The file is a sequence of fixed-size records; the last one whose
//! checksum holds is the record. Each write appends one record and
//! fdatasyncs it, so a torn write leaves the previous record in force.
//! Opening it, and every [`RECORDS_PER_FILE_MAX`] records, starts a fresh
//! file beside it holding the record in force, with the space of the
//! records to come prepared ahead (zeros, read back as unwritten), and
//! renames it into place.
//!
//! Record layout (64 bytes, little-endian):
//!
//! ```text
//! offset size field
//!      0    4 magic "BWPR"
//!      4    1 format version (1)
//!      5    1 flags: bit 0 a vote is set, bit 1 a repair is under way
//!      6    2 zero
//!      8    8 term
//!     16    8 voted_for (0 when none)
//!     24    8 last_term
//!     32    8 last_index
//!     40    8 repair: last_term
//!     48    8 repair: last_index
//!     56    4 zero
//!     60    4 crc32c of bytes 0..60
//! ```

use crate::corruption::Corruption;
use crate::error::StorageError;
use crate::fs::{FileSystem, WalFile};
use bellwether_core::raft::{PromiseRecord, Repair};
use bellwether_core::{LogIndex, NodeId, Term};
use std::path::{Path, PathBuf};

/// Bytes of one record.
pub const PROMISE_RECORD_BYTES: usize = 64;

/// Records one file holds before the next write starts a fresh file.
pub const RECORDS_PER_FILE_MAX: u64 = 8_192;

/// The first bytes of every record.
const MAGIC: &[u8; 4] = b"BWPR";

/// The record format's version.
const VERSION: u8 = 1;

/// The promise file of one member, open for writing.
#[derive(Debug)]
pub struct PromiseFile<F: FileSystem> {
    /// Its file system.
    fs: F,
    /// Its path.
    path: PathBuf,
    /// The open file, appended to.
    file: F::File,
    /// Records in the file.
    records: u64,
    /// The last record written (or read back), if any.
    current: Option<PromiseRecord>,
}

impl<F: FileSystem> PromiseFile<F> {
    /// Opens (or creates) the file at `path` and returns it with the last
    /// valid record it holds, `None` for a new or empty file.
    ///
    /// A file whose every record fails its checksum is corrupt: the error
    /// says so, and nothing is changed.
    pub fn open(fs: F, path: &Path) -> Result<(Self, Option<PromiseRecord>), StorageError> {
        let io = |operation, source| StorageError::Io {
            operation,
            path: path.to_path_buf(),
            source,
        };
        let found = Self::read(&fs, path)?;

        // Always a fresh file: the record in force, then zeros prepared
        // ahead, so that each later append overwrites allocated space and
        // its fdatasync writes one block, not the file's size as well
        // (appending past the end made each sync cost about 2.3 times a
        // log-only sync, `examples/wal_throughput.rs`).
        let fresh = path.with_extension("new");
        let file = create_fresh(&fs, &fresh).map_err(|e| io("create", e))?;
        let mut promise_file = PromiseFile {
            fs,
            path: path.to_path_buf(),
            file,
            records: 0,
            current: found,
        };
        promise_file.start_fresh_file_with(fresh)?;
        Ok((promise_file, found))
    }

    /// The record in force in the file at `path`, `None` for a missing or
    /// empty file, without changing anything. A file whose records all
    /// fail their checksums (two or more) is corrupt.
    pub fn read(fs: &F, path: &Path) -> Result<Option<PromiseRecord>, StorageError> {
        let bytes_max = (RECORDS_PER_FILE_MAX + 1) * PROMISE_RECORD_BYTES as u64;
        match fs.read(path, bytes_max) {
            Ok(bytes) => {
                // Space prepared ahead of the appends reads as zeros.
                let written: Vec<&[u8]> = bytes
                    .chunks(PROMISE_RECORD_BYTES)
                    .filter(|chunk| chunk.iter().any(|b| *b != 0))
                    .collect();
                let found = written.iter().rev().find_map(|chunk| decode(chunk));
                // A crash tears at most the last record, so one bad record
                // alone is a first write cut short; two are damage.
                if found.is_none() && written.len() > 1 {
                    return Err(StorageError::Corrupt {
                        path: path.to_path_buf(),
                        offset: 0,
                        reason: Corruption::PromiseRecord,
                    });
                }
                Ok(found)
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StorageError::Io {
                operation: "read",
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The last record written or read back.
    pub fn current(&self) -> Option<PromiseRecord> {
        self.current
    }

    /// Makes `record` durable (one append and one fdatasync), unless it is
    /// the record in force already.
    pub fn write(&mut self, record: &PromiseRecord) -> Result<(), StorageError> {
        if self.current == Some(*record) {
            return Ok(());
        }
        if self.records >= RECORDS_PER_FILE_MAX {
            self.start_fresh_file()?;
        }
        let path = self.path.clone();
        let io = |operation, source| StorageError::Io {
            operation,
            path: path.clone(),
            source,
        };
        self.file
            .write_all(&encode(record))
            .map_err(|e| io("write", e))?;
        self.file.sync_data().map_err(|e| io("fsync", e))?;
        self.records += 1;
        self.current = Some(*record);
        Ok(())
    }

    /// Replaces the file by a new one holding only the current record.
    fn start_fresh_file(&mut self) -> Result<(), StorageError> {
        let fresh = self.path.with_extension("new");
        self.file = create_fresh(&self.fs, &fresh).map_err(|source| StorageError::Io {
            operation: "create",
            path: fresh.clone(),
            source,
        })?;
        self.start_fresh_file_with(fresh)
    }

    /// Writes the current record into the new, empty file at `fresh`
    /// (already `self.file`), prepares the space of the file's records
    /// ahead, syncs it and renames it into place.
    fn start_fresh_file_with(&mut self, fresh: PathBuf) -> Result<(), StorageError> {
        let io = |operation, source| StorageError::Io {
            operation,
            path: fresh.clone(),
            source,
        };
        let mut records = 0;
        if let Some(current) = &self.current {
            self.file
                .write_all(&encode(current))
                .map_err(|e| io("write", e))?;
            records = 1;
        }
        self.file
            .preallocate(RECORDS_PER_FILE_MAX * PROMISE_RECORD_BYTES as u64)
            .map_err(|e| io("preallocate", e))?;
        self.file.sync_data().map_err(|e| io("fsync", e))?;
        self.fs
            .rename(&fresh, &self.path)
            .map_err(|e| io("rename", e))?;
        if let Some(dir) = self.path.parent() {
            self.fs.sync_dir(dir).map_err(|e| io("fsync", e))?;
        }
        self.records = records;
        Ok(())
    }
}

/// A new, empty file at `fresh`, replacing one a crash left there.
fn create_fresh<F: FileSystem>(fs: &F, fresh: &Path) -> std::io::Result<F::File> {
    match fs.create_new(fresh) {
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            fs.remove_file(fresh)?;
            fs.create_new(fresh)
        }
        created => created,
    }
}

/// The 64 bytes of `record`.
pub fn encode(record: &PromiseRecord) -> [u8; PROMISE_RECORD_BYTES] {
    let mut bytes = [0u8; PROMISE_RECORD_BYTES];
    bytes[0..4].copy_from_slice(MAGIC);
    bytes[4] = VERSION;
    bytes[5] = u8::from(record.voted_for.is_some()) | (u8::from(record.repair.is_some()) << 1);
    let words = [
        record.term.0,
        record.voted_for.map_or(0, |v| v.0),
        record.last_term.0,
        record.last_index.0,
        record.repair.map_or(0, |r| r.last_term.0),
        record.repair.map_or(0, |r| r.last_index.0),
    ];
    for (k, word) in words.iter().enumerate() {
        bytes[8 + 8 * k..16 + 8 * k].copy_from_slice(&word.to_le_bytes());
    }
    let crc = crc32c::crc32c(&bytes[..60]);
    bytes[60..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// The record in `bytes`, or `None` when its checksum, magic, version or
/// flags do not hold (a torn or damaged record).
pub fn decode(bytes: &[u8]) -> Option<PromiseRecord> {
    if bytes.len() != PROMISE_RECORD_BYTES || &bytes[0..4] != MAGIC || bytes[4] != VERSION {
        return None;
    }
    let crc = u32::from_le_bytes(bytes[60..64].try_into().ok()?);
    if crc32c::crc32c(&bytes[..60]) != crc || bytes[5] & !0b11 != 0 {
        return None;
    }
    let word = |k: usize| u64::from_le_bytes(bytes[8 + 8 * k..16 + 8 * k].try_into().unwrap());
    let flags = bytes[5];
    Some(PromiseRecord {
        term: Term(word(0)),
        voted_for: (flags & 1 != 0).then(|| NodeId(word(1))),
        last_term: Term(word(2)),
        last_index: LogIndex(word(3)),
        repair: (flags & 2 != 0).then(|| Repair {
            last_term: Term(word(4)),
            last_index: LogIndex(word(5)),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::SimFileSystem;
    use crate::UnsyncedData;

    fn record(term: u64) -> PromiseRecord {
        PromiseRecord {
            term: Term(term),
            voted_for: Some(NodeId(2)),
            last_term: Term(term),
            last_index: LogIndex(term * 10),
            repair: term.is_multiple_of(2).then_some(Repair {
                last_term: Term(1),
                last_index: LogIndex(7),
            }),
        }
    }

    #[test]
    fn every_field_round_trips_and_any_flipped_byte_is_refused() {
        let bytes = encode(&record(4));
        assert_eq!(decode(&bytes), Some(record(4)));
        for k in 0..PROMISE_RECORD_BYTES {
            let mut damaged = bytes;
            damaged[k] ^= 0x40;
            assert_eq!(decode(&damaged), None, "byte {k} flipped");
        }
    }

    #[test]
    fn the_last_synced_record_survives_a_crash_and_the_file_turns_over() {
        let disk = SimFileSystem::new();
        let path = Path::new("/member/promises");
        disk.create_dir_all(Path::new("/member")).unwrap();
        let (mut file, found) = PromiseFile::open(disk.clone(), path).unwrap();
        assert_eq!(found, None);
        for term in 1..=(RECORDS_PER_FILE_MAX + 10) {
            file.write(&record(term)).unwrap();
        }
        disk.reboot(UnsyncedData::Lost);
        let (_, found) = PromiseFile::open(disk.clone(), path).unwrap();
        assert_eq!(found, Some(record(RECORDS_PER_FILE_MAX + 10)));
        let len = disk.file_len(path).unwrap();
        assert!(
            len <= 11 * PROMISE_RECORD_BYTES as u64,
            "{len} bytes: the file turned over"
        );
    }

    #[test]
    fn a_torn_last_record_leaves_the_one_before_in_force() {
        let disk = SimFileSystem::new();
        let path = Path::new("/member/promises");
        disk.create_dir_all(Path::new("/member")).unwrap();
        let (mut file, _) = PromiseFile::open(disk.clone(), path).unwrap();
        file.write(&record(1)).unwrap();
        file.file.write_all(&encode(&record(3))[..30]).unwrap();
        file.file.sync_data().unwrap();
        let (mut file, found) = PromiseFile::open(disk.clone(), path).unwrap();
        assert_eq!(found, Some(record(1)));
        file.write(&record(5)).unwrap();
        let (_, found) = PromiseFile::open(disk.clone(), path).unwrap();
        assert_eq!(found, Some(record(5)), "records after a torn one are read");
    }
}

//! The elector's data directory: one state file that ties it to one node
//! of one group running one algorithm, and holds the term or epoch (and
//! Raft's vote) so that a restart never hands out a fencing token twice.
//!
//! The file is replaced atomically (write a temporary file, fsync it,
//! rename it over the old one, fsync the directory), so a crash leaves
//! either the old state or the new one. Its contents are checksummed: a
//! torn or damaged file stops the elector with an error naming the file,
//! never a silent reset to zero. The directory is locked while an elector
//! uses it, so two processes cannot share one.

use crate::error::ElectorError;
use bellwether_storage::codec::{put_len, put_u32, put_u64, put_u8, Reader};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FILE: &str = "elector.state";
const TEMPORARY: &str = "elector.state.tmp";
const LOCK: &str = "elector.lock";
const MAGIC: &[u8; 4] = b"BWEL";
const VERSION: u8 = 1;
/// Largest state file read: a Raft group's no-op entries for millions of
/// terms fit; a file past this is not ours.
const FILE_BYTES_MAX: u64 = 64 << 20;

/// Who a data directory belongs to; every field must match on restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// `"raft"`, `"bully"` or `"ring"`.
    pub algorithm: &'static str,
    /// The group's name.
    pub group: String,
    /// This node's id.
    pub id: u64,
    /// The group's settings (winner rule, member list), as the handshake's
    /// fingerprint.
    pub fingerprint: u32,
}

/// An open, locked data directory.
#[derive(Debug)]
pub struct StateFile {
    directory: PathBuf,
    owner: Owner,
    /// Held for the elector's life; the OS releases the lock on exit.
    _lock: File,
}

impl StateFile {
    /// Opens (creating it if needed) and locks `directory` for `owner`,
    /// and returns the durable bytes stored there, if any.
    pub fn open(
        directory: &Path,
        owner: Owner,
    ) -> Result<(StateFile, Option<Vec<u8>>), ElectorError> {
        let io = |error: std::io::Error| ElectorError::DataDir {
            path: directory.display().to_string(),
            error: error.to_string(),
        };
        fs::create_dir_all(directory).map_err(io)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(directory.join(LOCK))
            .map_err(io)?;
        if lock.try_lock().is_err() {
            return Err(ElectorError::DataDirInUse {
                path: directory.display().to_string(),
            });
        }
        let file = StateFile {
            directory: directory.to_path_buf(),
            owner,
            _lock: lock,
        };
        let stored = file.load()?;
        Ok((file, stored))
    }

    fn load(&self) -> Result<Option<Vec<u8>>, ElectorError> {
        let path = self.directory.join(FILE);
        let corrupt = |reason: String| ElectorError::CorruptState {
            path: path.display().to_string(),
            reason,
        };
        let bytes = match fs::metadata(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(corrupt(error.to_string())),
            Ok(meta) if meta.len() > FILE_BYTES_MAX => {
                return Err(corrupt(format!(
                    "{} bytes, over {FILE_BYTES_MAX}",
                    meta.len()
                )))
            }
            Ok(_) => fs::read(&path).map_err(|e| corrupt(e.to_string()))?,
        };
        if bytes.len() < 4 + 4 {
            return Err(corrupt("shorter than its header".into()));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body).to_le_bytes() != sum {
            return Err(corrupt("checksum mismatch (a torn or damaged file)".into()));
        }
        let mut r = Reader::new(body);
        let malformed = |e: bellwether_storage::codec::Malformed| corrupt(e.0);
        if r.take(4, "magic").map_err(malformed)? != MAGIC {
            return Err(corrupt("not an elector state file (bad magic)".into()));
        }
        let version = r.u8("version").map_err(malformed)?;
        if version != VERSION {
            return Err(corrupt(format!(
                "format version {version}, this build reads {VERSION}"
            )));
        }
        let length = r.u32("algorithm length").map_err(malformed)? as usize;
        let algorithm =
            String::from_utf8_lossy(r.take(length, "algorithm").map_err(malformed)?).into_owned();
        let length = r.u32("group length").map_err(malformed)? as usize;
        let group =
            String::from_utf8_lossy(r.take(length, "group").map_err(malformed)?).into_owned();
        let id = r.u64("id").map_err(malformed)?;
        let fingerprint = r.u32("fingerprint").map_err(malformed)?;
        let length = r.u32("state length").map_err(malformed)? as usize;
        let state = r.take(length, "state").map_err(malformed)?.to_vec();
        r.finish("state file").map_err(malformed)?;
        self.check_owner(&algorithm, &group, id, fingerprint)?;
        Ok(Some(state))
    }

    fn check_owner(
        &self,
        algorithm: &str,
        group: &str,
        id: u64,
        fingerprint: u32,
    ) -> Result<(), ElectorError> {
        let ours = &self.owner;
        let found = format!("{algorithm} elector, node {id} of group {group:?}");
        let wanted = format!(
            "{} elector, node {} of group {:?}",
            ours.algorithm, ours.id, ours.group
        );
        if algorithm != ours.algorithm || group != ours.group || id != ours.id {
            return Err(ElectorError::ForeignDataDir {
                path: self.directory.display().to_string(),
                found,
                wanted,
            });
        }
        if fingerprint != ours.fingerprint {
            return Err(ElectorError::ForeignDataDir {
                path: self.directory.display().to_string(),
                found: format!("{found} with other settings (winner rule or member list)"),
                wanted: format!(
                    "{wanted}; a group's members and rule cannot change under a data dir"
                ),
            });
        }
        Ok(())
    }

    /// The directory.
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// Replaces the stored state with `state`, durably, before returning.
    pub fn store(&self, state: &[u8]) -> std::io::Result<()> {
        let mut body = Vec::with_capacity(64 + state.len());
        body.extend_from_slice(MAGIC);
        put_u8(&mut body, VERSION);
        put_len(&mut body, self.owner.algorithm.len());
        body.extend_from_slice(self.owner.algorithm.as_bytes());
        put_len(&mut body, self.owner.group.len());
        body.extend_from_slice(self.owner.group.as_bytes());
        put_u64(&mut body, self.owner.id);
        put_u32(&mut body, self.owner.fingerprint);
        put_len(&mut body, state.len());
        body.extend_from_slice(state);
        let sum = crc32c::crc32c(&body);
        body.extend_from_slice(&sum.to_le_bytes());
        let temporary = self.directory.join(TEMPORARY);
        let mut file = File::create(&temporary)?;
        file.write_all(&body)?;
        file.sync_all()?;
        fs::rename(&temporary, self.directory.join(FILE))?;
        File::open(&self.directory)?.sync_all()
    }
}

/// The median time one durable replace of a small state file takes in
/// `directory`, over `samples` replaces: what each persisted term, vote or
/// epoch costs there. Benchmarks give it to the simulator's disk model.
pub fn persist_latency(directory: &Path, samples: usize) -> Result<Duration, ElectorError> {
    let scratch = directory.join(format!("persist-probe-{}", std::process::id()));
    let owner = Owner {
        algorithm: "probe",
        group: "probe".into(),
        id: 1,
        fingerprint: 1,
    };
    let (file, _) = StateFile::open(&scratch, owner)?;
    let mut times = Vec::with_capacity(samples.max(1));
    for _ in 0..samples.max(1) {
        let started = Instant::now();
        file.store(&[0; 64]).map_err(|e| ElectorError::DataDir {
            path: scratch.display().to_string(),
            error: e.to_string(),
        })?;
        times.push(started.elapsed());
    }
    drop(file);
    let _ = fs::remove_dir_all(&scratch);
    times.sort();
    Ok(times[times.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(algorithm: &'static str, id: u64) -> Owner {
        Owner {
            algorithm,
            group: "jobs".into(),
            id,
            fingerprint: 7,
        }
    }

    #[test]
    fn state_survives_a_reopen_and_strangers_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (file, stored) = StateFile::open(dir.path(), owner("bully", 1)).unwrap();
        assert_eq!(stored, None);
        file.store(b"epoch 9").unwrap();
        let in_use = StateFile::open(dir.path(), owner("bully", 1)).unwrap_err();
        assert!(
            matches!(in_use, ElectorError::DataDirInUse { .. }),
            "{in_use}"
        );
        drop(file);
        let (_file, stored) = StateFile::open(dir.path(), owner("bully", 1)).unwrap();
        assert_eq!(stored.as_deref(), Some(&b"epoch 9"[..]));
        drop(_file);
        let error = StateFile::open(dir.path(), owner("raft", 1)).unwrap_err();
        assert!(
            error.to_string().contains("bully elector, node 1"),
            "{error}"
        );
        let error = StateFile::open(dir.path(), owner("bully", 2)).unwrap_err();
        assert!(
            matches!(error, ElectorError::ForeignDataDir { .. }),
            "{error}"
        );
        let mut other = owner("bully", 1);
        other.fingerprint = 8;
        let error = StateFile::open(dir.path(), other).unwrap_err();
        assert!(error.to_string().contains("other settings"), "{error}");
    }

    #[test]
    fn a_damaged_file_stops_the_elector_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let (file, _) = StateFile::open(dir.path(), owner("ring", 3)).unwrap();
        file.store(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        drop(file);
        let path = dir.path().join(FILE);
        let mut bytes = fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let error = StateFile::open(dir.path(), owner("ring", 3)).unwrap_err();
        assert!(
            matches!(error, ElectorError::CorruptState { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("elector.state"), "{error}");
        fs::write(&path, &bytes[..3]).unwrap();
        let error = StateFile::open(dir.path(), owner("ring", 3)).unwrap_err();
        assert!(
            error.to_string().contains("shorter than its header"),
            "{error}"
        );
    }
}

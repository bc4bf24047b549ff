//! The data directory: its identity file, which ties it to one member of
//! one cluster, and the write-ahead log inside it.

use crate::config::NodeConfig;
use bellwether_core::raft::{recover, Finding, RaftDurable, Repair, Snapshot};
use bellwether_core::NodeId;
use bellwether_storage::PromiseFile;
use bellwether_storage::{Storage, WalOptions, WalStorage};
use std::path::Path;

/// Name of the identity file.
const IDENTITY_FILE: &str = "bellwether.id";

/// Why a data directory cannot be used; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// The directory cannot be created or written.
    #[error("data dir {path}: {error}; choose a writable --data-dir (or fix its permissions)")]
    Unwritable {
        /// The directory.
        path: String,
        /// What failed.
        error: std::io::Error,
    },
    /// It belongs to another member or cluster.
    #[error("data dir {path} belongs to cluster {cluster:?} member {id}, but this node is cluster {our_cluster:?} member {}; use its own --data-dir", .our_id.0)]
    Foreign {
        /// The directory.
        path: String,
        /// Cluster recorded there.
        cluster: String,
        /// Member recorded there.
        id: String,
        /// Our cluster.
        our_cluster: String,
        /// Our id.
        our_id: NodeId,
    },
    /// The identity file is there but the log and the promise record are
    /// both gone: what this member promised its peers is unknown.
    #[error("data dir {path} belongs to this member but holds neither its log nor its promise record (wiped?): it may have acknowledged writes the others rely on, so it will not start. Remove this member (`etcdctl member remove`) and add it back with an empty directory (`bellwether node --join`); a directory restored from a backup is as stale as a wiped one")]
    Wiped {
        /// The directory.
        path: String,
    },
    /// The log lost what the member had promised, and the member has no
    /// peer to repair it from.
    #[error("data dir {path}: {found}. This member is its cluster's only voter, so no peer can give the log back, and it will not start from a log that lost acknowledged writes (nothing was modified). Restore a snapshot (`bellwether snapshot restore`) into a new directory, or delete {path}/promises to start from the log as it is, accepting the loss")]
    Unrepairable {
        /// The directory.
        path: String,
        /// What the audit found.
        found: String,
    },
    /// The log is damaged or unreadable; nothing was changed.
    #[error("write-ahead log in {path}: {error} (nothing was modified)")]
    Storage {
        /// The WAL directory.
        path: String,
        /// The storage error (names the file and offset for corruption).
        error: bellwether_storage::StorageError,
    },
}

/// Name of the promise record's file (`bellwether_storage::PromiseFile`):
/// beside the log's directory, not inside it, so that losing the log
/// does not lose the knowledge of what it held.
pub const PROMISE_FILE: &str = "promises";

/// What opening the data directory found of the member's promises.
#[derive(Debug, Default)]
pub struct Opened {
    /// What the log lacked of the promise record, each in one sentence;
    /// empty for a healthy directory.
    pub findings: Vec<String>,
    /// The repair the member must carry out before it campaigns, if any
    /// (`bellwether_core::raft::audit`).
    pub repair: Option<Repair>,
    /// Where a log that could not be read was moved, if one was.
    pub moved_aside: Option<std::path::PathBuf>,
}

/// Opens (or initialises) the data directory of `config` and recovers what
/// the node persisted, audited against its promise record.
pub fn open(config: &NodeConfig) -> Result<(WalStorage, RaftDurable), DataDirError> {
    open_audited(config, &mut |_| {}).map(|(wal, durable, _)| (wal, durable))
}

/// [`open`], also saying what the audit found. A directory whose log lost
/// what the member had promised (deleted, truncated, corrupt) is not
/// refused: the damaged log is moved aside (kept, not deleted), since
/// what remains of it may be stale as well as short, and the member
/// starts empty, in repair, with the term and vote the record kept. A
/// directory that kept its identity but lost both its log and its record
/// is refused: what the member promised is unknown.
///
/// `on_snapshot` sees the log's newest snapshot as soon as it is read, before
/// the rest of the log is (see [`WalStorage::recover_observing`]); what this
/// returns may still differ from it, when the audit sets the log aside.
pub fn open_audited(
    config: &NodeConfig,
    on_snapshot: &mut dyn FnMut(&Snapshot),
) -> Result<(WalStorage, RaftDurable, Opened), DataDirError> {
    let dir = &config.data_dir;
    let unwritable = |error| DataDirError::Unwritable {
        path: dir.display().to_string(),
        error,
    };
    std::fs::create_dir_all(dir).map_err(unwritable)?;
    let known = check_identity(dir, config, IdentityCheck::Read)?;
    let wal_dir = dir.join("wal");
    let storage_error = |error| DataDirError::Storage {
        path: wal_dir.display().to_string(),
        error,
    };
    let file_system = bellwether_storage::RealFileSystem {
        unsynced: config.unsynced,
    };
    let promise_path = dir.join(PROMISE_FILE);
    // The record first: only a valid one lets a damaged log be set aside.
    let record = PromiseFile::read(&file_system, &promise_path).map_err(storage_error)?;
    // The control that the amnesia checks must catch: no audit at all.
    let record = record.filter(|_| config.runtime != bellwether_member::Runtime::IgnoresPromises);
    let had_segments = std::fs::read_dir(&wal_dir).is_ok_and(|mut files| files.next().is_some());
    let options = WalOptions {
        // The file adds its header and trailer to the data the core bounds.
        snapshot_bytes_max: config.snapshot_bytes_max().saturating_add(64 << 10),
        ..WalOptions::default()
    };
    let open_wal = || WalStorage::with_file_system(file_system, &wal_dir, options.clone());
    let mut wal = open_wal().map_err(storage_error)?;
    let mut opened = Opened::default();
    // `None`: the log could not be read at all (set aside below, which
    // only a valid record allows).
    let log = match wal.recover_observing(on_snapshot) {
        Ok(recovered) => Some(RaftDurable {
            hard_state: recovered.hard_state,
            snapshot: recovered.snapshot,
            entries: recovered.entries,
        }),
        Err(bellwether_storage::StorageError::Corrupt {
            path,
            offset,
            reason,
        }) if record.is_some() && reason.is_lost_data() && has_peers(config) => {
            opened.findings.push(format!(
                "the log could not be read ({} is corrupt at byte {offset}: {reason})",
                path.display()
            ));
            None
        }
        Err(error) => return Err(storage_error(error)),
    };
    let durable = match record {
        Some(record) => {
            // The decision is the core's, so that the simulator makes the
            // same one on its disk images (`bellwether_core::raft::recover`).
            let recovery = recover(&record, log);
            let damaged = recovery
                .audit
                .findings
                .iter()
                .any(|f| *f != Finding::RepairUnfinished);
            opened
                .findings
                .extend(recovery.audit.findings.iter().map(ToString::to_string));
            if damaged && !has_peers(config) {
                return Err(DataDirError::Unrepairable {
                    path: dir.display().to_string(),
                    found: opened.findings.join("; "),
                });
            }
            if recovery.set_aside {
                drop(wal);
                wal = set_aside(dir, &wal_dir, &mut opened, open_wal).map_err(storage_error)?;
            }
            opened.repair = recovery.audit.repair;
            wal.set_repair(recovery.audit.repair);
            if wal.hard_state() != recovery.durable.hard_state {
                wal.save_hard_state(&recovery.durable.hard_state)
                    .map_err(storage_error)?;
                wal.sync().map_err(storage_error)?;
            }
            recovery.durable
        }
        None if known
            && !had_segments
            && config.runtime != bellwether_member::Runtime::IgnoresPromises =>
        {
            return Err(DataDirError::Wiped {
                path: dir.display().to_string(),
            });
        }
        // A new directory, or one written before promise records existed
        // (or whose record is unreadable): the log is taken as it is.
        None => log.expect("an unreadable log is accepted only with a record"),
    };
    wal.keep_promises(&file_system, &promise_path)
        .map_err(storage_error)?;
    wal.write_promises().map_err(storage_error)?;
    if !known {
        // Written after the promise record, so an identity file always
        // means the record was there too.
        check_identity(dir, config, IdentityCheck::Create)?;
    }
    Ok((wal, durable, opened))
}

/// True when the member has peers that can give a damaged log back: a
/// cluster of one has none, and its log is all there is.
fn has_peers(config: &NodeConfig) -> bool {
    config.peers.len() > 1 || !config.join_voters.is_empty()
}

/// Moves the damaged log at `wal_dir` aside (renamed, never deleted) and
/// opens an empty one in its place.
fn set_aside(
    dir: &Path,
    wal_dir: &Path,
    opened: &mut Opened,
    open_wal: impl Fn() -> Result<WalStorage, bellwether_storage::StorageError>,
) -> Result<WalStorage, bellwether_storage::StorageError> {
    let aside = dir.join(format!("wal.damaged-{}", crate::status_tracker::unix_ms()));
    let io = |operation, source| bellwether_storage::StorageError::Io {
        operation,
        path: wal_dir.to_path_buf(),
        source,
    };
    if wal_dir.exists() {
        std::fs::rename(wal_dir, &aside).map_err(|e| io("rename", e))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("fsync", e))?;
        opened.moved_aside = Some(aside);
    }
    let mut wal = open_wal()?;
    wal.recover()?;
    Ok(wal)
}

/// Why a snapshot could not be restored into a data directory.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The directory holds something already.
    #[error("data dir {0} is not empty: restore into a new directory")]
    NotEmpty(String),
    /// The directory could not be prepared.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
}

/// Makes `config`'s data directory the start of a new cluster whose state
/// is `snapshot` (a store's snapshot bytes): the identity file, then a log
/// holding only that snapshot at index 1 of term 1 with every member of
/// `config.peers` a voter. Every member restored from the same file with
/// the same member list starts from the same log, as a fresh cluster
/// starts from an empty one. Refuses a directory that holds anything.
///
/// The directory is written beside the target (`<dir>.restoring`) and
/// renamed into place once complete, so a restore that fails half-way
/// leaves no directory a member would start from.
pub fn restore_snapshot(config: &NodeConfig, snapshot: Vec<u8>) -> Result<(), RestoreError> {
    let dir = &config.data_dir;
    let occupied = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if occupied {
        return Err(RestoreError::NotEmpty(dir.display().to_string()));
    }
    let unwritable = |error| DataDirError::Unwritable {
        path: dir.display().to_string(),
        error,
    };
    let mut staging_name = dir.file_name().unwrap_or_default().to_os_string();
    staging_name.push(".restoring");
    let staging = dir.with_file_name(staging_name);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(unwritable)?;
    }
    let staged = NodeConfig {
        data_dir: staging.clone(),
        ..config.clone()
    };
    write_restored(&staged, snapshot)?;
    if dir.exists() {
        std::fs::remove_dir(dir).map_err(unwritable)?; // empty, checked above
    }
    std::fs::rename(&staging, dir).map_err(unwritable)?;
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    std::fs::File::open(parent.unwrap_or(Path::new(".")))
        .and_then(|d| d.sync_all())
        .map_err(unwritable)?;
    Ok(())
}

/// Writes the restored data directory at `config.data_dir` (the staging
/// directory of [`restore_snapshot`]).
fn write_restored(config: &NodeConfig, snapshot: Vec<u8>) -> Result<(), RestoreError> {
    use bellwether_core::raft::{ClusterConfig, HardState, Snapshot, SnapshotMeta};
    use bellwether_core::{LogIndex, Term};
    let dir = &config.data_dir;
    let (mut wal, durable) = open(config)?;
    assert!(
        durable.snapshot.is_none() && durable.entries.is_empty(),
        "a new data dir"
    );
    let wal_dir = dir.join("wal");
    let storage_error = |error| DataDirError::Storage {
        path: wal_dir.display().to_string(),
        error,
    };
    let meta = SnapshotMeta {
        last_index: LogIndex(1),
        last_term: Term(1),
        config: ClusterConfig::voters(config.peers.keys().copied()),
    };
    wal.save_snapshot(&Snapshot {
        meta,
        data: snapshot.into(),
    })
    .map_err(storage_error)?;
    wal.save_hard_state(&HardState {
        term: Term(1),
        voted_for: None,
        commit: LogIndex(1),
    })
    .map_err(storage_error)?;
    wal.sync().map_err(storage_error)?;
    Ok(())
}

/// Whether [`check_identity`] may create a missing identity file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IdentityCheck {
    /// Only read it.
    Read,
    /// Create it when missing.
    Create,
}

/// Checks the identity file against `config`: true when it is there, false
/// when it is missing (and, with [`IdentityCheck::Create`], now written).
fn check_identity(
    dir: &Path,
    config: &NodeConfig,
    check: IdentityCheck,
) -> Result<bool, DataDirError> {
    let path = dir.join(IDENTITY_FILE);
    let expected = format!("cluster={}\nid={}\n", config.cluster, config.id.0);
    let unwritable = |error| DataDirError::Unwritable {
        path: dir.display().to_string(),
        error,
    };
    match std::fs::read_to_string(&path) {
        Ok(found) if found == expected => Ok(true),
        Ok(found) => {
            let field = |name: &str| {
                found
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("{name}=")))
                    .unwrap_or("?")
                    .to_string()
            };
            Err(DataDirError::Foreign {
                path: dir.display().to_string(),
                cluster: field("cluster"),
                id: field("id"),
                our_cluster: config.cluster.clone(),
                our_id: config.id,
            })
        }
        Err(error)
            if error.kind() == std::io::ErrorKind::NotFound && check == IdentityCheck::Read =>
        {
            drop(error);
            Ok(false)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let temporary = dir.join(format!("{IDENTITY_FILE}.tmp"));
            std::fs::write(&temporary, &expected).map_err(unwritable)?;
            std::fs::File::open(&temporary)
                .and_then(|f| f.sync_all())
                .map_err(unwritable)?;
            std::fs::rename(&temporary, &path).map_err(unwritable)?;
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(unwritable)?;
            Ok(false)
        }
        Err(error) => Err(unwritable(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigLayer;

    fn config(dir: &Path, id: u64) -> NodeConfig {
        NodeConfig::from_layer(ConfigLayer {
            id: Some(id),
            cluster: Some("c".into()),
            peers: Some(vec!["1=127.0.0.1:7001".into(), "2=127.0.0.1:7002".into()]),
            data_dir: Some(dir.to_path_buf()),
            ..ConfigLayer::default()
        })
        .unwrap()
    }

    #[test]
    fn the_identity_file_names_the_member_by_number_and_refuses_another() {
        let dir = tempfile::tempdir().unwrap();
        open(&config(dir.path(), 1)).unwrap();
        let identity = std::fs::read_to_string(dir.path().join(IDENTITY_FILE)).unwrap();
        assert_eq!(identity, "cluster=c\nid=1\n");
        open(&config(dir.path(), 1)).expect("its own member opens it again");
        let Err(error) = open(&config(dir.path(), 2)) else {
            panic!("another member's directory is refused");
        };
        assert_eq!(
            error.to_string(),
            format!(
                "data dir {} belongs to cluster \"c\" member 1, but this node is cluster \"c\" member 2; use its own --data-dir",
                dir.path().display()
            )
        );
    }
}

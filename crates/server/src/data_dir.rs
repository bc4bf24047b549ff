//! The data directory: its identity file, which ties it to one member of
//! one cluster, and the write-ahead log inside it.

use crate::config::NodeConfig;
use bellwether_core::raft::RaftDurable;
use bellwether_core::NodeId;
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
    /// The log is damaged or unreadable; nothing was changed.
    #[error("write-ahead log in {path}: {error} (nothing was modified)")]
    Storage {
        /// The WAL directory.
        path: String,
        /// The storage error (names the file and offset for corruption).
        error: bellwether_storage::StorageError,
    },
}

/// Opens (or initialises) the data directory of `config` and recovers what
/// the node persisted.
pub fn open(config: &NodeConfig) -> Result<(WalStorage, RaftDurable), DataDirError> {
    let dir = &config.data_dir;
    let unwritable = |error| DataDirError::Unwritable {
        path: dir.display().to_string(),
        error,
    };
    std::fs::create_dir_all(dir).map_err(unwritable)?;
    check_identity(dir, config)?;
    let wal_dir = dir.join("wal");
    let storage_error = |error| DataDirError::Storage {
        path: wal_dir.display().to_string(),
        error,
    };
    let file_system = bellwether_storage::RealFileSystem {
        unsynced: config.unsynced,
    };
    let mut wal = WalStorage::with_file_system(file_system, &wal_dir, WalOptions::default())
        .map_err(storage_error)?;
    let recovered = wal.recover().map_err(storage_error)?;
    let durable = RaftDurable {
        hard_state: recovered.hard_state,
        snapshot: recovered.snapshot,
        entries: recovered.entries,
    };
    Ok((wal, durable))
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
        data: std::sync::Arc::new(snapshot),
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

fn check_identity(dir: &Path, config: &NodeConfig) -> Result<(), DataDirError> {
    let path = dir.join(IDENTITY_FILE);
    let expected = format!("cluster={}\nid={}\n", config.cluster, config.id.0);
    let unwritable = |error| DataDirError::Unwritable {
        path: dir.display().to_string(),
        error,
    };
    match std::fs::read_to_string(&path) {
        Ok(found) if found == expected => Ok(()),
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
            Ok(())
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

//! IO failures surface as errors with the path and the operation, poison the
//! store, and never cost data that was synced before them. Also: group
//! commit costs one write and one fsync, however many appends it covers.

mod common;

use bellwether_core::raft::HardState;
use bellwether_core::{LogIndex, NodeId, Term};
use bellwether_storage::{
    FileSystem, SimFault, SimFileSystem, Storage, StorageError, UnsyncedData, WalOptions,
    WalStorage,
};
use common::{command, commands, snapshot};

const DIR: &str = "/data/wal";

fn open(fs: &SimFileSystem) -> WalStorage<SimFileSystem> {
    WalStorage::with_file_system(fs.clone(), DIR, WalOptions::default()).unwrap()
}

fn synced_store(fs: &SimFileSystem) -> WalStorage<SimFileSystem> {
    let mut wal = open(fs);
    wal.recover().unwrap();
    wal.append(&commands(1, 10, 1)).unwrap();
    wal.sync().unwrap();
    wal
}

#[test]
fn a_full_disk_fails_the_sync_with_context_and_poisons_the_store() {
    let fs = SimFileSystem::new();
    let mut wal = synced_store(&fs);
    fs.inject(0, SimFault::DiskFull);
    let batch: Vec<_> = (11..=60).map(|index| command(index, 1, 200)).collect();
    wal.append(&batch).unwrap(); // staged in memory only
    let error = wal.sync().unwrap_err();
    match &error {
        StorageError::Io {
            operation, path, ..
        } => {
            assert_eq!(*operation, "write");
            assert!(
                path.starts_with(DIR) && path.extension().unwrap() == "wal",
                "{path:?}"
            );
        }
        other => panic!("expected an IO error, got {other:?}"),
    }
    assert!(
        error.to_string().contains("no space left on device"),
        "{error}"
    );
    let poisoned = wal.append(&commands(61, 1, 1)).unwrap_err();
    assert!(
        matches!(poisoned, StorageError::Poisoned { .. }),
        "{poisoned:?}"
    );
    assert!(matches!(wal.sync(), Err(StorageError::Poisoned { .. })));

    // Space is freed and the node restarts, with or without a power loss:
    // the half-written batch is a torn tail, the synced entries are intact.
    fs.heal();
    for unsynced in [UnsyncedData::Kept, UnsyncedData::Lost] {
        let disk = fs.fork();
        disk.reboot(unsynced);
        let mut wal = open(&disk);
        let recovered = wal.recover().unwrap();
        assert_eq!(recovered.entries, commands(1, 10, 1), "{unsynced:?}");
        wal.append(&commands(11, 1, 1)).unwrap();
        wal.sync().unwrap();
    }
}

#[test]
fn a_failing_fsync_is_reported_and_nothing_is_acknowledged_after_it() {
    let fs = SimFileSystem::new();
    let mut wal = synced_store(&fs);
    fs.inject(0, SimFault::SyncFails);
    wal.append(&commands(11, 5, 1)).unwrap();
    let error = wal.sync().unwrap_err();
    assert!(
        matches!(
            &error,
            StorageError::Io {
                operation: "fsync",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(matches!(
        wal.save_hard_state(&HardState::default()),
        Err(StorageError::Poisoned { .. })
    ));
    fs.reboot(UnsyncedData::Lost);
    assert_eq!(open(&fs).recover().unwrap().entries, commands(1, 10, 1));
}

#[test]
fn a_failed_snapshot_write_keeps_the_previous_state() {
    let fs = SimFileSystem::new();
    let mut wal = synced_store(&fs);
    wal.save_snapshot(&snapshot(5, 1)).unwrap();
    fs.inject(0, SimFault::DiskFull);
    let error = wal.save_snapshot(&snapshot(8, 1)).unwrap_err();
    assert!(
        matches!(&error, StorageError::Io { operation: "create", path, .. } if path.ends_with("0000000000000008.snap.tmp")),
        "{error:?}"
    );
    fs.heal();
    fs.reboot(UnsyncedData::Lost);
    let recovered = open(&fs).recover().unwrap();
    assert_eq!(recovered.snapshot, Some(snapshot(5, 1)));
    assert_eq!(recovered.entries, commands(6, 5, 1));
}

#[test]
fn a_snapshot_over_the_limit_is_refused_without_poisoning() {
    let fs = SimFileSystem::new();
    let options = WalOptions {
        snapshot_bytes_max: 100,
        ..WalOptions::default()
    };
    let mut wal = WalStorage::with_file_system(fs.clone(), DIR, options).unwrap();
    wal.recover().unwrap();
    wal.append(&commands(1, 3, 1)).unwrap();
    let mut big = snapshot(2, 1);
    big.data = vec![7; 200].into();
    let error = wal.save_snapshot(&big).unwrap_err();
    assert!(
        matches!(error, StorageError::SnapshotTooLarge { bytes_max: 100, .. }),
        "{error:?}"
    );
    wal.sync().unwrap();
}

#[test]
fn group_commit_costs_one_write_and_one_fsync() {
    let fs = SimFileSystem::new();
    let mut wal = synced_store(&fs);
    let before = fs.operations();
    for index in 11..=266 {
        wal.append(&[command(index, 1, 64)]).unwrap();
    }
    wal.save_hard_state(&HardState {
        term: Term(1),
        voted_for: Some(NodeId(1)),
        commit: LogIndex(200),
    })
    .unwrap();
    assert_eq!(fs.operations(), before, "appends only stage");
    wal.sync().unwrap();
    assert_eq!(fs.operations() - before, 2, "one write and one fsync");
    wal.sync().unwrap();
    assert_eq!(
        fs.operations() - before,
        2,
        "a sync with nothing staged is free"
    );
}

#[test]
fn writes_are_refused_before_recovery_reports_a_failure() {
    let fs = SimFileSystem::new();
    synced_store(&fs);
    let segment = fs
        .list_dir(std::path::Path::new(DIR))
        .unwrap()
        .into_iter()
        .find(|name| name.ends_with(".wal"))
        .unwrap();
    let path = std::path::Path::new(DIR).join(segment);
    let mut bytes = fs.contents(&path).unwrap();
    bytes[0] = b'?';
    fs.replace_contents(&path, bytes).unwrap();
    let mut wal = open(&fs);
    assert!(matches!(wal.recover(), Err(StorageError::Corrupt { .. })));
    assert!(matches!(wal.sync(), Err(StorageError::Poisoned { .. })));
}

//! `MemoryStorage` loses exactly what a crash may lose, and follows the same
//! contract as the WAL.

mod common;

use bellwether_core::raft::HardState;
use bellwether_core::{LogIndex, NodeId, Term};
use bellwether_storage::{MemoryStorage, Storage, PENDING_WRITES_MAX};
use common::{commands, is_allowed, oracle_states, snapshot, workload, TestRng};

fn voted(term: u64) -> HardState {
    HardState {
        term: Term(term),
        voted_for: Some(NodeId(1)),
        commit: LogIndex(0),
    }
}

#[test]
fn a_crash_loses_exactly_the_unsynced_writes() {
    let mut storage = MemoryStorage::new();
    storage.append(&commands(1, 5, 1)).unwrap();
    storage.save_hard_state(&voted(1)).unwrap();
    storage.sync().unwrap();
    storage.append(&commands(6, 3, 1)).unwrap();
    storage.save_hard_state(&voted(2)).unwrap();
    assert_eq!(storage.pending_writes(), 2);
    assert_eq!(
        storage.last_index(),
        LogIndex(8),
        "queries see unsynced writes"
    );
    storage.crash();
    assert_eq!(storage.last_index(), LogIndex(5));
    assert_eq!(storage.hard_state(), voted(1));
    let recovered = storage.recover().unwrap();
    assert_eq!(recovered.entries, commands(1, 5, 1));
    assert_eq!(recovered.hard_state, voted(1));
}

#[test]
fn a_crash_can_keep_a_prefix_of_the_unsynced_writes() {
    let mut storage = MemoryStorage::new();
    storage.append(&commands(1, 2, 1)).unwrap();
    storage.save_hard_state(&voted(1)).unwrap();
    storage.append(&commands(3, 2, 1)).unwrap();
    storage.crash_keeping(2);
    let recovered = storage.recover().unwrap();
    assert_eq!(recovered.entries, commands(1, 2, 1));
    assert_eq!(recovered.hard_state, voted(1));
}

#[test]
fn a_restart_without_a_crash_keeps_everything() {
    let mut storage = MemoryStorage::new();
    storage.append(&commands(1, 4, 1)).unwrap();
    storage.append(&commands(3, 1, 2)).unwrap();
    let recovered = storage.recover().unwrap();
    let mut expected = commands(1, 2, 1);
    expected.extend(commands(3, 1, 2));
    assert_eq!(recovered.entries, expected, "conflict truncation applied");
    assert_eq!(storage.pending_writes(), 0);
}

#[test]
fn a_snapshot_makes_earlier_writes_durable_and_compaction_is_invisible() {
    let mut storage = MemoryStorage::new();
    storage.append(&commands(1, 6, 1)).unwrap();
    storage.save_snapshot(&snapshot(3, 1)).unwrap();
    storage.compact(LogIndex(3)).unwrap();
    storage.crash();
    let recovered = storage.recover().unwrap();
    assert_eq!(recovered.snapshot, Some(snapshot(3, 1)));
    assert_eq!(recovered.entries, commands(4, 3, 1));
    assert_eq!(storage.synced_term_at(LogIndex(2)), None, "compacted");
    assert_eq!(storage.synced_term_at(LogIndex(3)), Some(Term(1)));
}

#[test]
fn a_conflicting_snapshot_discards_the_log() {
    let mut storage = MemoryStorage::new();
    storage.append(&commands(1, 6, 1)).unwrap();
    storage.save_snapshot(&snapshot(4, 3)).unwrap();
    assert_eq!(storage.last_index(), LogIndex(4));
    storage.append(&commands(5, 1, 3)).unwrap();
    let recovered = storage.recover().unwrap();
    assert_eq!(recovered.entries, commands(5, 1, 3));
    assert_eq!(storage.snapshot_meta(), Some(&snapshot(4, 3).meta));
}

#[test]
fn staged_writes_are_bounded() {
    let mut storage = MemoryStorage::new();
    let total = PENDING_WRITES_MAX as u64 + 10;
    for index in 1..=total {
        storage.append(&commands(index, 1, 1)).unwrap();
        assert!(storage.pending_writes() <= PENDING_WRITES_MAX);
    }
    storage.crash();
    let kept = storage.last_index().0;
    assert!(
        kept >= PENDING_WRITES_MAX as u64,
        "written back when the bound was hit"
    );
    assert!(kept < total, "the rest was still unsynced");
}

#[test]
fn a_crash_anywhere_leaves_a_prefix_that_includes_every_sync() {
    let operations = workload(3, 150);
    let states = oracle_states(&operations);
    let mut rng = TestRng::new(3);
    for stop in 0..=operations.len() {
        let mut storage = MemoryStorage::new();
        let mut durable = 0;
        for (position, operation) in operations[..stop].iter().enumerate() {
            operation.apply(&mut storage).unwrap();
            if operation.is_sync_point() {
                durable = position + 1;
            }
        }
        let kept = rng.below(storage.pending_writes() as u64 + 1) as usize;
        storage.crash_keeping(kept);
        let recovered = storage.recover().unwrap();
        assert!(
            is_allowed(&states, durable, stop, &recovered),
            "crash after {stop} operations keeping {kept} staged writes"
        );
    }
}

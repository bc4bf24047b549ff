//! Calls that break the `Storage` contract are caller bugs, and both
//! implementations stop on them rather than store a corrupt log.

mod common;

use bellwether_core::raft::HardState;
use bellwether_core::{LogIndex, NodeId, Term};
use bellwether_storage::{MemoryStorage, SimFileSystem, Storage, WalOptions, WalStorage};
use common::{command, commands, snapshot};

fn memory() -> MemoryStorage {
    let mut storage = MemoryStorage::new();
    storage.append(&commands(1, 5, 2)).unwrap();
    storage
}

fn wal() -> WalStorage<SimFileSystem> {
    let mut storage =
        WalStorage::with_file_system(SimFileSystem::new(), "/wal", WalOptions::default()).unwrap();
    storage.recover().unwrap();
    storage.append(&commands(1, 5, 2)).unwrap();
    storage
}

fn leave_a_gap(storage: &mut dyn Storage) {
    let _ = storage.append(&commands(7, 1, 2));
}

fn break_contiguity(storage: &mut dyn Storage) {
    let _ = storage.append(&[command(6, 2, 1), command(8, 2, 1)]);
}

fn lower_a_term(storage: &mut dyn Storage) {
    let _ = storage.append(&commands(6, 1, 1));
}

fn rewrite_snapshotted_entries(storage: &mut dyn Storage) {
    storage.save_snapshot(&snapshot(3, 2)).unwrap();
    let _ = storage.append(&commands(3, 1, 2));
}

fn change_a_vote(storage: &mut dyn Storage) {
    let vote = |id| HardState {
        term: Term(4),
        voted_for: Some(NodeId(id)),
        commit: LogIndex(0),
    };
    storage.save_hard_state(&vote(1)).unwrap();
    let _ = storage.save_hard_state(&vote(2));
}

fn compact_past_the_snapshot(storage: &mut dyn Storage) {
    storage.save_snapshot(&snapshot(2, 2)).unwrap();
    let _ = storage.compact(LogIndex(3));
}

#[test]
#[should_panic(expected = "would leave a gap")]
fn memory_refuses_a_gap() {
    leave_a_gap(&mut memory());
}

#[test]
#[should_panic(expected = "would leave a gap")]
fn wal_refuses_a_gap() {
    leave_a_gap(&mut wal());
}

#[test]
#[should_panic(expected = "contiguous")]
fn memory_refuses_a_non_contiguous_batch() {
    break_contiguity(&mut memory());
}

#[test]
#[should_panic(expected = "contiguous")]
fn wal_refuses_a_non_contiguous_batch() {
    break_contiguity(&mut wal());
}

#[test]
#[should_panic(expected = "below its predecessor")]
fn memory_refuses_a_lower_term() {
    lower_a_term(&mut memory());
}

#[test]
#[should_panic(expected = "below its predecessor")]
fn wal_refuses_a_lower_term() {
    lower_a_term(&mut wal());
}

#[test]
#[should_panic(expected = "covered by the snapshot")]
fn memory_refuses_to_rewrite_snapshotted_entries() {
    rewrite_snapshotted_entries(&mut memory());
}

#[test]
#[should_panic(expected = "covered by the snapshot")]
fn wal_refuses_to_rewrite_snapshotted_entries() {
    rewrite_snapshotted_entries(&mut wal());
}

#[test]
#[should_panic(expected = "was changed")]
fn memory_refuses_a_second_vote_in_a_term() {
    change_a_vote(&mut memory());
}

#[test]
#[should_panic(expected = "was changed")]
fn wal_refuses_a_second_vote_in_a_term() {
    change_a_vote(&mut wal());
}

#[test]
#[should_panic(expected = "does not cover")]
fn memory_refuses_to_compact_past_the_snapshot() {
    compact_past_the_snapshot(&mut memory());
}

#[test]
#[should_panic(expected = "does not cover")]
fn wal_refuses_to_compact_past_the_snapshot() {
    compact_past_the_snapshot(&mut wal());
}

#[test]
#[should_panic(expected = "call recover() before writing")]
fn wal_refuses_writes_before_recovery() {
    let mut storage =
        WalStorage::with_file_system(SimFileSystem::new(), "/wal", WalOptions::default()).unwrap();
    let _ = storage.append(&commands(1, 1, 1));
}

#[test]
#[should_panic(expected = "recover() is called once")]
fn wal_recovers_once() {
    let _ = wal().recover();
}

#[test]
fn invalid_options_are_refused_up_front() {
    let options = WalOptions {
        record_bytes_max: 1 << 20,
        segment_bytes_max: 1 << 20,
        ..WalOptions::default()
    };
    let error = WalStorage::open("/nonexistent", options).unwrap_err();
    assert!(error.to_string().contains("segment_bytes_max"), "{error}");
}

#[test]
fn stores_can_move_to_a_writer_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<MemoryStorage>();
    assert_send::<WalStorage>();
    assert_send::<WalStorage<SimFileSystem>>();
    assert_send::<Box<dyn Storage + Send>>();
}

//! Crash at every mutating file operation of a workload, under every kind of
//! unsynced-data loss, and check what recovery makes of it.
//!
//! The property (ARCHITECTURE.md, "Durability rules"): after a crash at any
//! point, recovery succeeds, and the recovered state is exactly the state
//! after some prefix of the operations that includes every operation
//! completed before the last sync point. So nothing acknowledged is lost,
//! nothing is reordered or invented, the log is contiguous, and a torn tail
//! is repaired rather than reported. After recovery the WAL must also accept
//! new writes that survive the next crash, which catches a repair that left
//! garbage behind.

mod common;

use bellwether_core::raft::{audit, HardState, RaftDurable};
use bellwether_core::{NodeId, Term};
use bellwether_storage::{
    Recovered, SimFault, SimFileSystem, Storage, UnsyncedData, WalOptions, WalStorage,
};
use common::{command, describe, is_allowed, oracle_states, workload, Operation};
use std::path::Path;

/// Small limits, so that a short workload rotates segments, splits appends
/// over several records and flushes mid-append.
fn options() -> WalOptions {
    WalOptions {
        segment_bytes_max: 2048,
        record_bytes_max: 600,
        write_buffer_bytes_max: 300,
        snapshot_bytes_max: 1 << 20,
    }
}

const DIR: &str = "/node/wal";

/// The promise record, beside the log's directory.
const PROMISES: &str = "/node/promises";

/// Crash points tried per workload are bounded by the operations it makes.
const CRASH_POINTS_MAX: u64 = 100_000;

fn open(fs: &SimFileSystem) -> WalStorage<SimFileSystem> {
    WalStorage::with_file_system(fs.clone(), DIR, options()).unwrap()
}

/// The outcomes of unsynced data tried at crash point `k`, with tear
/// positions varying with `k` so that they land everywhere in a record.
fn unsynced_outcomes(k: u64) -> [UnsyncedData; 4] {
    [
        UnsyncedData::Lost,
        UnsyncedData::Kept,
        UnsyncedData::Torn {
            kept_per_mille: ((k * 389) % 1001) as u32,
            rest_zeroed: false,
        },
        UnsyncedData::Torn {
            kept_per_mille: ((k * 211) % 1001) as u32,
            rest_zeroed: true,
        },
    ]
}

/// How far a run got before the crash.
struct Progress {
    /// Operations completed.
    completed: usize,
    /// Operations known durable: all up to the last completed sync point.
    durable: usize,
}

/// Runs `operations` on a fresh disk that crashes at operation `crash_at`.
/// Returns `None` if the workload finished before the crash point.
fn run_until_crash(
    fs: &SimFileSystem,
    operations: &[Operation],
    crash_at: u64,
) -> Option<Progress> {
    fs.inject(crash_at, SimFault::Crash);
    let mut wal = open(fs);
    let mut progress = Progress {
        completed: 0,
        durable: 0,
    };
    let promised = wal.recover().is_ok()
        && wal.keep_promises(fs, Path::new(PROMISES)).is_ok()
        && wal.write_promises().is_ok();
    if !promised {
        assert!(fs.is_crashed(), "only the injected crash may fail recovery");
        return Some(progress);
    }
    for operation in operations {
        if operation.apply(&mut wal).is_err() {
            assert!(
                fs.is_crashed(),
                "only the injected crash may fail {operation:?}"
            );
            return Some(progress);
        }
        progress.completed += 1;
        if operation.is_sync_point() {
            progress.durable = progress.completed;
        }
    }
    fs.heal();
    None
}

/// Appends and saves something new, syncs, loses power, and checks that it
/// all came back: the repaired log accepts writes that stay readable.
fn check_writable_after_recovery(
    fs: &SimFileSystem,
    wal: &mut WalStorage<SimFileSystem>,
    recovered: &Recovered,
) {
    let top_term = recovered
        .entries
        .iter()
        .map(|entry| entry.term)
        .chain(recovered.snapshot.iter().map(|s| s.meta.last_term))
        .chain([recovered.hard_state.term])
        .max()
        .unwrap();
    let term = Term(top_term.0 + 1);
    let first = recovered.last_index().0 + 1;
    let batch: Vec<_> = (first..first + 3)
        .map(|index| command(index, term.0, 40))
        .collect();
    let state = HardState {
        term,
        voted_for: Some(NodeId(2)),
        commit: recovered.hard_state.commit,
    };
    wal.append(&batch).unwrap();
    wal.save_hard_state(&state).unwrap();
    wal.sync().unwrap();
    fs.reboot(UnsyncedData::Lost);
    let again = open(fs).recover().unwrap();
    let mut expected = recovered.clone();
    expected.entries.extend(batch);
    expected.hard_state = state;
    assert_eq!(
        again, expected,
        "writes after recovery must survive the next crash"
    );
}

/// The promise record written along the way never claims more than the
/// recovered log holds, whatever the crash point: a crash alone is never
/// taken for lost data (`bellwether_core::raft::audit`).
fn check_promises_hold(
    fs: &SimFileSystem,
    wal: &mut WalStorage<SimFileSystem>,
    recovered: &Recovered,
    seed: u64,
    crash_at: u64,
) {
    let record = wal
        .keep_promises(fs, Path::new(PROMISES))
        .expect("the promise file opens after any crash");
    let Some(record) = record else { return };
    let mut durable = RaftDurable {
        hard_state: recovered.hard_state,
        snapshot: recovered.snapshot.clone(),
        entries: recovered.entries.clone(),
    };
    let found = audit(&record, &mut durable);
    assert!(
        found.findings.is_empty(),
        "seed {seed}, crash at {crash_at}: a crash read as damage: {:?} (record {record:?}, log {})",
        found.findings,
        describe(recovered)
    );
}

/// Crashes once more in the middle of recovery itself, at each of its
/// operations, on copies of `disk`, and checks that a clean recovery after
/// that still finds `expected`: repairs must be safe to interrupt.
fn check_recovery_is_restartable(
    disk: &SimFileSystem,
    unsynced: UnsyncedData,
    expected: &Recovered,
) {
    let counting = disk.fork();
    open(&counting).recover().unwrap();
    let recovery_operations = counting.operations() - disk.operations();
    for crash_at in 0..recovery_operations {
        let fs = disk.fork();
        fs.inject(crash_at, SimFault::Crash);
        assert!(
            open(&fs).recover().is_err(),
            "the crash fires inside recovery"
        );
        fs.reboot(unsynced);
        let recovered = open(&fs)
            .recover()
            .expect("recovery after a crash in recovery");
        assert_eq!(
            &recovered, expected,
            "recovery must be restartable (crash at {crash_at})"
        );
    }
}

fn sweep(seed: u64, operation_count: usize) -> u64 {
    let operations = workload(seed, operation_count);
    let states = oracle_states(&operations);
    let mut crash_points = 0;
    for crash_at in 0..CRASH_POINTS_MAX {
        let mut finished = false;
        for unsynced in unsynced_outcomes(crash_at) {
            let fs = SimFileSystem::new();
            let Some(progress) = run_until_crash(&fs, &operations, crash_at) else {
                finished = true;
                break;
            };
            fs.reboot(unsynced);
            let before_recovery = fs.fork();
            let mut wal = open(&fs);
            let recovered = wal.recover().unwrap_or_else(|error| {
                panic!("seed {seed}, crash at {crash_at}, {unsynced:?}: recovery failed: {error}")
            });
            recovered.assert_well_formed();
            check_promises_hold(&fs, &mut wal, &recovered, seed, crash_at);
            assert!(
                is_allowed(
                    &states,
                    progress.durable,
                    progress.completed + 1,
                    &recovered
                ),
                "seed {seed}, crash at {crash_at}, {unsynced:?}: recovered a state that no \
                 prefix of operations {}..={} produces: {}",
                progress.durable,
                progress.completed + 1,
                describe(&recovered)
            );
            if crash_at % 3 == 0 {
                check_recovery_is_restartable(&before_recovery, unsynced, &recovered);
            }
            check_writable_after_recovery(&fs, &mut wal, &recovered);
        }
        if finished {
            break;
        }
        crash_points += 1;
    }
    assert!(
        crash_points > 50,
        "the workload must exercise many crash points"
    );
    crash_points
}

#[test]
fn every_crash_point_recovers_a_prefix_that_includes_every_sync() {
    for seed in 1..=4 {
        sweep(seed, 120);
    }
}

#[test]
fn a_long_workload_survives_crashes_across_many_rotations_and_compactions() {
    let crash_points = sweep(99, 400);
    assert!(crash_points > 300, "{crash_points} crash points");
}

#[test]
fn a_crash_free_run_matches_the_in_memory_model_at_every_sync() {
    let operations = workload(7, 300);
    let states = oracle_states(&operations);
    let fs = SimFileSystem::new();
    let mut wal = open(&fs);
    wal.recover().unwrap();
    for (position, operation) in operations.iter().enumerate() {
        operation.apply(&mut wal).unwrap();
        if operation.is_sync_point() {
            // Reopen from what a power loss would leave right now.
            fs.reboot(UnsyncedData::Lost);
            wal = open(&fs);
            let recovered = wal.recover().unwrap();
            assert_eq!(
                recovered,
                states[position + 1][0],
                "after operation {position}"
            );
        }
    }
}

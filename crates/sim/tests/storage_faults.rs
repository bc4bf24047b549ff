//! The storage-fault profile: members whose disks lose data (a wiped or
//! truncated log, a corrupt record, a lost fsync'd write) restart through
//! the same audit as the server, and no acknowledged write is lost; the
//! control that ignores the promise record is caught.

use bellwether_sim::run::run_caught;
use bellwether_sim::{run, FaultProfile, RunSpec, Workload};

/// Seeds per workload and size.
const SEEDS: u64 = 150;

fn spec(workload: Workload, nodes: usize, seed: u64, ignores_promises: bool) -> RunSpec {
    let spec = match workload {
        Workload::Kv => RunSpec::kv(nodes, seed, FaultProfile::Storage),
        Workload::Etcd => RunSpec::etcd(nodes, seed, FaultProfile::Storage),
        Workload::None => unreachable!("the profile needs a workload"),
    };
    RunSpec {
        ignores_promises,
        ..spec
    }
}

#[test]
fn members_whose_disks_lose_data_repair_and_lose_no_acknowledged_write() {
    for workload in [Workload::Kv, Workload::Etcd] {
        for nodes in [3, 5] {
            let (mut faults, mut found, mut completed) = (0, 0, 0);
            for seed in 1..=SEEDS {
                let report = run(&spec(workload, nodes, seed, false));
                assert!(
                    report.passed(),
                    "{workload} on {nodes} seed {seed}: {:?}\nreplay: {}",
                    report.violation,
                    report.spec.replay_command()
                );
                let load = report.workload.expect("the workload ran");
                assert_eq!(load.linearizability, "linearizable");
                faults += report.disk_faults;
                found += report.disk_audits_failed;
                completed += load.completed;
            }
            println!(
                "{workload} on {nodes}: {faults} disk faults, {found} audits that found one, {completed} operations completed"
            );
            // The profile must have done what it says: faults in most
            // runs, every one of them found at the next start.
            assert!(
                faults >= SEEDS,
                "{workload} on {nodes}: only {faults} faults"
            );
            assert!(
                found >= faults,
                "{workload} on {nodes}: {found} of {faults} found"
            );
            assert!(
                completed as u64 > SEEDS * 50,
                "{workload} on {nodes}: {completed} ops"
            );
        }
    }
}

#[test]
fn members_that_ignore_their_promise_records_lose_acknowledged_writes_and_are_caught() {
    for workload in [Workload::Kv, Workload::Etcd] {
        let mut caught = Vec::new();
        for seed in 1..=SEEDS {
            let report = run_caught(&spec(workload, 3, seed, true));
            assert_eq!(report.disk_audits_failed, 0, "the control audits nothing");
            if let Some(violation) = report.violation {
                caught.push(format!(
                    "seed {seed}: {}: {}",
                    violation.property, violation.detail
                ));
            }
        }
        println!(
            "{workload}: caught in {} of {SEEDS} seeds; first: {:?}",
            caught.len(),
            caught.first()
        );
        // Measured: about 8% of seeds for etcd and 15% for kv on 3 members.
        // A member refused for a log it cannot read may also stall the
        // cluster (liveness); only safety checks count here.
        let by_safety = caught.iter().filter(|c| !c.contains(": liveness:")).count();
        assert!(
            by_safety >= 3,
            "{workload}: the control was caught by a safety check in {by_safety} of {SEEDS} seeds only: {caught:?}"
        );
    }
}

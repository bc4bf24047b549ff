//! Runs one spec with the algorithm it names, using each algorithm's default
//! configuration (timeouts sized for 1 ms ticks and ≤ 5 ms latency).

use crate::checkers::ChosenValues;
use crate::checkers::Violation;
use crate::kv::{KvApp, KvConfig, RaftLike};
use crate::linearizability::Operation;
use crate::linearizability::{check, CheckOptions, CheckResult};
use crate::member::{EtcdApp, LessorMode, Runtime, SimMember, SimMemberConfig};
use crate::promise_guards::{member_guard, raft_guard};
use crate::report::RunReport;
use crate::report::WorkloadReport;
use crate::scenario::run_with;
use crate::scenario::run_with_app;
use crate::spec::{Algorithm, ReadMode, RunSpec, Workload};
use bellwether_core::bully::{BullyConfig, BullyNode, Winner};
use bellwether_core::paxos::{PaxosConfig, PaxosNode};
use bellwether_core::raft::{RaftConfig, RaftNode};
use bellwether_core::ring::{RingConfig, RingNode};

/// [`run`], with a panic (an invariant the code asserts, in release
/// builds too) reported as the run's violation instead of ending the
/// caller: a sweep goes on to the next seed, and a control that breaks
/// the protocol badly enough to trip an assertion counts as caught.
pub fn run_caught(spec: &RunSpec) -> RunReport {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(spec))) {
        Ok(report) => report,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic without a message".to_string());
            let mut report = RunReport::new(spec.clone());
            report.violation = Some(Violation {
                property: "asserted-invariant",
                time_us: 0,
                detail: format!("the run panicked: {message}"),
            });
            report
        }
    }
}

/// Runs `spec` and reports what happened.
pub fn run(spec: &RunSpec) -> RunReport {
    assert!(
        spec.faults != crate::spec::FaultProfile::Storage || spec.workload != Workload::None,
        "the storage profile needs a workload whose members keep promise records"
    );
    if spec.workload == Workload::Etcd {
        assert_eq!(
            spec.algorithm,
            Algorithm::Raft,
            "the etcd workload runs the member driver, which runs Raft"
        );
        return run_etcd_with(spec, Runtime::Faithful);
    }
    if spec.workload == Workload::Kv {
        assert_eq!(
            spec.algorithm,
            Algorithm::Raft,
            "the KV workload needs a replicated log"
        );
        return run_kv(spec);
    }
    match spec.algorithm {
        Algorithm::Raft => run_with::<RaftNode>(spec, raft_config(spec)),
        Algorithm::Bully => run_with::<BullyNode>(spec, bully_config(spec)),
        Algorithm::Ring => run_with::<RingNode>(spec, ring_config(spec)),
        Algorithm::Paxos => run_paxos_with::<PaxosNode>(spec, paxos_config(spec)),
    }
}

/// Paxos (or a test's broken variant of it) with the consistency checker
/// riding on its output: any slot learned with two values fails the run.
pub fn run_paxos_with<P>(spec: &RunSpec, config: P::Config) -> RunReport
where
    P: bellwether_core::Protocol<Output = bellwether_core::paxos::PaxosOutput>,
{
    let app = ChosenValues::default();
    run_with_app::<P, ChosenValues>(spec, config, app, |_| {}).0
}

/// Raft's settings for an election-only spec: the defaults, rotating
/// leadership if the spec asks for it.
pub fn raft_config(spec: &RunSpec) -> RaftConfig {
    with_detector(
        spec,
        RaftConfig {
            rotate_after_ticks: spec.rotate_after_ms * 1_000 / spec.tick_us,
            ..RaftConfig::default()
        },
    )
}

/// The adaptive detector's floor, in heartbeats, when a spec turns it on.
const DETECTOR_FLOOR_HEARTBEATS: u64 = 3;

/// `(heartbeat, floor)` for a spec: the detector on means a heartbeat of
/// a tenth of `timeout` (the member's default ratio, 100 ms to 1,000 ms)
/// and a floor of [`DETECTOR_FLOOR_HEARTBEATS`]; off leaves `heartbeat`.
fn detector_timing(spec: &RunSpec, heartbeat: u64, timeout: u64) -> (u64, u64) {
    if spec.detector {
        ((timeout / 10).max(1), DETECTOR_FLOOR_HEARTBEATS)
    } else {
        (heartbeat, 0)
    }
}

/// Bully's settings for a spec: the defaults, its winner rule and detector.
pub fn bully_config(spec: &RunSpec) -> BullyConfig {
    let base = BullyConfig::default();
    let (heartbeat_ticks, detector_floor_heartbeats) =
        detector_timing(spec, base.heartbeat_ticks, base.leader_timeout_ticks_min);
    BullyConfig {
        winner: winner(spec),
        heartbeat_ticks,
        detector_floor_heartbeats,
        ..base
    }
}

/// Ring's settings for a spec: the defaults, its winner rule and detector.
pub fn ring_config(spec: &RunSpec) -> RingConfig {
    let base = RingConfig::default();
    let (heartbeat_ticks, detector_floor_heartbeats) =
        detector_timing(spec, base.heartbeat_ticks, base.leader_timeout_ticks_min);
    RingConfig {
        winner: winner(spec),
        heartbeat_ticks,
        detector_floor_heartbeats,
        ..base
    }
}

/// Multi-Paxos's settings for a spec: the defaults and its detector.
pub fn paxos_config(spec: &RunSpec) -> PaxosConfig {
    let base = PaxosConfig::default();
    let (heartbeat_ticks, detector_floor_heartbeats) =
        detector_timing(spec, base.heartbeat_ticks, base.election_ticks_min);
    PaxosConfig {
        heartbeat_ticks,
        detector_floor_heartbeats,
        ..base
    }
}

/// `config` with the adaptive detector on when `spec` asks for it (see
/// [`detector_timing`]).
fn with_detector(spec: &RunSpec, config: RaftConfig) -> RaftConfig {
    if !spec.detector {
        return config;
    }
    assert!(!config.lease_reads, "lease reads run without the detector");
    let (heartbeat_ticks, detector_floor_heartbeats) =
        detector_timing(spec, config.heartbeat_ticks, config.election_ticks_min);
    RaftConfig {
        heartbeat_ticks,
        detector_floor_heartbeats,
        ..config
    }
}

/// The winner rule a Bully or Ring spec asks for.
fn winner(spec: &RunSpec) -> Winner {
    if spec.lowest_id_wins {
        Winner::Lowest
    } else {
        Winner::Highest
    }
}

/// Raft with the KV workload: the usual profile, then the history goes
/// through the linearizability checker; a violation fails the run.
fn run_kv(spec: &RunSpec) -> RunReport {
    run_kv_with::<RaftNode>(spec, kv_raft_config(spec))
}

/// The Raft settings a KV spec runs with: the defaults, plus what lease
/// reads require (CheckQuorum and stickiness, already on by default, and no
/// connection-loss hint, which lets a follower vote inside the lease).
pub fn kv_raft_config(spec: &RunSpec) -> RaftConfig {
    let mut config = RaftConfig::default();
    if spec.reads == ReadMode::Lease {
        assert!(!spec.hint, "lease reads run without connection-loss hints");
        config.lease_reads = true;
        config.hint_slot_ticks = 0;
        assert!(config.check_quorum && config.leader_stickiness);
    }
    with_detector(spec, config)
}

/// The KV run for any Raft-like protocol (tests use broken variants).
pub fn run_kv_with<P: RaftLike>(spec: &RunSpec, config: RaftConfig) -> RunReport {
    let kv_config = KvConfig {
        membership_changes: spec.membership_changes,
        op_timeout_us: spec.op_timeout_ms * 1000,
        readers: spec.readers,
        ..KvConfig::default()
    };
    let app = KvApp::new(kv_config, spec.nodes, spec.seed);
    let audit = !spec.ignores_promises;
    let (mut report, mut world) = run_with_app::<P, KvApp>(spec, config, app, |world| {
        world.guard_disks(raft_guard(audit));
        KvApp::start(world);
    });
    world.app.clients.finish();
    let stats = world.app.stats;
    let completed = world.app.clients.completed();
    let mut workload = check_history(&mut report, &world.app.clients.history, world.now_us());
    workload.completed = completed;
    workload.indeterminate = workload.operations - completed;
    workload.reads_without_round = stats.reads_without_round;
    workload.membership_changes = stats.membership_changes;
    workload.leader_removals = stats.leader_removals;
    workload.membership_refused = stats.membership_refused;
    report.workload = Some(workload);
    report
}

/// The etcd workload: the member driver on every node, carried out by
/// `runtime` (faithful, or broken on purpose by tests).
pub fn run_etcd_with(spec: &RunSpec, runtime: Runtime) -> RunReport {
    run_etcd_with_lessor(spec, runtime, LessorMode::Faithful)
}

/// The etcd workload with the lease clocks proposing their expiry revokes
/// as `lessor` says (faithful, or broken on purpose by tests). Besides the
/// history's linearizability, no lease may expire before its guarantee.
pub fn run_etcd_with_lessor(spec: &RunSpec, runtime: Runtime, lessor: LessorMode) -> RunReport {
    let config = SimMemberConfig {
        raft: kv_raft_config(spec),
        tick_us: spec.tick_us,
        runtime,
        boots: Default::default(),
        lessor,
        mutation: None,
        reads_under_lease: Default::default(),
        snapshot_schedule: crate::member::SIM_SNAPSHOT_SCHEDULE,
    };
    run_etcd_configured(spec, config)
}

/// The etcd workload on members whose state machine is broken as
/// `mutation` says, for tests that the checks catch it.
pub fn run_etcd_mutated(spec: &RunSpec, mutation: bellwether_etcd::Mutation) -> RunReport {
    let config = SimMemberConfig {
        raft: kv_raft_config(spec),
        tick_us: spec.tick_us,
        runtime: Runtime::Faithful,
        boots: Default::default(),
        lessor: LessorMode::Faithful,
        mutation: Some(mutation),
        reads_under_lease: Default::default(),
        snapshot_schedule: crate::member::SIM_SNAPSHOT_SCHEDULE,
    };
    run_etcd_configured(spec, config)
}

/// The etcd workload on members configured as `config` says.
fn run_etcd_configured(spec: &RunSpec, config: SimMemberConfig) -> RunReport {
    let kv_config = KvConfig {
        op_timeout_us: spec.op_timeout_ms * 1000,
        readers: spec.readers,
        ..KvConfig::default()
    };
    let app = EtcdApp::new(kv_config, spec.nodes, spec.seed);
    let reads_under_lease = config.reads_under_lease.clone();
    let audit = !spec.ignores_promises;
    let (mut report, mut world) = run_with_app::<SimMember, EtcdApp>(spec, config, app, |world| {
        world.guard_disks(member_guard(audit));
        EtcdApp::start(world);
    });
    world.app.finish();
    if report.violation.is_none() {
        report.violation = EtcdApp::lease_expired_early(&world);
    }
    let completed = world.app.clients.completed();
    let mut workload = check_history(&mut report, &world.app.clients.history, world.now_us());
    workload.completed = completed;
    workload.indeterminate = workload.operations - completed;
    workload.leases_expired = world.app.leases.expiries() as u64;
    workload.keep_alives_renewed = world.app.leases.renewed;
    workload.reads_without_round = reads_under_lease.load(std::sync::atomic::Ordering::Relaxed);
    report.workload = Some(workload);
    report
}

/// Checks `history` for linearizability; a violation fails the run (unless
/// it failed already). The counts besides the verdict are left at zero.
fn check_history(report: &mut RunReport, history: &[Operation], now_us: u64) -> WorkloadReport {
    let result = check(history, &CheckOptions::default());
    let verdict = match &result {
        CheckResult::Linearizable => "linearizable".to_string(),
        CheckResult::NotLinearizable { key, explanation } => {
            format!("NOT linearizable on {key}: {explanation}")
        }
        CheckResult::Unknown { key, reason } => format!("unknown on {key}: {reason:?}"),
    };
    if !result.is_linearizable() && report.violation.is_none() {
        report.violation = Some(Violation {
            property: "linearizability",
            time_us: now_us,
            detail: verdict.clone(),
        });
    }
    WorkloadReport {
        operations: history.len(),
        completed: 0,
        indeterminate: 0,
        linearizability: verdict,
        reads_without_round: 0,
        membership_changes: 0,
        leader_removals: 0,
        membership_refused: 0,
        leases_expired: 0,
        keep_alives_renewed: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::FaultProfile;

    /// The first leader of a fault-free run under each winner rule.
    fn first_leader(algorithm: Algorithm, lowest_id_wins: bool) -> u64 {
        let mut spec = RunSpec::new(algorithm, 5, 11, FaultProfile::None);
        spec.lowest_id_wins = lowest_id_wins;
        spec.timeline = true;
        let report = run(&spec);
        assert!(report.passed(), "{:?}", report.violation);
        report.timeline.first().expect("a leader was elected").node
    }

    #[test]
    fn the_winner_rule_picks_the_end_of_the_id_order() {
        for algorithm in [Algorithm::Bully, Algorithm::Ring] {
            assert_eq!(first_leader(algorithm, false), 5, "{algorithm}");
            assert_eq!(first_leader(algorithm, true), 1, "{algorithm}");
        }
    }
}

//! `sim compare`: the algorithms side by side over cluster sizes, measured
//! rather than asserted. Each row combines three sweeps of the same seeds:
//!
//! - crash profile with connection-loss hints (election, failover, messages);
//! - crash profile without hints (silent failover);
//! - the same with the adaptive detector (silent failover when a
//!   follower suspects after a few heartbeats instead of a timeout);
//! - partition profile (split-brain incidents), without and with the
//!   detector;
//! - the pauses profile (spurious elections), without and with it.

use crate::fairness::fairness;
use crate::spec::{Algorithm, FaultProfile, RunSpec};
use crate::sweep::{sweep, SweepSummary};
use serde::Serialize;

/// Virtual length of each pauses-profile run: one minute, so that the
/// sweep adds up to hours.
pub const PAUSES_PHASE_MS: u64 = 60_000;

/// Cluster sizes compared by default.
pub const DEFAULT_SIZES: [usize; 5] = [3, 5, 9, 17, 33];

/// One algorithm at one size.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    /// Algorithm.
    pub algorithm: Algorithm,
    /// Bully and Ring: which id wins, `"highest"` or `"lowest"`; Raft and
    /// Paxos: `"-"`.
    pub winner: &'static str,
    /// Cluster size.
    pub nodes: usize,
    /// Raft: leadership rotates after this long (0 = never).
    pub rotate_after_ms: u64,
    /// Seeds per sweep.
    pub runs: u64,
    /// Boot to agreed leader, median.
    pub election_ms_p50: Option<f64>,
    /// Boot to agreed leader, 99th percentile.
    pub election_ms_p99: Option<f64>,
    /// Leader crash to agreed new leader, with hints, median.
    pub failover_ms_p50: Option<f64>,
    /// Same, 99th percentile.
    pub failover_ms_p99: Option<f64>,
    /// Leader crash to agreed new leader, no hints, median.
    pub silent_failover_ms_p50: Option<f64>,
    /// Same, 99th percentile.
    pub silent_failover_ms_p99: Option<f64>,
    /// Leader crash to agreed new leader, no hints, with the adaptive
    /// detector, median.
    pub adaptive_failover_ms_p50: Option<f64>,
    /// Same, 99th percentile.
    pub adaptive_failover_ms_p99: Option<f64>,
    /// Leader elections per hour of the pauses profile (nothing fails; a
    /// follower pauses 100–300 ms every 0.5–1.5 s; latency 1–25 ms), fixed
    /// timeout: every one is spurious.
    pub spurious_per_hour_fixed: f64,
    /// Same, with the adaptive detector.
    pub spurious_per_hour_adaptive: f64,
    /// Pauses-profile runs (both) with two acting leaders at once.
    pub pause_split_brain_runs: u64,
    /// Partition runs per 1000 with two acting leaders at once, with the
    /// adaptive detector.
    pub adaptive_split_brain_runs_per_1000: f64,
    /// Messages sent during a failover election (with hints), median.
    pub messages_per_election_p50: Option<f64>,
    /// Same, 99th percentile.
    pub messages_per_election_p99: Option<f64>,
    /// Messages from boot to the first agreed leader, median.
    pub boot_messages_p50: Option<f64>,
    /// Log entries a new leader fetched before it could serve, over every
    /// leadership of the crash and partition sweeps: median, 99th
    /// percentile and maximum. Raft: 0 by construction; Paxos: what phase 1
    /// returned; Bully and Ring: no log (`None`).
    pub catch_up_entries_p50: Option<f64>,
    /// Same, 99th percentile.
    pub catch_up_entries_p99: Option<f64>,
    /// Same, maximum.
    pub catch_up_entries_max: Option<u64>,
    /// Partition runs with at least one split-brain incident, per 1000.
    pub split_brain_runs_per_1000: f64,
    /// Incidents across the partition sweep.
    pub split_brain_incidents: u64,
    /// Of those, incidents where two leaders shared a term or epoch.
    pub split_brain_same_term: u64,
    /// Total split-brain time across the partition sweep.
    pub split_brain_ms_total: f64,
    /// Healing to agreed leader in the partition sweep, median.
    pub recovery_ms_p50: Option<f64>,
    /// Jain's index of the nodes' shares of leader time over long chaos
    /// runs (1 = all led equally long, 1/n = one node always led).
    pub fairness_jain: Option<f64>,
    /// Runs (in any of the three sweeps) that broke an invariant.
    pub failed_runs: u64,
    /// Replay commands of failing runs, if any.
    pub failures: Vec<String>,
}

/// Runs the comparison. `progress(label, done, total)` reports each sweep.
pub fn compare(
    algorithms: &[Algorithm],
    sizes: &[usize],
    runs: u64,
    threads: usize,
    lowest_id_wins: bool,
    rotate_after_ms: u64,
    progress: &(dyn Fn(&str, u64, u64) + Sync),
) -> Vec<CompareRow> {
    let mut rows = Vec::new();
    for &nodes in sizes {
        for &algorithm in algorithms {
            let sweep_with =
                |faults: FaultProfile, hint: bool, detector: bool, seeds: u64| -> SweepSummary {
                    let mut spec = RunSpec::new(algorithm, nodes, 1, faults);
                    spec.hint = hint;
                    spec.detector = detector;
                    if faults == FaultProfile::Pauses {
                        spec.fault_phase_ms = PAUSES_PHASE_MS;
                    }
                    spec.lowest_id_wins = lowest_id_wins && algorithm.has_winner_rule();
                    if algorithm == Algorithm::Raft {
                        spec.rotate_after_ms = rotate_after_ms;
                    }
                    let label = format!(
                        "{algorithm} n={nodes} {faults}{}{}",
                        if hint { "" } else { " silent" },
                        if detector { " adaptive" } else { "" }
                    );
                    sweep(&spec, seeds, threads, &|done, total| {
                        progress(&label, done, total)
                    })
                };
            let sweep_of = |faults: FaultProfile, hint: bool, detector: bool| {
                sweep_with(faults, hint, detector, runs)
            };
            let crash = sweep_of(FaultProfile::Crash, true, false);
            let silent = sweep_of(FaultProfile::Crash, false, false);
            let partition = sweep_of(FaultProfile::Partition, true, false);
            let mut row = row(algorithm, nodes, runs, &crash, &silent, &partition);
            let adaptive = sweep_of(FaultProfile::Crash, false, true);
            row.adaptive_failover_ms_p50 = adaptive.failover_ms.p50;
            row.adaptive_failover_ms_p99 = adaptive.failover_ms.p99;
            let pause_seeds = (runs / 10).max(1);
            let paused_fixed = sweep_with(FaultProfile::Pauses, true, false, pause_seeds);
            let paused_adaptive = sweep_with(FaultProfile::Pauses, true, true, pause_seeds);
            row.spurious_per_hour_fixed = paused_fixed.fault_phase_elections_per_hour();
            row.spurious_per_hour_adaptive = paused_adaptive.fault_phase_elections_per_hour();
            row.pause_split_brain_runs =
                paused_fixed.split_brain_runs + paused_adaptive.split_brain_runs;
            let partition_adaptive = sweep_of(FaultProfile::Partition, true, true);
            row.adaptive_split_brain_runs_per_1000 = partition_adaptive.split_brain_runs_per_1000();
            for extra in [
                &adaptive,
                &paused_fixed,
                &paused_adaptive,
                &partition_adaptive,
            ] {
                row.failed_runs += extra.failed;
                row.failures.extend(
                    extra
                        .failures
                        .iter()
                        .map(|f| format!("{} ({})", f.replay, f.violation)),
                );
            }
            let seeds = (runs / 100).clamp(1, 10);
            progress(&format!("{algorithm} n={nodes} fairness"), 0, seeds);
            row.fairness_jain = fairness(&crash.spec, seeds).map(|f| f.jain);
            progress(&format!("{algorithm} n={nodes} fairness"), seeds, seeds);
            rows.push(row);
        }
    }
    rows
}

fn row(
    algorithm: Algorithm,
    nodes: usize,
    runs: u64,
    crash: &SweepSummary,
    silent: &SweepSummary,
    partition: &SweepSummary,
) -> CompareRow {
    let failures = [crash, silent, partition]
        .iter()
        .flat_map(|s| {
            s.failures
                .iter()
                .map(|f| format!("{} ({})", f.replay, f.violation))
        })
        .collect();
    let winner = match (algorithm, crash.spec.lowest_id_wins) {
        (Algorithm::Raft | Algorithm::Paxos, _) => "-",
        (_, true) => "lowest",
        (_, false) => "highest",
    };
    CompareRow {
        algorithm,
        winner,
        nodes,
        rotate_after_ms: crash.spec.rotate_after_ms,
        runs,
        election_ms_p50: crash.election_ms.p50,
        election_ms_p99: crash.election_ms.p99,
        failover_ms_p50: crash.failover_ms.p50,
        failover_ms_p99: crash.failover_ms.p99,
        silent_failover_ms_p50: silent.failover_ms.p50,
        silent_failover_ms_p99: silent.failover_ms.p99,
        adaptive_failover_ms_p50: None,
        adaptive_failover_ms_p99: None,
        spurious_per_hour_fixed: 0.0,
        spurious_per_hour_adaptive: 0.0,
        pause_split_brain_runs: 0,
        adaptive_split_brain_runs_per_1000: 0.0,
        messages_per_election_p50: crash.messages_per_election.p50,
        messages_per_election_p99: crash.messages_per_election.p99,
        boot_messages_p50: crash.boot_messages.p50,
        catch_up_entries_p50: partition.catch_up_entries.p50,
        catch_up_entries_p99: partition.catch_up_entries.p99,
        catch_up_entries_max: [crash, partition]
            .iter()
            .filter_map(|s| s.catch_up_entries_max)
            .max(),
        split_brain_runs_per_1000: partition.split_brain_runs_per_1000(),
        split_brain_incidents: partition.split_brain_incidents,
        split_brain_same_term: partition.split_brain_same_term,
        split_brain_ms_total: partition.split_brain_ms_total,
        recovery_ms_p50: partition.recovery_ms.p50,
        fairness_jain: None,
        failed_runs: crash.failed + silent.failed + partition.failed,
        failures,
    }
}

/// The rows as an aligned text table.
pub fn table(rows: &[CompareRow]) -> String {
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let mut out = format!(
        "{:<9} {:>5} {:>6} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>12} {:>9} {:>6} {:>9} {:>7}\n",
        "algo",
        "nodes",
        "runs",
        "elect p50",
        "fail p50",
        "fail p99",
        "silent p50",
        "silent p99",
        "adapt p50",
        "adapt p99",
        "spur/h",
        "spur/h ad",
        "msgs p50",
        "msgs p99",
        "split/1000",
        "split ad",
        "fair",
        "fetch max",
        "failed"
    );
    for r in rows {
        out += &format!(
            "{:<9} {:>5} {:>6} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9} {:>7.1} {:>9.1} {:>9} {:>9} {:>12.1} {:>9.1} {:>6} {:>9} {:>7}\n",
            match (r.winner, r.rotate_after_ms) {
                ("lowest", _) => format!("{}-low", r.algorithm.as_str()),
                (_, 0) => r.algorithm.as_str().to_string(),
                _ => format!("{}-rot", r.algorithm.as_str()),
            },
            r.nodes,
            r.runs,
            cell(r.election_ms_p50),
            cell(r.failover_ms_p50),
            cell(r.failover_ms_p99),
            cell(r.silent_failover_ms_p50),
            cell(r.silent_failover_ms_p99),
            cell(r.adaptive_failover_ms_p50),
            cell(r.adaptive_failover_ms_p99),
            r.spurious_per_hour_fixed,
            r.spurious_per_hour_adaptive,
            cell(r.messages_per_election_p50),
            cell(r.messages_per_election_p99),
            r.split_brain_runs_per_1000,
            r.adaptive_split_brain_runs_per_1000,
            r.fairness_jain.map_or("-".into(), |j| format!("{j:.2}")),
            r.catch_up_entries_max.map_or("-".into(), |m| m.to_string()),
            r.failed_runs
        );
    }
    out += "times in ms of virtual time (1 ms ticks, 1–5 ms latency); msgs = messages sent during a failover election;\n";
    out += "silent = leader crash without a connection-loss hint, fixed election timeout; adapt = the same with\n";
    out += "the adaptive detector (heartbeat 15 ms, floor 3 heartbeats);\n";
    out += "spur/h = leader elections per hour of virtual time when nothing fails but a follower pauses 100–300 ms\n";
    out += "every 0.5–1.5 s and latency is 1–10 ms (one-minute runs, a tenth of the seeds), fixed and adaptive (ad);\n";
    out += "split/1000 = partition-profile runs per 1000 with two acting leaders at once (ad: with the detector);\n";
    out += "fetch max = most log entries a new leader fetched before it could serve (Raft 0 by construction; - = no log);\n";
    out += "fair = Jain's index of each node's share of leader time over 20 s chaos runs (1 = equal, 1/n = one node).\n";
    out
}

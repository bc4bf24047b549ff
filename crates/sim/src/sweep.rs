//! Many seeds of one spec, run on all cores, folded into percentiles.
//!
//! Only a few numbers per run are kept, so a sweep of millions of seeds runs
//! in constant memory apart from those samples.

use crate::checkers::Violation;
use crate::report::RunReport;
use crate::run::run_caught;
use crate::spec::RunSpec;
use crate::stats::percentile;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// At most this many failing seeds are listed in a summary.
pub const FAILURES_LISTED_MAX: usize = 20;

/// p50 and p99 of one measure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Number of samples.
    pub samples: usize,
}

impl Percentiles {
    /// Percentiles of `values`.
    pub fn of(values: &[f64]) -> Self {
        Percentiles {
            p50: percentile(values, 0.5),
            p99: percentile(values, 0.99),
            samples: values.len(),
        }
    }
}

/// A failing seed and how to replay it.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// What broke.
    pub violation: Violation,
    /// The exact command that replays it.
    pub replay: String,
}

/// What a sweep found.
#[derive(Clone, Debug, Serialize)]
pub struct SweepSummary {
    /// The spec, with the first seed.
    pub spec: RunSpec,
    /// Seeds run.
    pub runs: u64,
    /// Runs that broke an invariant.
    pub failed: u64,
    /// Up to [`FAILURES_LISTED_MAX`] of them.
    pub failures: Vec<Failure>,
    /// Boot to agreed leader.
    pub election_ms: Percentiles,
    /// Crash of the leader to agreed new leader.
    pub failover_ms: Percentiles,
    /// Messages per failover election.
    pub messages_per_election: Percentiles,
    /// Healing to agreed leader.
    pub recovery_ms: Percentiles,
    /// Messages from boot to the first agreed leader.
    pub boot_messages: Percentiles,
    /// Runs with at least one split-brain incident.
    pub split_brain_runs: u64,
    /// Incidents over all runs.
    pub split_brain_incidents: u64,
    /// Incidents where two leaders shared a term or epoch.
    pub split_brain_same_term: u64,
    /// Split-brain time over all runs.
    pub split_brain_ms_total: f64,
    /// Leader elections per run.
    pub leader_elections: Percentiles,
    /// Leader elections during the fault phases of all runs.
    pub fault_phase_elections: u64,
    /// Entries a new leader fetched before it could serve, per leadership
    /// (no samples for algorithms without a log).
    pub catch_up_entries: Percentiles,
    /// The most entries any new leader fetched.
    pub catch_up_entries_max: Option<u64>,
    /// Simulated events over all runs.
    pub events: u64,
    /// Disk faults injected over all runs (storage profile).
    pub disk_faults: u64,
    /// Restarts whose audit found a damaged disk, over all runs.
    pub disk_audits_failed: u64,
    /// Wall-clock seconds the sweep took.
    pub wall_seconds: f64,
    /// Worker threads used.
    pub threads: usize,
}

impl SweepSummary {
    /// Split-brain runs per thousand runs.
    pub fn split_brain_runs_per_1000(&self) -> f64 {
        if self.runs == 0 {
            return 0.0;
        }
        self.split_brain_runs as f64 * 1000.0 / self.runs as f64
    }

    /// Leader elections per hour of fault phase (virtual time): under
    /// the pauses profile, the spurious elections.
    pub fn fault_phase_elections_per_hour(&self) -> f64 {
        let hours = self.runs as f64 * self.spec.fault_phase_ms as f64 / 3_600_000.0;
        if hours == 0.0 {
            return 0.0;
        }
        self.fault_phase_elections as f64 / hours
    }

    /// Simulated events per wall-clock second, all threads together.
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.wall_seconds.max(1e-9)
    }
}

#[derive(Default)]
struct Samples {
    election: Vec<f64>,
    failover: Vec<f64>,
    messages: Vec<f64>,
    recovery: Vec<f64>,
    boot_messages: Vec<f64>,
    elections: Vec<f64>,
    fault_phase_elections: u64,
    catch_up: Vec<f64>,
    failures: Vec<Failure>,
    failed: u64,
    split_brain_runs: u64,
    split_brain_incidents: u64,
    split_brain_same_term: u64,
    split_brain_ms: f64,
    events: u64,
    disk_faults: u64,
    disk_audits_failed: u64,
    runs: u64,
}

impl Samples {
    fn add(&mut self, report: &RunReport) {
        self.runs += 1;
        self.events += report.events;
        self.disk_faults += report.disk_faults;
        self.disk_audits_failed += report.disk_audits_failed;
        self.election.extend(report.election_ms);
        self.failover.extend(&report.failovers_ms);
        self.messages
            .extend(report.failover_messages.iter().map(|m| *m as f64));
        self.recovery.extend(&report.recoveries_ms);
        self.boot_messages
            .extend(report.election_messages.map(|m| m as f64));
        self.elections.push(report.leader_elections as f64);
        self.fault_phase_elections += report.fault_phase_elections;
        self.catch_up
            .extend(report.catch_up_entries.iter().map(|e| *e as f64));
        if !report.split_brain.is_empty() {
            self.split_brain_runs += 1;
        }
        self.split_brain_incidents += report.split_brain.len() as u64;
        self.split_brain_same_term +=
            report.split_brain.iter().filter(|i| i.same_term).count() as u64;
        self.split_brain_ms += report.split_brain_ms;
        if let Some(violation) = &report.violation {
            self.failed += 1;
            if self.failures.len() < FAILURES_LISTED_MAX {
                self.failures.push(Failure {
                    seed: report.spec.seed,
                    violation: violation.clone(),
                    replay: report.spec.replay_command(),
                });
            }
        }
    }
}

/// Runs seeds `first.seed .. first.seed + seeds` on `threads` workers.
/// `progress(done, total)` is called as runs complete.
pub fn sweep(
    first: &RunSpec,
    seeds: u64,
    threads: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> SweepSummary {
    assert!(threads >= 1, "at least one worker");
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let samples = Mutex::new(Samples::default());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let offset = next.fetch_add(1, Ordering::Relaxed);
                if offset >= seeds {
                    break;
                }
                let spec = RunSpec {
                    seed: first.seed + offset,
                    ..first.clone()
                };
                let report = run_caught(&spec);
                samples
                    .lock()
                    .expect("no worker panics while holding it")
                    .add(&report);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, seeds);
            });
        }
    });
    let mut samples = samples.into_inner().expect("workers finished");
    samples.failures.sort_by_key(|f| f.seed);
    SweepSummary {
        spec: first.clone(),
        runs: samples.runs,
        failed: samples.failed,
        failures: samples.failures,
        election_ms: Percentiles::of(&samples.election),
        failover_ms: Percentiles::of(&samples.failover),
        messages_per_election: Percentiles::of(&samples.messages),
        recovery_ms: Percentiles::of(&samples.recovery),
        boot_messages: Percentiles::of(&samples.boot_messages),
        split_brain_runs: samples.split_brain_runs,
        split_brain_incidents: samples.split_brain_incidents,
        split_brain_same_term: samples.split_brain_same_term,
        split_brain_ms_total: samples.split_brain_ms,
        leader_elections: Percentiles::of(&samples.elections),
        fault_phase_elections: samples.fault_phase_elections,
        catch_up_entries: Percentiles::of(&samples.catch_up),
        catch_up_entries_max: samples
            .catch_up
            .iter()
            .copied()
            .reduce(f64::max)
            .map(|m| m as u64),
        events: samples.events,
        disk_faults: samples.disk_faults,
        disk_audits_failed: samples.disk_audits_failed,
        wall_seconds: started.elapsed().as_secs_f64(),
        threads,
    }
}

//! The outcome of one run: invariants, timings, message counts, incidents.

use crate::checkers::{SplitBrainIncident, Violation};
use crate::spec::RunSpec;
use crate::world::LeadershipSpan;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// What the KV workload did and what the linearizability checker said.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    /// Operations in the history.
    pub operations: usize,
    /// Of those, completed with an answer.
    pub completed: usize,
    /// Of those, abandoned by their client (outcome unknown).
    pub indeterminate: usize,
    /// `linearizable`, `not linearizable: …` or `unknown: …`.
    pub linearizability: String,
    /// Linearizable reads the leader confirmed without a heartbeat round
    /// (by its lease): shows that lease runs do use the lease.
    pub reads_without_round: u64,
    /// Membership changes the leader accepted (removals, learner
    /// additions, promotions).
    pub membership_changes: u64,
    /// Of those, removals of the leader itself.
    pub leader_removals: u64,
    /// Membership changes the leader refused (one pending, learner behind,
    /// no commit in its term yet, transfer under way).
    pub membership_refused: u64,
    /// The etcd workload: leases its members' lease clocks expired.
    pub leases_expired: u64,
    /// The etcd workload: keep-alives answered "renewed".
    pub keep_alives_renewed: u64,
}

/// Everything measured in one run.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// What was run.
    pub spec: RunSpec,
    /// The first broken invariant (safety or liveness), if any.
    pub violation: Option<Violation>,
    /// When the first node became leader.
    pub first_leader_ms: Option<f64>,
    /// From boot until every node agreed on one leader.
    pub election_ms: Option<f64>,
    /// Messages sent from boot until that agreement.
    pub election_messages: Option<u64>,
    /// Each failover: from the leader's crash until every running node
    /// agreed on a new leader.
    pub failovers_ms: Vec<f64>,
    /// Messages sent during each failover window, all types.
    pub failover_messages: Vec<u64>,
    /// Messages sent during failover windows, by type, summed.
    pub failover_messages_by_kind: BTreeMap<String, u64>,
    /// Messages sent during the whole run, by type.
    pub messages_by_kind: BTreeMap<String, u64>,
    /// Times any node entered the leader role.
    pub leader_elections: u64,
    /// Of those, the ones during the fault phase (under the pauses
    /// profile, where nothing fails, every one is spurious).
    pub fault_phase_elections: u64,
    /// Per leadership with a log: entries the new leader fetched before it
    /// could serve (Raft: always 0; Paxos: what phase 1 returned that it
    /// lacked).
    pub catch_up_entries: Vec<u64>,
    /// Intervals with two or more acting leaders.
    pub split_brain: Vec<SplitBrainIncident>,
    /// Sum of their durations.
    pub split_brain_ms: f64,
    /// Each heal (partition healed, or the final heal of everything): time
    /// until every running node agreed on a leader.
    pub recoveries_ms: Vec<f64>,
    /// Events processed.
    pub events: u64,
    /// Disk faults injected (storage profile).
    pub disk_faults: u64,
    /// Restarts whose audit found the disk short of its promise record.
    pub disk_audits_failed: u64,
    /// Virtual time simulated.
    pub simulated_ms: f64,
    /// The KV workload's outcome, when one ran.
    pub workload: Option<WorkloadReport>,
    /// Who led when, if requested.
    pub timeline: Vec<LeadershipSpan>,
    /// Event trace, if requested.
    #[serde(skip)]
    pub trace: Vec<String>,
}

impl RunReport {
    /// An empty report for `spec`.
    pub fn new(spec: RunSpec) -> Self {
        RunReport {
            spec,
            violation: None,
            first_leader_ms: None,
            election_ms: None,
            election_messages: None,
            failovers_ms: Vec::new(),
            failover_messages: Vec::new(),
            failover_messages_by_kind: BTreeMap::new(),
            messages_by_kind: BTreeMap::new(),
            leader_elections: 0,
            fault_phase_elections: 0,
            catch_up_entries: Vec::new(),
            split_brain: Vec::new(),
            split_brain_ms: 0.0,
            recoveries_ms: Vec::new(),
            events: 0,
            disk_faults: 0,
            disk_audits_failed: 0,
            simulated_ms: 0.0,
            workload: None,
            timeline: Vec::new(),
            trace: Vec::new(),
        }
    }

    /// True when no invariant broke.
    pub fn passed(&self) -> bool {
        self.violation.is_none()
    }

    /// A human-readable summary.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1} ms"));
        self.write_spec_line(&mut out);
        let verdict = match &self.violation {
            None => "PASS: no invariant violated".to_string(),
            Some(v) => format!("FAIL: {v}"),
        };
        let _ = writeln!(out, "  result           {verdict}");
        let _ = writeln!(out, "  first leader     {}", ms(self.first_leader_ms));
        let _ = writeln!(
            out,
            "  election         {} ({} messages)",
            ms(self.election_ms),
            self.election_messages.unwrap_or(0)
        );
        for (time, messages) in self.failovers_ms.iter().zip(&self.failover_messages) {
            let _ = writeln!(out, "  failover         {time:.1} ms ({messages} messages)");
        }
        for recovery in &self.recoveries_ms {
            let _ = writeln!(out, "  recovery         {recovery:.1} ms after healing");
        }
        if let Some(workload) = &self.workload {
            write_workload_lines(&mut out, workload);
        }
        let _ = writeln!(out, "  leader elections {}", self.leader_elections);
        if !self.catch_up_entries.is_empty() {
            let _ = writeln!(
                out,
                "  entries fetched  {:?} (per new leader, before it could serve)",
                self.catch_up_entries
            );
        }
        self.write_split_brain_line(&mut out);
        let kinds: Vec<String> = self
            .messages_by_kind
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(out, "  messages         {}", kinds.join(", "));
        let _ = writeln!(
            out,
            "  simulated        {:.1} ms in {} events",
            self.simulated_ms, self.events
        );
        if !self.passed() {
            let _ = writeln!(out, "  replay           {}", self.spec.replay_command());
        }
        out
    }

    /// Writes the summary's first line: what was run, so that a summary
    /// read on its own says which configuration it measured.
    fn write_spec_line(&self, out: &mut String) {
        let spec = &self.spec;
        let _ = writeln!(
            out,
            "{} · {} nodes · seed {} · faults {} · hint {} · tick {} µs · latency {}–{} µs{}",
            spec.algorithm,
            spec.nodes,
            spec.seed,
            spec.faults,
            if spec.hint { "on" } else { "off" },
            spec.tick_us,
            spec.latency_us_min,
            spec.latency_us_max,
            spec.workload_label()
        );
    }

    /// Writes the split-brain line: incidents and their total time, noting
    /// when two leaders shared a term or epoch (the worse kind).
    fn write_split_brain_line(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "  split brain      {} incidents, {:.1} ms in total{}",
            self.split_brain.len(),
            self.split_brain_ms,
            if self.split_brain.iter().any(|i| i.same_term) {
                " (some with equal terms/epochs)"
            } else {
                ""
            }
        );
    }
}

/// Writes the KV workload's lines of a summary: its operations and the
/// linearizability verdict, lease reads, and membership changes.
fn write_workload_lines(out: &mut String, workload: &WorkloadReport) {
    let _ = writeln!(
        out,
        "  kv workload      {} operations ({} completed, {} indeterminate): {}",
        workload.operations, workload.completed, workload.indeterminate, workload.linearizability
    );
    let _ = writeln!(
        out,
        "  kv reads         {} confirmed without a heartbeat round (lease)",
        workload.reads_without_round
    );
    let _ = writeln!(
        out,
        "  membership       {} changes accepted ({} removed the leader itself), {} refused",
        workload.membership_changes, workload.leader_removals, workload.membership_refused
    );
    if workload.leases_expired + workload.keep_alives_renewed > 0 {
        let _ = writeln!(
            out,
            "  leases           {} expired by the lease clocks, {} keep-alives renewed",
            workload.leases_expired, workload.keep_alives_renewed
        );
    }
}

//! What one simulated run is: algorithm, size, seed and fault profile.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Which election algorithm to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// Raft with PreVote, CheckQuorum and stickiness.
    Raft,
    /// Garcia-Molina's Bully algorithm.
    Bully,
    /// Chang–Roberts / LeLann ring election.
    Ring,
}

impl Algorithm {
    /// All algorithms, in report order.
    pub const ALL: [Algorithm; 3] = [Algorithm::Raft, Algorithm::Bully, Algorithm::Ring];

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Raft => "raft",
            Algorithm::Bully => "bully",
            Algorithm::Ring => "ring",
        }
    }
}

/// Which faults a run injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultProfile {
    /// No loss, no partitions, bounded latency: two leaders at once is a
    /// violation for every algorithm.
    None,
    /// The leader crashes (then restarts) several times; failover is timed.
    Crash,
    /// Symmetric, one-way, bridge and isolated-leader partitions, healed
    /// after a while.
    Partition,
    /// Everything at random: crashes, restarts, pauses, partitions, loss,
    /// duplication, delay spikes and clock skew.
    Chaos,
}

impl FaultProfile {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultProfile::None => "none",
            FaultProfile::Crash => "crash",
            FaultProfile::Partition => "partition",
            FaultProfile::Chaos => "chaos",
        }
    }
}

macro_rules! from_str_by_name {
    ($type:ty, $all:expr) => {
        impl FromStr for $type {
            type Err = String;
            fn from_str(text: &str) -> Result<Self, String> {
                $all.into_iter()
                    .find(|v| v.as_str() == text)
                    .ok_or_else(|| {
                        let names: Vec<_> = $all.iter().map(|v| v.as_str()).collect();
                        format!(
                            "unknown value '{text}', expected one of: {}",
                            names.join(", ")
                        )
                    })
            }
        }
        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// What runs on the cluster besides elections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Elections only.
    None,
    /// Simulated clients put, get and compare-and-set through the Raft log;
    /// the history is checked for linearizability (Raft only).
    Kv,
}

impl Workload {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::None => "none",
            Workload::Kv => "kv",
        }
    }
}

from_str_by_name!(Workload, [Workload::None, Workload::Kv]);
from_str_by_name!(Algorithm, Algorithm::ALL);
from_str_by_name!(
    FaultProfile,
    [
        FaultProfile::None,
        FaultProfile::Crash,
        FaultProfile::Partition,
        FaultProfile::Chaos
    ]
);

/// Everything that defines a run. Two runs with equal specs are identical.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSpec {
    /// Algorithm under test.
    pub algorithm: Algorithm,
    /// Cluster size.
    pub nodes: usize,
    /// Seed of every random choice in the run.
    pub seed: u64,
    /// Fault profile.
    pub faults: FaultProfile,
    /// Connection-loss hints on crash (off = silent failures only).
    pub hint: bool,
    /// Keep an event trace.
    pub trace: bool,
    /// Keep the leadership timeline.
    pub timeline: bool,
    /// After faults heal (and after start), all running nodes must agree on
    /// one leader within this bound, or the run fails.
    pub liveness_bound_ms: u64,
    /// Length of the fault phase (chaos, none).
    pub fault_phase_ms: u64,
    /// Nominal tick.
    pub tick_us: u64,
    /// One-way latency bounds.
    pub latency_us_min: u64,
    /// One-way latency bounds.
    pub latency_us_max: u64,
    /// What runs on the cluster besides elections.
    pub workload: Workload,
    /// Time one fsync takes in the simulated disks (0 = synchronous).
    pub fsync_us: u64,
    /// Clock-rate skew bound in parts per million; `None` = profile default
    /// (5% under chaos, none otherwise).
    pub skew_ppm_max: Option<u64>,
}

impl RunSpec {
    /// A spec with the documented defaults: 1 ms ticks, 1–5 ms latency,
    /// hints on, 5 s liveness bound, 3 s fault phase.
    pub fn new(algorithm: Algorithm, nodes: usize, seed: u64, faults: FaultProfile) -> Self {
        RunSpec {
            algorithm,
            nodes,
            seed,
            faults,
            hint: true,
            trace: false,
            timeline: false,
            liveness_bound_ms: 5_000,
            fault_phase_ms: 3_000,
            tick_us: 1_000,
            latency_us_min: 1_000,
            latency_us_max: 5_000,
            skew_ppm_max: None,
            workload: Workload::None,
            fsync_us: 0,
        }
    }

    /// A KV-workload spec: clients through the Raft log, disks with a
    /// 500 µs fsync that can stall and lose unsynced writes on a crash.
    pub fn kv(nodes: usize, seed: u64, faults: FaultProfile) -> Self {
        RunSpec {
            workload: Workload::Kv,
            fsync_us: 500,
            ..RunSpec::new(Algorithm::Raft, nodes, seed, faults)
        }
    }

    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        let mut command = format!(
            "bellwether sim run --algorithm {} --nodes {} --seed {} --faults {}",
            self.algorithm, self.nodes, self.seed, self.faults
        );
        if self.workload == Workload::Kv {
            command.push_str(" --workload kv --check linearizability");
        }
        if !self.hint {
            command.push_str(" --no-hint");
        }
        if let Some(skew) = self.skew_ppm_max {
            command.push_str(&format!(" --skew-ppm {skew}"));
        }
        if self.fault_phase_ms != 3_000 {
            command.push_str(&format!(" --fault-phase-ms {}", self.fault_phase_ms));
        }
        if self.liveness_bound_ms != 5_000 {
            command.push_str(&format!(" --liveness-bound-ms {}", self.liveness_bound_ms));
        }
        command
    }
}

//! What one simulated run is: algorithm, size, seed and fault profile.

use bellwether_core::raft::RaftConfig;
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
    /// Multi-Paxos with a distinguished proposer and leader leases.
    Paxos,
}

impl Algorithm {
    /// All algorithms, in report order.
    pub const ALL: [Algorithm; 4] = [
        Algorithm::Raft,
        Algorithm::Bully,
        Algorithm::Ring,
        Algorithm::Paxos,
    ];

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Raft => "raft",
            Algorithm::Bully => "bully",
            Algorithm::Ring => "ring",
            Algorithm::Paxos => "paxos",
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
    /// Chaos, and half the restarts come back to a damaged disk: a wiped
    /// log, a log cut short, a record that no longer reads, or a lost
    /// fsync'd write, on at most a minority of members at a time (counted
    /// until each has repaired). Needs a workload (kv or etcd), whose
    /// protocols keep the promise record the restart audits.
    Storage,
    /// Nothing fails: a follower (never the leader) is paused for 100 to
    /// 300 ms every 0.5 to 1.5 s, and latency is jittered from 1 to 25 ms.
    /// Every election after boot is spurious: what a detector that
    /// suspects too soon costs.
    Pauses,
}

impl FaultProfile {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultProfile::None => "none",
            FaultProfile::Crash => "crash",
            FaultProfile::Partition => "partition",
            FaultProfile::Chaos => "chaos",
            FaultProfile::Storage => "storage",
            FaultProfile::Pauses => "pauses",
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
    /// The member driver that production runs (`bellwether-member`), with
    /// the `kv` crate's etcd store behind it: clients put, get and
    /// compare-and-set through leaders and followers (forwarding included);
    /// the history is checked for linearizability (Raft only).
    Etcd,
}

impl Workload {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::None => "none",
            Workload::Kv => "kv",
            Workload::Etcd => "etcd",
        }
    }
}

/// How the KV workload's linearizable reads are confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadMode {
    /// ReadIndex: a quorum answers a heartbeat round per batch of reads.
    ReadIndex,
    /// Leader leases: served at once while the lease holds. Runs with
    /// CheckQuorum and stickiness and without connection-loss hints, and
    /// with clock skew limited to the documented drift bound unless a skew
    /// is given explicitly (see [`lease_skew_ppm_bound`]).
    Lease,
}

impl ReadMode {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadMode::ReadIndex => "readindex",
            ReadMode::Lease => "lease",
        }
    }
}

/// The largest per-node clock-rate skew (ppm) within the drift bound that
/// lease reads document: "safe while no two clocks drift apart by more than
/// `lease_margin_ticks` per `election_ticks_min`". Each clock runs at
/// `1 ± s`, so two clocks differ in rate by up to `(1 + s) / (1 - s) - 1`;
/// keeping that at most `M / E` gives `s <= M / (2E + M)`. With the defaults
/// (M = 15, E = 150) that is 47,619 ppm, just below the chaos profile's
/// 50,000 ppm, whose two extremes drift apart by 10.5% (more than the 10%
/// the lease allows).
pub fn lease_skew_ppm_bound(config: &RaftConfig) -> u64 {
    let (margin, election) = (config.lease_margin_ticks, config.election_ticks_min);
    assert!(margin >= 1 && margin < election, "lease margin in [1, E)");
    margin * 1_000_000 / (2 * election + margin)
}

from_str_by_name!(Workload, [Workload::None, Workload::Kv, Workload::Etcd]);
from_str_by_name!(ReadMode, [ReadMode::ReadIndex, ReadMode::Lease]);
from_str_by_name!(Algorithm, Algorithm::ALL);
from_str_by_name!(
    FaultProfile,
    [
        FaultProfile::None,
        FaultProfile::Crash,
        FaultProfile::Partition,
        FaultProfile::Chaos,
        FaultProfile::Storage,
        FaultProfile::Pauses
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
    /// (5% under chaos, none otherwise; under chaos with lease reads, the
    /// lease's documented drift bound, [`lease_skew_ppm_bound`]).
    pub skew_ppm_max: Option<u64>,
    /// KV workload: how linearizable reads are confirmed.
    pub reads: ReadMode,
    /// KV workload: the leader is periodically asked to remove a voter
    /// (possibly itself), add it back as a learner and promote it once
    /// caught up, keeping at least three voters.
    pub membership_changes: bool,
    /// KV workload: a client abandons an operation after this long and
    /// records it as indeterminate. Short timeouts make clients leave a
    /// deposed leader quickly, so a stale read it serves can be set against
    /// the new leader's writes.
    pub op_timeout_ms: u64,
    /// KV workload: read-only clients besides the five mixed ones (see
    /// `KvConfig::readers`).
    pub readers: usize,
    /// Bully and Ring: the lowest id wins instead of the highest.
    pub lowest_id_wins: bool,
    /// Raft: hand leadership to the next caught-up voter after leading
    /// this long (`RaftConfig::rotate_after_ticks`); 0 never rotates.
    pub rotate_after_ms: u64,
    /// The control for the storage profile: restarts ignore the promise
    /// record, so a member that lost its log comes back as a blank voter.
    pub ignores_promises: bool,
    /// The adaptive detector on (a floor of 3 heartbeats, with a heartbeat
    /// of a tenth of the minimum election or leader timeout, the member's
    /// default ratio), so a silent leader is suspected after a few
    /// heartbeats.
    pub detector: bool,
}

impl Algorithm {
    /// True for the algorithms with a winner rule (Bully and Ring).
    pub fn has_winner_rule(self) -> bool {
        matches!(self, Algorithm::Bully | Algorithm::Ring)
    }

    /// True for the algorithms whose leaders must never overlap (quorum
    /// plus leases): Raft and Paxos.
    pub fn has_quorum(self) -> bool {
        matches!(self, Algorithm::Raft | Algorithm::Paxos)
    }
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
            reads: ReadMode::ReadIndex,
            membership_changes: false,
            op_timeout_ms: 1_000,
            readers: 0,
            lowest_id_wins: false,
            rotate_after_ms: 0,
            ignores_promises: false,
            detector: false,
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

    /// An etcd-workload spec: the member driver on every node, disks with
    /// a 500 µs fsync that can stall and lose unsynced writes on a crash.
    pub fn etcd(nodes: usize, seed: u64, faults: FaultProfile) -> Self {
        RunSpec {
            workload: Workload::Etcd,
            ..RunSpec::kv(nodes, seed, faults)
        }
    }

    /// The KV spec with lease reads: connection-loss hints off, as leases
    /// require (a hinted follower may vote inside the lease).
    pub fn with_lease_reads(self) -> Self {
        RunSpec {
            reads: ReadMode::Lease,
            hint: false,
            ..self
        }
    }

    /// The KV spec with membership changes under way.
    pub fn with_membership_changes(self) -> Self {
        RunSpec {
            membership_changes: true,
            ..self
        }
    }

    /// The workload and its options, for summary headers: empty without a
    /// workload.
    pub fn workload_label(&self) -> String {
        if self.workload == Workload::Etcd {
            return format!(
                " · etcd (member driver, op timeout {} ms)",
                self.op_timeout_ms
            );
        }
        if self.workload != Workload::Kv {
            return String::new();
        }
        let mut label = format!(" · kv (reads {}", self.reads);
        if self.membership_changes {
            label.push_str(", membership changes");
        }
        if self.readers != 0 {
            label.push_str(&format!(", {} readers", self.readers));
        }
        label.push_str(&format!(", op timeout {} ms)", self.op_timeout_ms));
        label
    }

    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        let mut command = format!(
            "bellwether sim run --algorithm {} --nodes {} --seed {} --faults {}",
            self.algorithm, self.nodes, self.seed, self.faults
        );
        if self.workload == Workload::Etcd {
            command.push_str(" --workload etcd --check linearizability");
            if self.op_timeout_ms != 1_000 {
                command.push_str(&format!(" --op-timeout-ms {}", self.op_timeout_ms));
            }
        }
        if self.workload == Workload::Kv {
            command.push_str(" --workload kv --check linearizability");
            if self.reads != ReadMode::ReadIndex {
                command.push_str(&format!(" --reads {}", self.reads));
            }
            if self.membership_changes {
                command.push_str(" --membership-changes");
            }
            if self.op_timeout_ms != 1_000 {
                command.push_str(&format!(" --op-timeout-ms {}", self.op_timeout_ms));
            }
            if self.readers != 0 {
                command.push_str(&format!(" --readers {}", self.readers));
            }
        }
        if self.lowest_id_wins {
            command.push_str(" --winner lowest");
        }
        if self.rotate_after_ms != 0 {
            command.push_str(&format!(" --rotate-after-ms {}", self.rotate_after_ms));
        }
        if !self.hint {
            command.push_str(" --no-hint");
        }
        if self.ignores_promises {
            command.push_str(" --ignore-promises");
        }
        if self.detector {
            command.push_str(" --detector");
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

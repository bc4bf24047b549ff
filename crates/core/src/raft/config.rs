//! Raft election settings, all in ticks, and the rule that checks them.

use crate::types::NodeId;
use std::collections::BTreeMap;

/// Static settings of one Raft node. Every member of a cluster should use the
/// same values; only `priorities` is read per member.
#[derive(Clone, Debug, PartialEq)]
pub struct RaftConfig {
    /// A leader sends a heartbeat to every follower this often.
    pub heartbeat_ticks: u64,
    /// The election timeout is drawn uniformly from
    /// `[election_ticks_min, election_ticks_min + election_jitter_ticks)`
    /// (paper §5.2; `[min, 2 * min)` by default) each time the timer is
    /// reset. It is also the span of leader stickiness and of
    /// CheckQuorum, or with the adaptive detector the detector's floor
    /// (`detector_floor_heartbeats`).
    pub election_ticks_min: u64,
    /// Width of the random part of the election timeout: the timeout is
    /// drawn from `[election_ticks_min, election_ticks_min + jitter)`. The
    /// default, `election_ticks_min`, gives the paper's `[min, 2 * min)`; a
    /// narrower window elects sooner after a silent failure, at a slightly
    /// higher risk of split votes (which PreVote ranking then resolves).
    pub election_jitter_ticks: u64,
    /// PreVote (thesis §9.6): ask before raising the term, so that a node
    /// that cannot win never disturbs the cluster by inflating terms.
    pub pre_vote: bool,
    /// CheckQuorum: a leader that has not heard from a quorum within
    /// `election_ticks_min` steps down, so a partitioned leader stops acting.
    pub check_quorum: bool,
    /// Leader stickiness (thesis §4.2.3): a node that heard from a live leader
    /// within `election_ticks_min` ignores votes and pre-votes for a higher
    /// term, unless they come from a leadership transfer.
    pub leader_stickiness: bool,
    /// After a connection-loss hint about the leader, the follower ranked `r`
    /// (0 = highest priority, then lowest id, among the surviving voters)
    /// starts PreVote `(r + 1) * hint_slot_ticks` later, except rank 0,
    /// which starts at once (a crashed process's connections close
    /// together, so the others have usually heard too). One slot should
    /// cover the spread of hint arrival plus one network hop, so that
    /// later ranks see the first pre-vote before their own slot comes. The
    /// adaptive detector's suspicions use the slots for every rank. 0
    /// disables the hint.
    pub hint_slot_ticks: u64,
    /// The adaptive detector (`crate::adaptive_detector`): a follower that
    /// hears nothing from its leader for longer than the leader's learned
    /// pattern makes likely treats that like a connection-loss hint (a
    /// ranked pre-vote, and no more stickiness for that leader), instead of
    /// waiting out the election timeout. Its floor is this many heartbeats;
    /// its ceiling is `election_ticks_min`. 0 turns it off: only the fixed
    /// timeout and the hint.
    pub detector_floor_heartbeats: u64,
    /// Per-member priority; a member not listed has priority 0. A leader
    /// hands leadership to a caught-up, steadily reachable voter of strictly
    /// higher priority (see `leader.rs` for the exact rule).
    pub priorities: BTreeMap<NodeId, u32>,
    /// Most entries in one AppendEntries message.
    pub append_entries_max: usize,
    /// About this many payload bytes per AppendEntries message at most.
    pub append_bytes_max: usize,
    /// AppendEntries messages in flight per follower while replicating
    /// (pipelining); a probing follower gets one at a time.
    pub inflight_appends_max: usize,
    /// Proposals are refused with `Busy` while this many entries are
    /// appended but not yet committed: back-pressure instead of an unbounded
    /// log.
    pub uncommitted_entries_max: usize,
    /// Linearizable reads waiting for confirmation, at most.
    pub pending_reads_max: usize,
    /// Committed entries handed to the application per `ready()`, at most.
    pub apply_batch_entries_max: usize,
    /// ... and about this many bytes of them (always at least one entry):
    /// a member catching up on large entries (a restart replaying its log,
    /// 100-put txns of 30 KB each) applies a `ready()` in tens of
    /// milliseconds rather than in seconds, and its runtime can answer its
    /// leader between two.
    pub apply_batch_bytes_max: usize,
    /// Snapshot data per InstallSnapshot message.
    pub snapshot_chunk_bytes_max: usize,
    /// Largest snapshot a follower accepts.
    pub snapshot_bytes_max: u64,
    /// Serve linearizable reads from a leader lease instead of a ReadIndex
    /// round. Valid only with CheckQuorum and stickiness and without the
    /// connection-loss hint (which lets followers vote early). Safe while
    /// no two clocks drift apart by more than `lease_margin_ticks` per
    /// `election_ticks_min`.
    pub lease_reads: bool,
    /// The lease ends this many ticks before the followers' stickiness does.
    pub lease_margin_ticks: u64,
    /// Rotation: after leading this long, a leader hands leadership to the
    /// next caught-up voter in id order, so that leader time spreads over
    /// the members ("all nodes should have a reasonable chance of becoming
    /// the leader"). 0 (the default) never rotates. Not with priorities,
    /// which pull leadership to one member.
    pub rotate_after_ticks: u64,
}

impl Default for RaftConfig {
    /// Defaults sized for a 1 ms tick and a network whose one-way latency is
    /// at most 5 ms: heartbeat 50 ms, election timeout in [150, 300) ms.
    fn default() -> Self {
        RaftConfig {
            heartbeat_ticks: 50,
            election_ticks_min: 150,
            election_jitter_ticks: 150,
            pre_vote: true,
            check_quorum: true,
            leader_stickiness: true,
            hint_slot_ticks: 6,
            detector_floor_heartbeats: 0,
            priorities: BTreeMap::new(),
            append_entries_max: 4_096,
            append_bytes_max: 1 << 20,
            inflight_appends_max: 64,
            uncommitted_entries_max: 65_536,
            pending_reads_max: 4_096,
            apply_batch_entries_max: 4_096,
            apply_batch_bytes_max: 4 << 20,
            snapshot_chunk_bytes_max: 64 << 10,
            snapshot_bytes_max: 1 << 30,
            lease_reads: false,
            lease_margin_ticks: 15,
            rotate_after_ticks: 0,
        }
    }
}

/// Why a [`RaftConfig`] was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid raft configuration: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

impl RaftConfig {
    /// Checks the relations the algorithm relies on for liveness.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.heartbeat_ticks == 0 {
            return Err(ConfigError("heartbeat_ticks must be at least 1".into()));
        }
        // Followers must hear several heartbeats per election timeout, or a
        // healthy leader is deposed by ordinary jitter.
        if self.election_ticks_min < 2 * self.heartbeat_ticks {
            return Err(ConfigError(format!(
                "election_ticks_min ({}) must be at least twice heartbeat_ticks ({})",
                self.election_ticks_min, self.heartbeat_ticks
            )));
        }
        if self.election_jitter_ticks == 0 || self.election_jitter_ticks > self.election_ticks_min {
            return Err(ConfigError(format!(
                "election_jitter_ticks ({}) must be in [1, election_ticks_min ({})]",
                self.election_jitter_ticks, self.election_ticks_min
            )));
        }
        if self.hint_slot_ticks >= self.election_ticks_min {
            return Err(ConfigError(format!(
                "hint_slot_ticks ({}) must be below election_ticks_min ({})",
                self.hint_slot_ticks, self.election_ticks_min
            )));
        }
        if self.detector_floor_heartbeats != 0
            && self.detector_floor_heartbeats * self.heartbeat_ticks > self.election_ticks_min
        {
            return Err(ConfigError(format!(
                "the detector's floor, {} heartbeats of {} ticks, must not exceed election_ticks_min ({})",
                self.detector_floor_heartbeats, self.heartbeat_ticks, self.election_ticks_min
            )));
        }
        let positive = [
            ("append_entries_max", self.append_entries_max),
            ("append_bytes_max", self.append_bytes_max),
            ("inflight_appends_max", self.inflight_appends_max),
            ("uncommitted_entries_max", self.uncommitted_entries_max),
            ("pending_reads_max", self.pending_reads_max),
            ("apply_batch_entries_max", self.apply_batch_entries_max),
            ("apply_batch_bytes_max", self.apply_batch_bytes_max),
            ("snapshot_chunk_bytes_max", self.snapshot_chunk_bytes_max),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError(format!("{name} must be at least 1")));
        }
        if self.rotate_after_ticks != 0 {
            if !self.priorities.is_empty() {
                return Err(ConfigError(
                    "rotate_after_ticks and priorities pull leadership different ways; use one"
                        .into(),
                ));
            }
            if self.rotate_after_ticks < self.election_ticks_min {
                return Err(ConfigError(format!(
                    "rotate_after_ticks ({}) must be at least election_ticks_min ({})",
                    self.rotate_after_ticks, self.election_ticks_min
                )));
            }
        }
        if self.lease_reads {
            if !self.check_quorum || !self.leader_stickiness {
                return Err(ConfigError(
                    "lease_reads needs check_quorum and leader_stickiness".into(),
                ));
            }
            if self.hint_slot_ticks != 0 {
                return Err(ConfigError(
                    "lease_reads needs hint_slot_ticks = 0: a hinted follower may vote inside the lease".into(),
                ));
            }
            if self.detector_floor_heartbeats != 0 {
                return Err(ConfigError(
                    "lease_reads needs detector_floor_heartbeats = 0: a follower that suspects its leader early may vote inside the lease".into(),
                ));
            }
            if self.lease_margin_ticks == 0 || self.lease_margin_ticks >= self.election_ticks_min {
                return Err(ConfigError(
                    "lease_margin_ticks must be in [1, election_ticks_min)".into(),
                ));
            }
        }
        Ok(())
    }

    /// The adaptive detector's bounds, when it is on.
    pub fn detector_bounds(&self) -> Option<crate::adaptive_detector::DetectorBounds> {
        crate::adaptive_detector::DetectorBounds::of(
            self.detector_floor_heartbeats,
            self.heartbeat_ticks,
            self.election_ticks_min,
        )
    }

    /// Priority of `node`; 0 when unlisted.
    pub fn priority(&self, node: NodeId) -> u32 {
        self.priorities.get(&node).copied().unwrap_or(0)
    }
}

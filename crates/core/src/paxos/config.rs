//! Multi-Paxos election settings, in ticks, and the rules that check them.

use super::ballot::PRIORITY_MAX;
use crate::adaptive_detector::DetectorBounds;
use crate::types::NodeId;
use std::collections::BTreeMap;
use std::fmt;

/// Static settings of one Paxos node. Every member should use the same
/// values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaxosConfig {
    /// The distinguished proposer sends an `Accept` (a heartbeat, carrying
    /// any entries a follower lacks) to every acceptor this often.
    pub heartbeat_ticks: u64,
    /// A follower that hears no leader for a timeout drawn from
    /// `[election_ticks_min, election_ticks_min + election_jitter_ticks)`
    /// starts phase 1. It is also the length of an acceptor's lease promise.
    pub election_ticks_min: u64,
    /// Width of the random part of the election timeout.
    pub election_jitter_ticks: u64,
    /// After promising another proposer's ballot, a node waits at least
    /// this long before its own election timer may start phase 1: enough
    /// for a proposer that reaches a quorum to finish both phases (two
    /// round trips). The timer is not restarted, so rivals that can never
    /// win cannot keep a node that could from running.
    pub promise_grace_ticks: u64,
    /// Leader leases: an acceptor that accepted the leader's heartbeat
    /// ignores other proposers' `Prepare` for `election_ticks_min`, and the
    /// leader steps down `lease_margin_ticks` before the last such promise
    /// a quorum gave can end. Two leaders then never act at once while
    /// clocks drift apart by less than the margin per election timeout.
    /// Without leases this is classic Multi-Paxos: a deposed leader acts
    /// until it hears of a higher ballot.
    pub leases: bool,
    /// How much earlier than its acceptors' promises a leader's lease ends.
    pub lease_margin_ticks: u64,
    /// After a connection-loss hint about the leader, the follower ranked
    /// `r` among the other members (0 = highest priority, then highest id,
    /// the best ballot of a round) starts phase 1 `(r + 1) * hint_slot_ticks`
    /// later. 0 disables the hint.
    pub hint_slot_ticks: u64,
    /// The adaptive detector (`crate::adaptive_detector`): a follower whose
    /// leader is silent for longer than its learned pattern makes likely
    /// starts phase 1 at its rank slot, as after a hint. Its floor is this
    /// many heartbeats; lease promises then last one floor instead of
    /// `election_ticks_min` (and a leader's lease with them), so a follower
    /// never suspects inside a promise. 0 turns it off.
    pub detector_floor_heartbeats: u64,
    /// Per-member priority (at most [`PRIORITY_MAX`]); unlisted members
    /// have 0.
    pub priorities: BTreeMap<NodeId, u32>,
}

impl Default for PaxosConfig {
    /// Sized like Raft's defaults, for 1 ms ticks and at most 5 ms one-way
    /// latency: heartbeat 50 ms, election timeout in [150, 300) ms, a 10%
    /// lease margin.
    fn default() -> Self {
        PaxosConfig {
            heartbeat_ticks: 50,
            election_ticks_min: 150,
            election_jitter_ticks: 150,
            promise_grace_ticks: 30,
            leases: true,
            lease_margin_ticks: 15,
            hint_slot_ticks: 6,
            detector_floor_heartbeats: 0,
            priorities: BTreeMap::new(),
        }
    }
}

/// Why a [`PaxosConfig`] was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid paxos configuration: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

impl PaxosConfig {
    /// Checks the relations the algorithm relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |text: String| Err(ConfigError(text));
        if self.heartbeat_ticks == 0 {
            return fail("heartbeat_ticks must be at least 1".into());
        }
        if self.election_ticks_min < 2 * self.heartbeat_ticks {
            return fail(format!(
                "election_ticks_min ({}) must be at least twice heartbeat_ticks ({})",
                self.election_ticks_min, self.heartbeat_ticks
            ));
        }
        if self.election_jitter_ticks == 0 || self.election_jitter_ticks > self.election_ticks_min {
            return fail(format!(
                "election_jitter_ticks ({}) must be in [1, election_ticks_min]",
                self.election_jitter_ticks
            ));
        }
        if self.promise_grace_ticks >= self.election_ticks_min {
            return fail("promise_grace_ticks must be below election_ticks_min".into());
        }
        if self.hint_slot_ticks >= self.election_ticks_min {
            return fail("hint_slot_ticks must be below election_ticks_min".into());
        }
        if self.leases
            && (self.lease_margin_ticks == 0 || self.lease_margin_ticks >= self.election_ticks_min)
        {
            return fail("lease_margin_ticks must be in [1, election_ticks_min)".into());
        }
        if self
            .detector_floor_heartbeats
            .saturating_mul(self.heartbeat_ticks)
            > self.election_ticks_min
        {
            return fail(format!(
                "the detector's floor, {} heartbeats of {} ticks, must not exceed election_ticks_min ({})",
                self.detector_floor_heartbeats, self.heartbeat_ticks, self.election_ticks_min
            ));
        }
        if let Some((node, priority)) = self.priorities.iter().find(|(_, p)| **p > PRIORITY_MAX) {
            return fail(format!(
                "priority {priority} of {node} is above {PRIORITY_MAX}"
            ));
        }
        Ok(())
    }

    /// The adaptive detector's bounds, when it is on.
    pub fn detector_bounds(&self) -> Option<DetectorBounds> {
        DetectorBounds::of(
            self.detector_floor_heartbeats,
            self.heartbeat_ticks,
            self.election_ticks_min,
        )
    }

    /// How long an acceptor's lease promise lasts: `election_ticks_min`, or
    /// with the detector its floor (a follower may suspect that soon).
    pub fn promise_ticks(&self) -> u64 {
        self.detector_bounds()
            .map_or(self.election_ticks_min, |b| b.floor_ticks)
    }

    /// How much earlier than the promises a leader's lease ends:
    /// `lease_margin_ticks`, scaled to the promise's length (rounded up).
    pub fn promise_margin_ticks(&self) -> u64 {
        (self.lease_margin_ticks * self.promise_ticks())
            .div_ceil(self.election_ticks_min)
            .max(1)
    }

    /// Priority of `node`; 0 when unlisted.
    pub fn priority(&self, node: NodeId) -> u32 {
        self.priorities.get(&node).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        assert_eq!(PaxosConfig::default().validate(), Ok(()));
        let slow = PaxosConfig {
            heartbeat_ticks: 100,
            ..PaxosConfig::default()
        };
        assert!(slow.validate().unwrap_err().0.contains("heartbeat_ticks"));
        let margin = PaxosConfig {
            lease_margin_ticks: 150,
            ..PaxosConfig::default()
        };
        assert!(margin.validate().unwrap_err().0.contains("lease_margin"));
        let mut priorities = BTreeMap::new();
        priorities.insert(NodeId(2), 300);
        let priority = PaxosConfig {
            priorities,
            ..PaxosConfig::default()
        };
        assert!(priority.validate().unwrap_err().0.contains("priority 300"));
    }
}

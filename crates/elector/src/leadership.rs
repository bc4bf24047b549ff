//! What an application watches: who leads, with which fencing token, and
//! for how long this node may still act on its own leadership.

use std::time::Instant;

/// One node's view of its group's leadership, as published on the
/// elector's watch channel whenever any field changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leadership {
    /// This node's id.
    pub id: u64,
    /// The leader this node follows, itself when it leads, or `None` while
    /// there is none (an election is under way).
    pub leader: Option<u64>,
    /// Raft's term, or Bully's and Ring's epoch: the fencing token. It only
    /// grows, across restarts too (it is persisted before use). Under Raft
    /// it names at most one leader; under Bully and Ring two partitioned
    /// leaders can share one, which is why they are weaker.
    pub token: u64,
    /// This node's role: `"leader"`, `"candidate"`, `"pre-candidate"` or
    /// `"follower"`.
    pub role: &'static str,
    /// Raft with leases on, while this node leads: until when no other
    /// node can have been elected (one minimum election timeout, minus the
    /// drift margin, after the newest heartbeat a majority acknowledged).
    /// `None` otherwise; with leases on, a leader without a deadline must
    /// not act.
    pub valid_until: Option<Instant>,
    /// True when leases are on, so that [`Leadership::may_act`] asks for a
    /// deadline.
    pub leases: bool,
}

impl Leadership {
    /// The state before the first election: nobody leads.
    pub fn initial(id: u64, token: u64, leases: bool) -> Leadership {
        Leadership {
            id,
            leader: None,
            token,
            role: "follower",
            valid_until: None,
            leases,
        }
    }

    /// True while this node leads.
    pub fn is_leader(&self) -> bool {
        self.leader == Some(self.id) && self.role == "leader"
    }

    /// True when this node leads and, with leases on, its lease still runs
    /// at `now`. An application should check this right before each side
    /// effect, and attach [`Leadership::token`] to it where it can.
    pub fn may_act(&self, now: Instant) -> bool {
        self.is_leader() && (!self.leases || self.valid_until.is_some_and(|end| now < end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_a_leader_with_a_running_lease_may_act() {
        let now = Instant::now();
        let mut view = Leadership::initial(2, 7, true);
        assert!(!view.may_act(now));
        view.leader = Some(2);
        view.role = "leader";
        assert!(!view.may_act(now), "leases on and no deadline");
        view.valid_until = Some(now + Duration::from_millis(100));
        assert!(view.may_act(now));
        assert!(!view.may_act(now + Duration::from_millis(100)));
        view.leases = false;
        view.valid_until = None;
        assert!(view.may_act(now));
        view.leader = Some(3);
        assert!(!view.may_act(now));
    }
}

//! Membership changes under faults (thesis §4.1–4.3): while the clients
//! run, the newest acting leader is periodically asked for the next step of
//! a random walk over configurations:
//!
//! - a learner is promoted (once caught up; the core refuses it before) or,
//!   now and then, removed again;
//! - a node outside the configuration is added back as a learner;
//! - a voter is removed, sometimes the leader itself, while more than
//!   [`VOTERS_MIN`] remain.
//!
//! Removed nodes keep running with their disks, exposed to the same faults
//! as everyone, so that a node that missed its own removal and still
//! campaigns is part of every run. The core's refusals (a change still
//! pending, a new leader that has not committed in its term, a learner that
//! is behind) are counted, not retried at once: the next step comes at the
//! next period.

use super::app::KvApp;
use super::clients::Timer;
use super::RaftLike;
use crate::event::NodeIndex;
use crate::host::Host;
use crate::world::World;
use bellwether_core::raft::MembershipChange;
use bellwether_core::NodeId;

/// Never fewer voters than this: removals stop at three, so that a single
/// crash still leaves a quorum.
pub const VOTERS_MIN: usize = 3;

/// Time between two membership steps, drawn from `[min, max]`: several
/// changes per election timeout at the short end, so that changes overlap
/// with crashes, partitions and elections.
pub const MEMBERSHIP_PERIOD_US_MIN: u64 = 20_000;
/// See [`MEMBERSHIP_PERIOD_US_MIN`].
pub const MEMBERSHIP_PERIOD_US_MAX: u64 = 200_000;

/// Chance that a step removes the leader itself rather than a random
/// voter (which may also be the leader).
const LEADER_REMOVAL_CHANCE: f64 = 0.3;

/// Chance that a learner is removed instead of promoted.
const LEARNER_REMOVAL_CHANCE: f64 = 0.1;

impl KvApp {
    /// Schedules the next membership step.
    pub(super) fn schedule_membership_step<P: RaftLike>(world: &mut World<P, KvApp>) {
        let delay = world
            .app
            .clients
            .rng
            .range(MEMBERSHIP_PERIOD_US_MIN, MEMBERSHIP_PERIOD_US_MAX + 1);
        let at = world.now_us() + delay;
        world.schedule_app_timer(at, Timer::Membership.token());
    }

    /// Asks the newest acting leader for the next change.
    pub(super) fn on_membership_step<P: RaftLike>(world: &mut World<P, KvApp>) {
        if world.app.clients.stopped {
            return;
        }
        Self::schedule_membership_step(world);
        // Several nodes may act as leader during a partition; the one with
        // the highest term is the one that can still commit.
        let Some((leader_id, _)) = world.acting_leaders().into_iter().max_by_key(|(_, t)| *t)
        else {
            return;
        };
        let leader = Host::<P>::index_of(leader_id);
        let Some(change) = Self::next_change(world, leader) else {
            return;
        };
        let raft = world.node_mut(leader).expect("acting").raft_mut();
        match raft.propose_membership(change) {
            Ok(_) => {
                world.app.stats.membership_changes += 1;
                if change == MembershipChange::Remove(leader_id) {
                    world.app.stats.leader_removals += 1;
                }
            }
            Err(_) => world.app.stats.membership_refused += 1,
        }
        world.flush(leader);
    }

    /// The next step of the walk, from the leader's configuration.
    fn next_change<P: RaftLike>(
        world: &mut World<P, KvApp>,
        leader: NodeIndex,
    ) -> Option<MembershipChange> {
        let cluster = world.node(leader)?.raft().cluster().clone();
        let leader_id = Host::<P>::id_of(leader);
        let outsiders: Vec<NodeId> = (0..world.app.nodes)
            .map(Host::<P>::id_of)
            .filter(|id| !cluster.voters.contains(id) && !cluster.learners.contains(id))
            .collect();
        let rng = &mut world.app.clients.rng;
        if let Some(learner) = cluster.learners.iter().next().copied() {
            return Some(if rng.chance(LEARNER_REMOVAL_CHANCE) {
                MembershipChange::Remove(learner)
            } else {
                MembershipChange::PromoteLearner(learner)
            });
        }
        let may_remove = cluster.voters.len() > VOTERS_MIN;
        if !outsiders.is_empty() && (!may_remove || rng.chance(0.5)) {
            let pick = outsiders[rng.range(0, outsiders.len() as u64) as usize];
            return Some(MembershipChange::AddLearner(pick));
        }
        if !may_remove {
            return None;
        }
        if rng.chance(LEADER_REMOVAL_CHANCE) {
            return Some(MembershipChange::Remove(leader_id));
        }
        let voters: Vec<NodeId> = cluster.voters.iter().copied().collect();
        let pick = voters[rng.range(0, voters.len() as u64) as usize];
        Some(MembershipChange::Remove(pick))
    }
}

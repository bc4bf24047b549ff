//! Membership changes, one server at a time (thesis §4.1–4.3): learners
//! catch up without voting, are then promoted, and any member (the leader
//! included) can be removed.
//!
//! Rules enforced here:
//! - one change at a time: a new one waits until the previous is committed;
//! - a new leader must first commit an entry of its own term (its no-op)
//!   before any change, which closes the single-server-change bug Ongaro
//!   reported on raft-dev in 2015;
//! - a learner is promoted only once it has matched the commit index.

use super::entry::{ClusterConfig, Entry, Payload};
use super::node::RaftNode;
use super::progress::Progress;
use super::proposal::ProposeError;
use crate::protocol::Role;
use crate::types::{LogIndex, NodeId};

/// One step of a membership change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MembershipChange {
    /// Start replicating to a new non-voting member.
    AddLearner(NodeId),
    /// Make a caught-up learner a voter.
    PromoteLearner(NodeId),
    /// Remove a voter or learner (possibly the leader itself).
    Remove(NodeId),
}

impl RaftNode {
    /// A member that joins a running cluster whose voters are `voters`:
    /// until the leader's log (or snapshot) tells it the configuration, it
    /// knows itself as a learner of theirs, so it never campaigns. Once it
    /// has the entry that added it, that configuration rules, as on every
    /// member.
    pub fn joining(
        config: &super::RaftConfig,
        id: NodeId,
        voters: &[NodeId],
        durable: super::RaftDurable,
        rng: crate::Rng,
    ) -> RaftNode {
        use crate::protocol::Protocol;
        assert!(
            !voters.is_empty() && !voters.contains(&id),
            "{id} joins a cluster of other voters, not {voters:?}"
        );
        let mut node = RaftNode::new(config, id, &[id], durable, rng);
        node.bootstrap = ClusterConfig {
            voters: voters.iter().copied().collect(),
            learners: [id].into_iter().collect(),
        };
        node.refresh_cluster_from_log();
        node
    }

    /// Proposes a membership change. It takes effect on each member as soon
    /// as the entry is in its log; the returned index is that entry's.
    pub fn propose_membership(
        &mut self,
        change: MembershipChange,
    ) -> Result<LogIndex, ProposeError> {
        self.check_can_propose()?;
        if self.cluster_index > self.commit {
            return Err(ProposeError::ConfigChangePending);
        }
        if self.log.term(self.commit) != Some(self.term) {
            return Err(ProposeError::NotReady);
        }
        let mut next = self.cluster.clone();
        match change {
            MembershipChange::AddLearner(id) => {
                if next.voters.contains(&id) || !next.learners.insert(id) {
                    return Err(ProposeError::AlreadyMember(id));
                }
            }
            MembershipChange::PromoteLearner(id) => {
                if !next.learners.contains(&id) {
                    return Err(ProposeError::UnknownMember(id));
                }
                let matched = self
                    .progress
                    .get(&id)
                    .map_or(LogIndex(0), |p| p.match_index);
                if matched < self.commit {
                    return Err(ProposeError::LearnerBehind {
                        id,
                        matched,
                        commit: self.commit,
                    });
                }
                next.learners.remove(&id);
                next.voters.insert(id);
            }
            MembershipChange::Remove(id) => {
                if !next.voters.remove(&id) && !next.learners.remove(&id) {
                    return Err(ProposeError::UnknownMember(id));
                }
                if next.voters.is_empty() {
                    return Err(ProposeError::LastVoter);
                }
            }
        }
        let index = self.log.last_index().next();
        self.log.append(Entry {
            term: self.term,
            index,
            payload: Payload::Membership(next.clone()),
        });
        self.set_cluster(next, index);
        self.replication_pending = true;
        self.maybe_commit();
        Ok(index)
    }

    /// Installs `config` as the configuration in force, set by the entry at
    /// `index`, and (on a leader) starts or stops tracking members.
    pub(super) fn set_cluster(&mut self, config: ClusterConfig, index: LogIndex) {
        assert!(!config.voters.is_empty(), "a cluster always has a voter");
        self.cluster = config;
        self.cluster_index = index;
        if self.role != Role::Leader {
            return;
        }
        // A smaller quorum may already confirm reads that were waiting.
        self.release_confirmed_reads();
        let (now, next) = (self.now_tick, self.log.last_index().next());
        let members: Vec<NodeId> = self.replicas();
        self.progress.retain(|id, _| members.contains(id));
        for member in members {
            self.progress
                .entry(member)
                .or_insert_with(|| Progress::new(now, next));
        }
    }

    /// Re-reads the configuration from the log after entries were appended
    /// or truncated.
    pub(super) fn refresh_cluster_from_log(&mut self) {
        let base = self
            .snapshot
            .as_ref()
            .map_or(self.bootstrap.clone(), |s| s.meta.config.clone());
        let (config, index) = self.log.latest_config(&base);
        self.set_cluster(config, index);
    }

    /// The configuration in force at `index` (at or after the snapshot).
    pub(super) fn config_at(&self, index: LogIndex) -> ClusterConfig {
        if self.cluster_index <= index {
            return self.cluster.clone();
        }
        let mut at = index;
        while at > self.log.snapshot_index() {
            if let Some(Entry {
                payload: Payload::Membership(config),
                ..
            }) = self.log.entry(at)
            {
                return config.clone();
            }
            at = LogIndex(at.0 - 1);
        }
        self.snapshot
            .as_ref()
            .map_or(self.bootstrap.clone(), |s| s.meta.config.clone())
    }
}

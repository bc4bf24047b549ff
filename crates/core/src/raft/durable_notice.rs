//! Commitment learned by a follower from the leader's disk, one message
//! sooner than from the leader's commit index.
//!
//! An entry of the current term is committed once a majority of voters hold
//! it on disk (§5.4.2). In a cluster of two or three voters, the leader and
//! any one follower are such a majority. So once the leader says "my log is
//! on my disk up to `index`" (a [`RaftMessage::LeaderDurable`], sent as soon
//! as its fsync returns), a follower whose own disk holds the same entries
//! knows they are committed without waiting for its acknowledgement to
//! reach the leader and the leader's commit index to come back. A client
//! write forwarded through that follower, which the follower answers once
//! it applies the entry, saves those two trips; the leader's own commit
//! and its clients are unchanged.
//!
//! The follower deduces commitment only when all of these hold:
//!
//! - the notice is from the leader of its current term;
//! - the entry at the deduced index is of that term, so by Log Matching the
//!   follower's log equals the leader's up to it;
//! - the follower's own disk holds it: the node handed it to the runtime
//!   in an earlier `ready()`. A runtime may still be syncing that `Ready`
//!   when the notice arrives (the simulator's disks are asynchronous), but
//!   the commit can only act through a later `Ready`'s output, which a
//!   runtime carries out after every earlier `Ready` is persisted (see
//!   [`crate::protocol`]);
//! - both use the same configuration, committed on the leader and at or
//!   below the deduced index, in which the two of them form a quorum.
//!
//! One more rule keeps reads linearizable: a follower may now acknowledge a
//! write that the leader has not yet counted as committed, so a ReadIndex
//! read on the leader waits for at least the highest index it announced
//! durable, not only for its commit index (`reads.rs`).

use super::message::RaftMessage;
use super::node::RaftNode;
use crate::protocol::Role;
use crate::types::{LogIndex, NodeId};

impl RaftNode {
    /// The last entry handed to the runtime by an earlier `ready()`: on disk
    /// before any later `Ready` is carried out.
    pub(super) fn durable_last(&self) -> LogIndex {
        self.log.durable_last_index()
    }

    /// True when this node and `other` are a quorum of the configuration.
    fn pair_is_quorum(&self, other: NodeId) -> bool {
        let voters = &self.cluster.voters;
        self.quorum() <= 2 && voters.contains(&self.id) && voters.contains(&other)
    }

    /// Leader: the index to announce durable now, if a follower could
    /// commit more with it.
    fn durable_to_announce(&self) -> Option<LogIndex> {
        if self.role != Role::Leader
            || self.cluster_index > self.commit
            || self.quorum() > 2
            || !self.is_voter()
        {
            return None;
        }
        let durable = self.durable_last();
        let news = durable > self.commit && durable > self.announced_durable;
        (news && self.log.term(durable) == Some(self.term)).then_some(durable)
    }

    /// Leader, at `ready()`: tells every other voter how far its log is on
    /// disk, when that lets one commit more than it knows. The message can
    /// leave before this `Ready` is persisted: it covers only entries of
    /// earlier ones.
    pub(super) fn send_durable_notices(&mut self) {
        let Some(index) = self.durable_to_announce() else {
            return;
        };
        self.announced_durable = index;
        self.announced_config_index = self.cluster_index;
        let notice = RaftMessage::LeaderDurable {
            term: self.term,
            index,
            config_index: self.cluster_index,
        };
        let peers: Vec<NodeId> = self.peers().collect();
        for peer in peers {
            self.send(peer, notice.clone());
        }
    }

    /// Follower: the leader of our term has its log on disk up to `index`,
    /// with its committed configuration at `config_index`.
    pub(super) fn handle_leader_durable(
        &mut self,
        from: NodeId,
        index: LogIndex,
        config_index: LogIndex,
    ) {
        self.note_leader(from);
        // Every notice was true when sent; a reordered older one says less.
        if index >= self.leader_durable.0 {
            self.leader_durable = (index, config_index);
        }
        self.commit_durable();
    }

    /// Follower: the index it can commit from the leader's last notice and
    /// its own disk, if that is more than it has committed.
    pub(super) fn deducible_commit(&self) -> Option<LogIndex> {
        let leader = self.leader?;
        let (announced, config_index) = self.leader_durable;
        let candidate = announced.min(self.durable_last());
        let usable = self.role == Role::Follower
            && candidate > self.commit
            && self.log.term(candidate) == Some(self.term)
            && self.cluster_index == config_index
            && config_index <= candidate
            && self.pair_is_quorum(leader);
        usable.then_some(candidate)
    }

    /// Follower: commits what the leader's notice and its own disk prove.
    pub(super) fn commit_durable(&mut self) {
        if let Some(index) = self.deducible_commit() {
            self.advance_commit(index);
        }
    }

    /// Leader: true when `peer`, holding the log up to `commit`, learns
    /// that `commit` is committed from the durable notices already sent to
    /// it, so a commit notice would tell it nothing. The connection is
    /// FIFO, so those notices arrive first, and the follower's deduction
    /// ([`RaftNode::deducible_commit`]) holds: the notice covers `commit`,
    /// names the configuration both still use, and the two are a quorum of
    /// it. Should a notice be lost anyway, the next heartbeat carries the
    /// commit index: only the follower's latency depends on this.
    pub(super) fn announced_covers(&self, peer: NodeId, commit: LogIndex) -> bool {
        self.role == Role::Leader
            && self.quorum() <= 2
            && self.is_voter()
            && self.cluster.voters.contains(&peer)
            && self.announced_durable >= commit
            && self.announced_config_index == self.cluster_index
            && self.cluster_index <= commit
    }

    /// Leader: announcing has something to tell a follower.
    pub(super) fn durable_notice_due(&self) -> bool {
        self.durable_to_announce().is_some()
    }
}

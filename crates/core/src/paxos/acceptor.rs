//! The acceptor (Lamport, "Paxos Made Simple", §2.2–2.3), with the lease
//! promise that keeps two leaders from acting at once.
//!
//! - `Prepare(b)`: if `b` is above every promise, promise it and return the
//!   entries accepted from the asked slot on; otherwise `Reject`. While a
//!   lease promise to another node holds, the `Prepare` is ignored.
//! - `Accept(b, …)`: if `b` is at least the promise, accept the values,
//!   follow the sender and promise it the lease; otherwise `Reject`.

use super::ballot::Ballot;
use super::message::{Entry, PaxosMessage};
use super::node::PaxosNode;
use super::state::State;
use crate::protocol::Role;
use crate::types::NodeId;

impl PaxosNode {
    /// Phase 1b.
    pub(crate) fn on_prepare(&mut self, from: NodeId, ballot: Ballot, from_slot: u64) {
        if ballot.node != from || self.lease_forbids(from) {
            return;
        }
        if self.state.role() == Role::Leader && self.config.leases {
            // Its own lease: the leader is an acceptor that heard itself.
            return;
        }
        if ballot < self.promised {
            let refusal = PaxosMessage::Reject {
                ballot,
                promised: self.promised,
            };
            self.outbox.push(from, refusal);
            return;
        }
        if ballot > self.promised {
            self.promise(ballot);
            self.stand_aside();
        }
        let entries: Vec<(u64, Entry)> = self
            .log
            .range(from_slot.max(1)..)
            .map(|(slot, entry)| (*slot, *entry))
            .collect();
        self.outbox
            .push(from, PaxosMessage::Promise { ballot, entries });
    }

    /// After promising a higher ballot: this node's own proposal, if any,
    /// is over, and it waits to hear the winner. Its election timer is not
    /// restarted: a node that restarted it on every promise would never run
    /// for office while rivals that cannot reach a quorum kept asking it
    /// (OmniPaxos's quorum-loss livelock). It only leaves the new proposer
    /// `promise_grace_ticks` to finish, so that two timers expiring close
    /// together do not duel. A hinted campaign stops: a better-ranked node
    /// is already running.
    pub(crate) fn stand_aside(&mut self) {
        let grace_end = self.now_tick + self.config.promise_grace_ticks;
        let deadline_tick = match self.state {
            State::Follower { deadline_tick, .. } if !self.hint_campaign => {
                deadline_tick.max(grace_end)
            }
            State::Preparing { deadline_tick, .. } => deadline_tick.max(grace_end),
            State::Proposing(ref p) if !p.serving => p.deadline_tick.max(grace_end),
            _ => self.election_deadline(),
        };
        self.hint_campaign = false;
        self.state = State::Follower {
            leader: None,
            deadline_tick,
        };
    }

    /// Phase 2b, and the leader's heartbeat.
    pub(crate) fn on_accept(
        &mut self,
        from: NodeId,
        ballot: Ballot,
        first_slot: u64,
        values: Vec<u64>,
        commit: u64,
        sent_tick: u64,
    ) {
        if ballot.node != from {
            return;
        }
        if ballot < self.promised {
            self.outbox.push(
                from,
                PaxosMessage::Reject {
                    ballot,
                    promised: self.promised,
                },
            );
            // A leader is alive; it learns of the higher promise from this
            // answer and starts a new ballot. Starting one of our own would
            // only duel with it.
            if self.state.role() != Role::Leader {
                self.follow(None);
            }
            return;
        }
        assert!(first_slot >= 1, "step drops malformed Accepts");
        self.promise(ballot);
        // Whatever this node proposed, a ballot at least as high is now
        // being accepted: it follows that ballot's leader.
        self.follow(Some(from));
        self.grant_lease(from);
        for (offset, value) in values.iter().enumerate() {
            self.accept(first_slot + offset as u64, ballot, *value);
        }
        let through_slot = first_slot + values.len() as u64 - 1;
        self.learn_chosen(ballot, commit);
        self.outbox.push(
            from,
            PaxosMessage::Accepted {
                ballot,
                through_slot,
                sent_tick,
            },
        );
    }

    /// A follower knows a slot is chosen when the leader says it is and this
    /// node holds that slot's entry from the leader's ballot (one ballot
    /// proposes one value per slot). It learns in order, so it stops at the
    /// first slot it cannot vouch for.
    fn learn_chosen(&mut self, ballot: Ballot, leader_commit: u64) {
        let mut chosen = self.commit;
        while chosen < leader_commit
            && self
                .log
                .get(&(chosen + 1))
                .is_some_and(|entry| entry.ballot == ballot)
        {
            chosen += 1;
        }
        self.advance_commit(chosen);
    }
}

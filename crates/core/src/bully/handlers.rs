//! How a Bully node reacts to each message, one function per message type.
//!
//! The rules follow Garcia-Molina (1982): answer an `Election` from a worse
//! node and take over its election; follow a `Coordinator` from a better
//! node. Heartbeats, epochs and split-brain healing are this project's
//! additions; the module docs of [`crate::bully`] explain them.

use super::message::BullyMessage;
use super::node::BullyNode;
use super::state::State;
use crate::types::NodeId;

impl BullyNode {
    /// `Election` from `from`: a worse node asks whether anyone better is
    /// alive. Answer it, and make sure a better leader emerges: a node that
    /// leads (or is about to) repeats its `Coordinator` to the asker, and any
    /// other node runs its own election unless one is already under way.
    pub(crate) fn on_election(&mut self, from: NodeId) {
        if !self.prefers(self.id, from) {
            // Elections only go to better nodes; a misconfigured sender (with
            // another winner rule) gets no answer rather than a wrong one.
            return;
        }
        let epoch = self.epoch;
        self.outbox.push(from, BullyMessage::Answer { epoch });
        if let Some(claimed) = self.state.claimed_epoch() {
            assert!(self.state.claims_leadership());
            self.outbox
                .push(from, BullyMessage::Coordinator { epoch: claimed });
        } else if !self.state.election_under_way() {
            self.start_election();
        }
    }

    /// `Answer` from `from`: a better node is alive and takes the election
    /// over, so wait for its `Coordinator` instead of winning.
    pub(crate) fn on_answer(&mut self, from: NodeId) {
        if let State::AwaitingAnswer { .. } = self.state {
            if self.prefers(from, self.id) {
                self.state = State::AwaitingCoordinator {
                    deadline_tick: self.now_ticks + self.config.coordinator_timeout_ticks,
                };
                assert!(self.state.election_under_way());
            }
        }
    }

    /// `Coordinator` from `from`: it claims leadership. Follow a better node
    /// whatever this node was doing (an old leader steps down here). A worse
    /// claimant is bullied: a leader re-announces so that the claimant hears a
    /// better leader and steps down, and a follower starts an election that
    /// it, or someone better, will win.
    pub(crate) fn on_coordinator(&mut self, from: NodeId, stale: bool) {
        if stale {
            self.correct_stale_epoch(from);
        }
        if self.prefers(from, self.id) {
            self.follow(from);
            return;
        }
        match self.state {
            State::Leader { .. } => self.reannounce(),
            State::Follower { .. } => self.start_election(),
            // An election of this node's own is under way or its own
            // `Coordinator` is already on its way to the claimant.
            State::AwaitingAnswer { .. }
            | State::AwaitingCoordinator { .. }
            | State::Announcing { .. } => {}
        }
    }

    /// `Heartbeat` from `from`: it leads. Split-brain healing happens here: of
    /// two leaders, the worse steps down on the better one's heartbeat and the
    /// better one re-announces on the worse one's, so that the worse one hears
    /// it at once. A follower better than the sender takes over with an
    /// election (unless it follows a leader better than itself, which deals
    /// with the sender); a worse one adopts the sender unless it already
    /// follows an even better leader.
    pub(crate) fn on_heartbeat(&mut self, from: NodeId, stale: bool) {
        if stale {
            self.correct_stale_epoch(from);
        }
        let sender_is_better = self.prefers(from, self.id);
        match self.state {
            State::Leader { .. } if sender_is_better => self.follow(from),
            State::Leader { .. } => self.reannounce(),
            State::Announcing { .. } if sender_is_better => self.follow(from),
            State::Announcing { .. } => {}
            State::Follower { leader, .. } if !sender_is_better => {
                // Take over from a worse claimant, unless this node already
                // follows a better leader, which will bully it on its own.
                let led_by_better = leader.is_some_and(|current| self.prefers(current, self.id));
                if !led_by_better {
                    self.start_election();
                }
            }
            State::Follower { leader, .. } => {
                let adopt = match leader {
                    None => true,
                    Some(current) => current == from || self.prefers(from, current),
                };
                if adopt {
                    self.follow(from);
                }
            }
            // A live better leader makes this node's election moot.
            State::AwaitingAnswer { .. } | State::AwaitingCoordinator { .. } => {
                if sender_is_better {
                    self.follow(from);
                }
            }
        }
    }

    /// Tells a node that claimed leadership under an epoch below this node's
    /// that a higher one exists, so that its fencing token moves past every
    /// epoch in use. The typical case is a restarted node, which forgot all
    /// epochs, taking over from a leader of a later epoch.
    fn correct_stale_epoch(&mut self, claimant: NodeId) {
        assert!(self.is_peer(claimant));
        let epoch = self.epoch;
        self.outbox.push(claimant, BullyMessage::Answer { epoch });
    }
}

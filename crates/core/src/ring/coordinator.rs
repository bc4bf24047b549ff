//! The `Coordinator` round: the election's result circulates once around
//! the ring so that every node learns the leader, the epoch and which members
//! are alive.
//!
//! The round stops when it returns to the node that started it, or at a node
//! that has already accepted the same (epoch, leader). Three guards keep an
//! outdated round from undoing a newer election: a node drops a round under
//! an epoch below the last one it accepted; a leader drops a round that names
//! a worse node (and re-announces itself so that node steps down); and a node
//! taking part in an election started by a node better than the named leader
//! drops the round, since that election will name a better leader.

use super::message::RingMessage;
use super::node::RingNode;
use super::state::Leadership;
use crate::types::NodeId;

impl RingNode {
    /// `Coordinator` started by `initiator`, naming `leader` under `epoch`,
    /// with the live `members` the election found.
    pub(crate) fn on_coordinator(
        &mut self,
        initiator: NodeId,
        leader: NodeId,
        members: Vec<NodeId>,
        epoch: u64,
    ) {
        let well_formed = members.contains(&leader) && members.contains(&initiator);
        if !well_formed || !self.valid_ids(&members) {
            return;
        }
        if initiator == self.id {
            if self.announcement.is_some_and(|a| a.epoch == epoch) {
                self.announcement = None; // The round is complete.
            }
            return;
        }
        if self.last_coordinator.is_some_and(|(accepted, named)| {
            epoch < accepted || (epoch, leader) == (accepted, named)
        }) {
            return; // Seen already, or older than a result accepted here.
        }
        if self.is_leader() && self.prefers(self.id, leader) {
            self.reannounce();
            return;
        }
        if let Some(participation) = self.participation {
            if self.prefers(participation.initiator, leader) {
                return;
            }
        }
        self.accept_coordinator(leader, &members, epoch);
        self.announcement = None;
        let coordinator = RingMessage::Coordinator {
            initiator,
            leader,
            members,
            epoch,
            sequence: 0,
        };
        self.forward(coordinator);
    }

    /// Adopts the result of an election: suspect exactly the members it did
    /// not find, leave any election, and lead or follow `leader`.
    pub(crate) fn accept_coordinator(&mut self, leader: NodeId, members: &[NodeId], epoch: u64) {
        assert!(epoch <= self.epoch, "epochs are raised on receipt");
        assert!(members.contains(&leader), "the leader was found alive");
        self.relay.suspect_all_but(members);
        self.last_coordinator = Some((epoch, leader));
        self.participation = None;
        if leader != self.id {
            self.follow(leader);
            return;
        }
        let leads_already = matches!(
            self.leadership,
            Leadership::Leader { epoch: current, .. } if current >= epoch
        );
        if !leads_already {
            self.take_office(epoch);
        }
    }
}

//! The `Election` message on its way around the ring: LeLann's id collection
//! with Chang and Roberts' extinction of worse elections.
//!
//! Each node appends its id and passes the message to its successor. A node
//! that already takes part in an election started by `j` drops an `Election`
//! started by a worse `i` and passes on (switching to `i`) one started by a
//! better `i`, so only the best initiator's message goes all the way round.
//! A leader counts as taking part in an election started by itself: it drops
//! elections started by worse nodes (it is alive, so they would elect it or a
//! worse node anyway, and a wrong failure hint must not unseat it), and it
//! steps down when it passes on one started by a better node, which is how a
//! restarted better node takes over without two leaders at once.

use super::message::RingMessage;
use super::node::RingNode;
use super::state::{Announcement, Leadership, Participation};
use crate::types::NodeId;

impl RingNode {
    /// True when `ids` could be an honest id list: non-empty, members only,
    /// no repeats, so never longer than the member list.
    pub(crate) fn valid_ids(&self, ids: &[NodeId]) -> bool {
        if ids.is_empty() || ids.len() > self.members.len() {
            return false;
        }
        let members_only = ids.iter().all(|id| self.members.binary_search(id).is_ok());
        let mut sorted = ids.to_vec();
        sorted.sort();
        sorted.dedup();
        members_only && sorted.len() == ids.len()
    }

    /// The initiator of the election this node competes in, for the
    /// extinction rule: itself while leading, else the election it takes
    /// part in.
    fn competing_initiator(&self) -> Option<NodeId> {
        if self.is_leader() {
            Some(self.id)
        } else {
            self.participation
                .map(|participation| participation.initiator)
        }
    }

    /// `Election` started by `initiator` that has passed `ids` so far.
    pub(crate) fn on_election(&mut self, initiator: NodeId, mut ids: Vec<NodeId>) {
        if !self.valid_ids(&ids) || ids[0] != initiator {
            return;
        }
        if let Some(rival) = self.competing_initiator() {
            if self.prefers(rival, initiator) {
                return; // Chang and Roberts: a better election is under way.
            }
        }
        if initiator == self.id || ids.contains(&self.id) {
            // Back at the initiator, or back at a node it has passed because
            // the initiator died and was skipped: every live node is in `ids`.
            // Unless this node still takes part in that very election, a
            // result has reached it since it passed the election on, and the
            // election is outdated: it may have skipped a node that was
            // restarting, and completing it could name a second leader.
            let still_running = self
                .participation
                .is_some_and(|participation| participation.initiator == initiator);
            if still_running {
                self.complete_election(ids);
            }
            return;
        }
        let leader_deadline_tick = self.leader_deadline_tick();
        self.leadership = Leadership::Follower {
            leader: None,
            leader_deadline_tick,
        };
        self.participation = Some(Participation {
            initiator,
            deadline_tick: self.now_ticks + self.config.round_timeout_ticks,
        });
        ids.push(self.id);
        assert!(ids.len() <= self.members.len(), "an id list repeats a node");
        let election = RingMessage::Election {
            initiator,
            ids,
            epoch: self.epoch,
            sequence: 0,
        };
        self.forward(election);
    }

    /// Ends an election that went all the way round: the best id in `ids`
    /// wins, under an epoch above every epoch the ring reported, and a
    /// `Coordinator` round starting here tells everyone. If this node is the
    /// winner it leads from now on.
    fn complete_election(&mut self, ids: Vec<NodeId>) {
        let winner = self.config.winner.best(&ids).expect("ids are not empty");
        let mut members = ids;
        members.sort();
        self.epoch += 1;
        let epoch = self.epoch;
        self.participation = None;
        self.accept_coordinator(winner, &members, epoch);
        self.announcement = Some(Announcement {
            epoch,
            deadline_tick: self.now_ticks + self.config.round_timeout_ticks,
        });
        assert_eq!(self.last_coordinator, Some((epoch, winner)));
        let coordinator = RingMessage::Coordinator {
            initiator: self.id,
            leader: winner,
            members,
            epoch,
            sequence: 0,
        };
        self.forward(coordinator);
    }
}

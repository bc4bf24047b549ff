//! Taking, keeping and giving up leadership on a ring: the heartbeat, the
//! lone-survivor rule and split-brain healing.
//!
//! The papers end once every node knows the winner. A long-lived ring also
//! needs to notice the leader's death (followers time out on its heartbeat)
//! and to merge two leaders after a partition heals: the worse leader steps
//! down on the better one's heartbeat, and the better one answers the worse
//! one's heartbeat with an immediate heartbeat of its own under a fresh epoch.

use super::message::RingMessage;
use super::node::RingNode;
use super::state::Leadership;
use crate::types::NodeId;

impl RingNode {
    /// Becomes Leader under `epoch`, ending any election this node took part
    /// in. Heartbeats start one period later.
    pub(crate) fn take_office(&mut self, epoch: u64) {
        assert!(epoch <= self.epoch, "cannot lead under an epoch never seen");
        self.participation = None;
        self.leadership = Leadership::Leader {
            epoch,
            heartbeat_due_tick: self.now_ticks + self.config.heartbeat_ticks,
        };
        assert!(self.is_leader());
    }

    /// Every other member is suspected: this node is alone and leads itself
    /// under a fresh epoch. Its heartbeats still go to every member, so any
    /// that are alive after all hear it and the cluster merges again.
    pub(crate) fn lead_alone(&mut self) {
        assert!(self.relay.successor().is_none(), "not alone");
        self.relay.forget_pending();
        self.announcement = None;
        self.epoch += 1;
        self.take_office(self.epoch);
    }

    /// Sends a heartbeat to every other member, suspected or not, and
    /// schedules the next round.
    pub(crate) fn send_heartbeats(&mut self) {
        let Leadership::Leader { epoch, .. } = self.leadership else {
            panic!("only a leader sends heartbeats");
        };
        for peer in &self.members {
            if *peer != self.id {
                self.outbox.push(*peer, RingMessage::Heartbeat { epoch });
            }
        }
        self.leadership = Leadership::Leader {
            epoch,
            heartbeat_due_tick: self.now_ticks + self.config.heartbeat_ticks,
        };
    }

    /// While leading, moves to a fresh epoch above everything seen and tells
    /// everyone at once, so that a worse leader steps down within one message
    /// delay and no two leaders keep the same fencing token.
    pub(crate) fn reannounce(&mut self) {
        assert!(self.is_leader());
        self.epoch += 1;
        self.leadership = Leadership::Leader {
            epoch: self.epoch,
            heartbeat_due_tick: self.now_ticks,
        };
        self.send_heartbeats();
    }

    /// Follows `leader`: restarts the leader timeout and ends any election or
    /// round this node was driving, since a leader exists.
    pub(crate) fn follow(&mut self, leader: NodeId) {
        assert!(self.is_peer(leader), "{leader} is not another member");
        let now = self.now_ticks;
        let same =
            matches!(self.leadership, Leadership::Follower { leader: Some(l), .. } if l == leader);
        if let Some(detector) = &mut self.detector {
            if !same {
                detector.forget();
            }
            detector.heard(now);
        }
        let leader_deadline_tick = self.leader_deadline_tick();
        self.leadership = Leadership::Follower {
            leader: Some(leader),
            leader_deadline_tick,
        };
        self.participation = None;
        self.announcement = None;
    }

    /// `Heartbeat` from `from`, which claims to lead.
    ///
    /// - A leader steps down for a better claimant and re-announces to a
    ///   worse one.
    /// - A node better than the claimant starts an election to take over
    ///   (it was skipped as dead when the claimant was elected), unless one
    ///   is under way or it follows a leader better than itself, which deals
    ///   with the claimant.
    /// - A worse node follows the claimant, unless it takes part in an
    ///   election started by a node better than the claimant (that election
    ///   will decide) or already follows a better leader. A node that takes
    ///   part in a worse election follows: the heartbeat proves there is a
    ///   leader, and this is how an election dropped by a healthy leader
    ///   (e.g. after a wrong hint) ends.
    pub(crate) fn on_heartbeat(&mut self, from: NodeId) {
        let claimant_is_better = self.prefers(from, self.id);
        if self.is_leader() {
            if claimant_is_better {
                self.follow(from);
            } else {
                self.reannounce();
            }
            return;
        }
        if !claimant_is_better {
            let led_by_better = matches!(
                self.leadership,
                Leadership::Follower { leader: Some(current), .. } if self.prefers(current, self.id)
            );
            if self.participation.is_none() && !led_by_better {
                self.start_election();
            }
            return;
        }
        if let Some(participation) = self.participation {
            if !self.prefers(participation.initiator, from) {
                self.follow(from);
            }
            return;
        }
        let Leadership::Follower { leader, .. } = self.leadership else {
            unreachable!("leaders returned above");
        };
        let adopt = match leader {
            None => true,
            Some(current) => current == from || self.prefers(from, current),
        };
        if adopt {
            self.follow(from);
        }
    }
}

//! Hop-by-hop delivery around the ring: who the successor is, which members
//! are suspected dead, and which forwarded messages still wait for an `Ack`.
//!
//! LeLann (1977) and Chang and Roberts (1979) assume a ring that never breaks.
//! A real ring loses members, so every forwarded message is acknowledged by
//! its receiver; a sender that gets no `Ack` within `ack_timeout_ticks`
//! suspects that successor and passes the message to the next one. Suspicion
//! only changes the route: hearing anything from a suspected node clears it.
//! And a successor that was heard from after the message left is alive (it
//! most likely restarted and lost the message), so it gets the message again
//! instead of being skipped; skipping a live node is how a ring elects two
//! leaders.

use super::config::PENDING_MAX;
use super::message::RingMessage;
use crate::protocol::Envelope;
use crate::types::NodeId;
use std::collections::{BTreeMap, BTreeSet};

/// A forwarded message that has not been acknowledged yet.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    /// The successor it was sent to, the only node whose `Ack` counts.
    pub(crate) to: NodeId,
    /// The message, kept to send it to the next successor on timeout.
    pub(crate) message: RingMessage,
    /// When it was sent, to tell whether `to` has been heard from since.
    pub(crate) sent_tick: u64,
    /// When silence means `to` is dead.
    pub(crate) deadline_tick: u64,
}

/// The ring as seen from one node.
#[derive(Debug)]
pub(crate) struct Relay {
    /// The node this relay belongs to.
    own_id: NodeId,
    /// Every member including `own_id`, sorted: the ring order.
    members: Vec<NodeId>,
    /// Members believed dead and skipped. Never contains `own_id`.
    suspected: BTreeSet<NodeId>,
    /// Unacknowledged messages by sequence. At most [`PENDING_MAX`].
    pending: BTreeMap<u64, Pending>,
    /// When each member was last heard from. A successor heard from after a
    /// message was sent is alive, so a missing `Ack` means the message was
    /// lost (typically: the successor restarted), not that it died. At most
    /// one entry per member.
    heard_tick: BTreeMap<NodeId, u64>,
    /// The sequence the next forwarded message gets.
    next_sequence: u64,
    /// How long to wait for an `Ack`.
    ack_timeout_ticks: u64,
}

impl Relay {
    /// A relay with nobody suspected. `first_sequence` should differ across
    /// restarts so that a late `Ack` from before a crash cannot match.
    pub(crate) fn new(
        own_id: NodeId,
        members: Vec<NodeId>,
        ack_timeout_ticks: u64,
        first_sequence: u64,
    ) -> Self {
        assert!(
            members.windows(2).all(|pair| pair[0] < pair[1]),
            "sorted, unique"
        );
        assert!(members.binary_search(&own_id).is_ok(), "own id is a member");
        Relay {
            own_id,
            members,
            suspected: BTreeSet::new(),
            pending: BTreeMap::new(),
            heard_tick: BTreeMap::new(),
            next_sequence: first_sequence,
            ack_timeout_ticks,
        }
    }

    /// The next member after this node in ring order that is not suspected,
    /// or `None` when every other member is suspected (or there is none).
    pub(crate) fn successor(&self) -> Option<NodeId> {
        let position = self
            .members
            .binary_search(&self.own_id)
            .expect("own id is a member");
        let count = self.members.len();
        (1..count)
            .map(|step| self.members[(position + step) % count])
            .find(|peer| !self.suspected.contains(peer))
    }

    /// Sends `message` to the successor under a fresh sequence and remembers
    /// it until acknowledged. `None` when there is no successor.
    pub(crate) fn send(
        &mut self,
        message: RingMessage,
        now_ticks: u64,
    ) -> Option<Envelope<RingMessage>> {
        let to = self.successor()?;
        Some(self.send_to(to, message, now_ticks))
    }

    /// Sends `message` to `to` under a fresh sequence and remembers it until
    /// acknowledged.
    pub(crate) fn send_to(
        &mut self,
        to: NodeId,
        message: RingMessage,
        now_ticks: u64,
    ) -> Envelope<RingMessage> {
        assert!(message.is_forwarded(), "only ring messages are relayed");
        assert!(to != self.own_id, "a node never relays to itself");
        let sequence = self.next_sequence;
        self.next_sequence = self.next_sequence.wrapping_add(1);
        let message = message.with_sequence(sequence);
        if self.pending.len() < PENDING_MAX {
            let pending = Pending {
                to,
                message: message.clone(),
                sent_tick: now_ticks,
                deadline_tick: now_ticks + self.ack_timeout_ticks,
            };
            self.pending.insert(sequence, pending);
        }
        assert!(self.pending.len() <= PENDING_MAX);
        Envelope { to, message }
    }

    /// Records `from`'s `Ack` for `sequence`. An `Ack` from anyone but the
    /// node the message went to is ignored.
    pub(crate) fn acknowledge(&mut self, from: NodeId, sequence: u64) {
        if self.pending.get(&sequence).is_some_and(|p| p.to == from) {
            self.pending.remove(&sequence);
        }
    }

    /// Removes and returns, oldest first, every message whose `Ack` is
    /// overdue. At most [`PENDING_MAX`].
    pub(crate) fn take_expired(&mut self, now_ticks: u64) -> Vec<Pending> {
        let overdue: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, pending)| now_ticks >= pending.deadline_tick)
            .map(|(sequence, _)| *sequence)
            .collect();
        assert!(overdue.len() <= PENDING_MAX);
        overdue
            .iter()
            .filter_map(|sequence| self.pending.remove(sequence))
            .collect()
    }

    /// Drops every unacknowledged message: a node that finds itself alone
    /// has nowhere to send them.
    pub(crate) fn forget_pending(&mut self) {
        self.pending.clear();
    }

    /// Marks `peer` dead, so the ring skips it.
    pub(crate) fn suspect(&mut self, peer: NodeId) {
        if peer != self.own_id && self.members.binary_search(&peer).is_ok() {
            self.suspected.insert(peer);
        }
        assert!(!self.suspected.contains(&self.own_id));
    }

    /// Records that `peer` was just heard from, which clears any suspicion.
    pub(crate) fn heard_from(&mut self, peer: NodeId, now_ticks: u64) {
        assert!(peer != self.own_id, "a node does not hear from itself");
        assert!(
            self.members.binary_search(&peer).is_ok(),
            "{peer} is a member"
        );
        self.suspected.remove(&peer);
        self.heard_tick.insert(peer, now_ticks);
    }

    /// True when `peer` has been heard from at or after `tick`.
    pub(crate) fn heard_since(&self, peer: NodeId, tick: u64) -> bool {
        self.heard_tick
            .get(&peer)
            .is_some_and(|heard| *heard >= tick)
    }

    /// Suspects exactly the members missing from `alive`, the member list of
    /// a `Coordinator`.
    pub(crate) fn suspect_all_but(&mut self, alive: &[NodeId]) {
        self.suspected = self
            .members
            .iter()
            .copied()
            .filter(|member| *member != self.own_id && !alive.contains(member))
            .collect();
        assert!(self.suspected.len() < self.members.len());
    }

    /// True when `peer` is suspected dead.
    #[cfg(test)]
    pub(crate) fn is_suspected(&self, peer: NodeId) -> bool {
        self.suspected.contains(&peer)
    }

    /// Unacknowledged messages, for invariant checks.
    pub(crate) fn pending_count(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(own: u64) -> Relay {
        let members = vec![NodeId(1), NodeId(2), NodeId(3), NodeId(4)];
        Relay::new(NodeId(own), members, 15, 100)
    }

    fn an_election() -> RingMessage {
        RingMessage::Election {
            initiator: NodeId(4),
            ids: vec![NodeId(4)],
            epoch: 0,
            sequence: 0,
        }
    }

    #[test]
    fn successor_wraps_around_and_skips_suspects() {
        let mut relay = relay(4);
        assert_eq!(relay.successor(), Some(NodeId(1)));
        relay.suspect(NodeId(1));
        assert_eq!(relay.successor(), Some(NodeId(2)));
        relay.suspect(NodeId(2));
        relay.suspect(NodeId(3));
        assert_eq!(relay.successor(), None);
        relay.heard_from(NodeId(3), 7);
        assert_eq!(relay.successor(), Some(NodeId(3)));
        assert!(relay.heard_since(NodeId(3), 7) && !relay.heard_since(NodeId(3), 8));
    }

    #[test]
    fn an_ack_from_the_receiver_clears_the_message_and_silence_expires_it() {
        let mut relay = relay(4);
        let first = relay.send(an_election(), 0).unwrap();
        let second = relay.send(an_election(), 5).unwrap();
        let RingMessage::Election { sequence, .. } = first.message else {
            panic!("an election was sent");
        };
        relay.acknowledge(NodeId(2), sequence);
        assert_eq!(
            relay.pending_count(),
            2,
            "an ack from a stranger is ignored"
        );
        relay.acknowledge(NodeId(1), sequence);
        assert_eq!(relay.pending_count(), 1);
        assert!(relay.take_expired(19).is_empty());
        let expired = relay.take_expired(20);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].message, second.message);
    }
}

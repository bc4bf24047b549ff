//! The Ring messages: LeLann's and Chang and Roberts' ELECTION and
//! COORDINATOR, which travel from each node to its successor, the `Ack` that
//! lets a sender detect a dead successor, and the leader heartbeat.

use crate::protocol::Message;
use crate::types::NodeId;

/// A Ring wire message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RingMessage {
    /// An election collecting the ids of the live nodes it passes.
    Election {
        /// The node that started it; Chang and Roberts' extinction compares
        /// initiators.
        initiator: NodeId,
        /// Every node it has passed, in ring order, starting with the
        /// initiator. Never longer than the member list.
        ids: Vec<NodeId>,
        /// The sender's highest known epoch, so that the winner's epoch ends
        /// up above every epoch known on the ring.
        epoch: u64,
        /// Chosen by the sender, echoed in the `Ack`.
        sequence: u64,
    },
    /// The result of an election, circulated once around the ring.
    Coordinator {
        /// The node that started this round; the round ends when it returns.
        initiator: NodeId,
        /// The elected leader.
        leader: NodeId,
        /// The live members the election found, sorted. Every other member
        /// is suspected dead until heard from.
        members: Vec<NodeId>,
        /// The epoch of the new leadership.
        epoch: u64,
        /// Chosen by the sender, echoed in the `Ack`.
        sequence: u64,
    },
    /// "Your `Election` or `Coordinator` arrived."
    Ack {
        /// The sequence of the acknowledged message.
        sequence: u64,
    },
    /// "I still lead": sent by the leader to every other member periodically.
    Heartbeat {
        /// The epoch of the sender's leadership.
        epoch: u64,
    },
}

/// Kind names in a fixed order, for reports.
const KINDS: [&str; 4] = ["election", "coordinator", "ack", "heartbeat"];

impl RingMessage {
    /// The epoch carried by this message; an `Ack` carries none.
    pub fn epoch(&self) -> Option<u64> {
        match self {
            RingMessage::Election { epoch, .. }
            | RingMessage::Coordinator { epoch, .. }
            | RingMessage::Heartbeat { epoch } => Some(*epoch),
            RingMessage::Ack { .. } => None,
        }
    }

    /// The same ring-forwarded message under a new sequence number, for a
    /// new hop or a retransmission. Other messages are returned unchanged.
    pub(crate) fn with_sequence(mut self, new_sequence: u64) -> Self {
        match &mut self {
            RingMessage::Election { sequence, .. } | RingMessage::Coordinator { sequence, .. } => {
                *sequence = new_sequence;
            }
            RingMessage::Ack { .. } | RingMessage::Heartbeat { .. } => {}
        }
        self
    }

    /// True for the messages that travel around the ring and need an `Ack`.
    pub(crate) fn is_forwarded(&self) -> bool {
        matches!(
            self,
            RingMessage::Election { .. } | RingMessage::Coordinator { .. }
        )
    }
}

impl Message for RingMessage {
    fn kind(&self) -> &'static str {
        match self {
            RingMessage::Election { .. } => KINDS[0],
            RingMessage::Coordinator { .. } => KINDS[1],
            RingMessage::Ack { .. } => KINDS[2],
            RingMessage::Heartbeat { .. } => KINDS[3],
        }
    }

    fn all_kinds() -> &'static [&'static str] {
        &KINDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once() {
        let messages = [
            RingMessage::Election {
                initiator: NodeId(1),
                ids: vec![NodeId(1)],
                epoch: 0,
                sequence: 0,
            },
            RingMessage::Coordinator {
                initiator: NodeId(1),
                leader: NodeId(1),
                members: vec![NodeId(1)],
                epoch: 1,
                sequence: 0,
            },
            RingMessage::Ack { sequence: 0 },
            RingMessage::Heartbeat { epoch: 1 },
        ];
        let kinds: Vec<&str> = messages.iter().map(Message::kind).collect();
        assert_eq!(kinds, RingMessage::all_kinds());
    }

    #[test]
    fn only_forwarded_messages_take_a_sequence() {
        let heartbeat = RingMessage::Heartbeat { epoch: 3 };
        assert_eq!(heartbeat.clone().with_sequence(9), heartbeat);
        let ack = RingMessage::Ack { sequence: 1 };
        assert!(!ack.is_forwarded());
        let election = RingMessage::Election {
            initiator: NodeId(1),
            ids: vec![NodeId(1)],
            epoch: 0,
            sequence: 0,
        };
        assert!(election.is_forwarded());
        assert!(matches!(
            election.with_sequence(9),
            RingMessage::Election { sequence: 9, .. }
        ));
    }
}

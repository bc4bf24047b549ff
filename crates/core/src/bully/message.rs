//! The four Bully messages: Garcia-Molina's ELECTION, ANSWER ("are you up?"
//! answered) and COORDINATOR, plus the leader heartbeat that drives failure
//! detection.
//!
//! Every message carries the sender's epoch, the highest election epoch it
//! knows, so that epochs spread to every node that hears from anyone.

use crate::protocol::Message;

/// A Bully wire message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BullyMessage {
    /// "I am starting an election": sent only to nodes better than the
    /// sender, which must answer if they are alive.
    Election {
        /// The sender's highest known epoch.
        epoch: u64,
    },
    /// "I am alive and better than you; leave the election to me." Also sent
    /// to correct a `Coordinator` or `Heartbeat` whose epoch is stale.
    Answer {
        /// The sender's highest known epoch.
        epoch: u64,
    },
    /// "I am the leader as of `epoch`": sent by a winner to every other node.
    Coordinator {
        /// The epoch of the new leadership.
        epoch: u64,
    },
    /// "I still lead": sent by the leader to every other node periodically.
    Heartbeat {
        /// The epoch of the sender's leadership.
        epoch: u64,
    },
}

/// Kind names in a fixed order, for reports.
const KINDS: [&str; 4] = ["election", "answer", "coordinator", "heartbeat"];

impl BullyMessage {
    /// The epoch carried by this message.
    pub fn epoch(&self) -> u64 {
        match self {
            BullyMessage::Election { epoch }
            | BullyMessage::Answer { epoch }
            | BullyMessage::Coordinator { epoch }
            | BullyMessage::Heartbeat { epoch } => *epoch,
        }
    }
}

impl Message for BullyMessage {
    fn kind(&self) -> &'static str {
        match self {
            BullyMessage::Election { .. } => KINDS[0],
            BullyMessage::Answer { .. } => KINDS[1],
            BullyMessage::Coordinator { .. } => KINDS[2],
            BullyMessage::Heartbeat { .. } => KINDS[3],
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
            BullyMessage::Election { epoch: 1 },
            BullyMessage::Answer { epoch: 1 },
            BullyMessage::Coordinator { epoch: 1 },
            BullyMessage::Heartbeat { epoch: 1 },
        ];
        let kinds: Vec<&str> = messages.iter().map(Message::kind).collect();
        assert_eq!(kinds, BullyMessage::all_kinds());
    }
}

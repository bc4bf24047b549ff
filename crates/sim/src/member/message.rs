//! What simulated members send each other: Raft's messages and the
//! member's forwarding messages, as the server's peer connections carry
//! them.

use bellwether_core::raft::RaftMessage;
use bellwether_core::Message;
use bellwether_member::Forward;
use std::sync::OnceLock;

/// One message between simulated members.
#[derive(Clone, Debug)]
pub enum MemberMessage {
    /// A Raft message, for the core.
    Raft(RaftMessage),
    /// A client request forwarded between a follower and its leader.
    Forward(Forward),
}

/// The forwarding kinds, in [`Forward`]'s order.
const FORWARD_KINDS: [&str; 5] = [
    "forward_propose",
    "forward_propose_refused",
    "forward_read_index",
    "forward_read_index_confirmed",
    "forward_read_index_refused",
];

impl Message for MemberMessage {
    fn kind(&self) -> &'static str {
        match self {
            MemberMessage::Raft(message) => message.kind(),
            MemberMessage::Forward(Forward::Propose { .. }) => FORWARD_KINDS[0],
            MemberMessage::Forward(Forward::ProposeRefused { .. }) => FORWARD_KINDS[1],
            MemberMessage::Forward(Forward::ReadIndex { .. }) => FORWARD_KINDS[2],
            MemberMessage::Forward(Forward::ReadIndexConfirmed { .. }) => FORWARD_KINDS[3],
            MemberMessage::Forward(Forward::ReadIndexRefused { .. }) => FORWARD_KINDS[4],
        }
    }

    fn all_kinds() -> &'static [&'static str] {
        static KINDS: OnceLock<Vec<&'static str>> = OnceLock::new();
        KINDS.get_or_init(|| {
            RaftMessage::all_kinds()
                .iter()
                .copied()
                .chain(FORWARD_KINDS)
                .collect()
        })
    }
}

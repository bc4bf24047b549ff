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

impl Message for MemberMessage {
    fn kind(&self) -> &'static str {
        match self {
            MemberMessage::Raft(message) => message.kind(),
            MemberMessage::Forward(forward) => forward.kind(),
        }
    }

    fn all_kinds() -> &'static [&'static str] {
        static KINDS: OnceLock<Vec<&'static str>> = OnceLock::new();
        KINDS.get_or_init(|| {
            RaftMessage::all_kinds()
                .iter()
                .copied()
                .chain(Forward::KINDS)
                .collect()
        })
    }
}

//! What a follower and its leader tell each other about forwarded client
//! requests (see [`crate::forwarding`]), and the calls one member's
//! process makes to another's. The server encodes these beside Raft's
//! messages on the peer connection.

use bellwether_core::{LogIndex, NodeId, Term};

/// Client requests forwarded from a follower to the leader, and the
/// leader's answers. A write's result is not sent back: the follower reads
/// it off its own state machine when it applies the entry, which carries
/// the follower's id and `request` (see [`crate::forwarding::envelope`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Forward {
    /// Follower to leader: propose `command` (already enveloped), but only
    /// in `term`.
    Propose {
        /// The follower's request id.
        request: u64,
        /// The term of the leader it is sent to. A leader in any other term
        /// refuses it, so a forwarded write can enter the log only in this
        /// term: once the follower applies an entry of a later term, a
        /// write it still waits for is known never to apply, and its
        /// client may safely send it again.
        term: Term,
        /// The log entry's command bytes.
        command: Vec<u8>,
    },
    /// Leader to follower: the write was not proposed (not the leader any
    /// more, or too busy).
    ProposeRefused {
        /// The follower's request id.
        request: u64,
        /// The leader the refusing member knows, if any (on the wire: its
        /// number, 0 for none).
        leader: Option<NodeId>,
        /// True when refused for back-pressure rather than leadership.
        busy: bool,
    },
    /// Follower to leader: confirm leadership and name a read index
    /// (Raft thesis §6.4, reads from followers).
    ReadIndex {
        /// The follower's request id.
        request: u64,
    },
    /// Leader to follower: reading once `index` is applied is linearizable.
    ReadIndexConfirmed {
        /// The follower's request id.
        request: u64,
        /// The leader's commit index when the read arrived, confirmed by a
        /// quorum afterwards.
        index: LogIndex,
    },
    /// Leader to follower: the read could not be confirmed.
    ReadIndexRefused {
        /// The follower's request id.
        request: u64,
        /// The leader the refusing member knows, if any (on the wire: its
        /// number, 0 for none).
        leader: Option<NodeId>,
    },
    /// A member's call for another member's process, not its log: a
    /// lease renewal on the leader's lease clock, a learner's promotion
    /// that only the leader can judge, a member's history hash. The body
    /// is the runtime's own encoding; the member only carries it.
    Call {
        /// The calling member's request id.
        request: u64,
        /// What is asked, in the runtime's encoding.
        body: Vec<u8>,
    },
    /// The answer to [`Forward::Call`], in the runtime's encoding.
    CallAnswer {
        /// The calling member's request id.
        request: u64,
        /// The answer.
        body: Vec<u8>,
    },
    /// The called member's runtime could not take the call (too many in
    /// flight, or no one serves calls there).
    CallRefused {
        /// The calling member's request id.
        request: u64,
    },
}

impl Forward {
    /// Every kind, in the enum's order, for message counters.
    pub const KINDS: [&'static str; 8] = [
        "forward_propose",
        "forward_propose_refused",
        "forward_read_index",
        "forward_read_index_confirmed",
        "forward_read_index_refused",
        "member_call",
        "member_call_answer",
        "member_call_refused",
    ];

    /// This message's kind: one of [`Forward::KINDS`].
    pub fn kind(&self) -> &'static str {
        let index = match self {
            Forward::Propose { .. } => 0,
            Forward::ProposeRefused { .. } => 1,
            Forward::ReadIndex { .. } => 2,
            Forward::ReadIndexConfirmed { .. } => 3,
            Forward::ReadIndexRefused { .. } => 4,
            Forward::Call { .. } => 5,
            Forward::CallAnswer { .. } => 6,
            Forward::CallRefused { .. } => 7,
        };
        Forward::KINDS[index]
    }
}

//! Raft's election messages (paper §5.2, thesis §9.6 and §3.10).
//!
//! Heartbeats are separate from AppendEntries so that log replication can be
//! added without changing how liveness is detected.

use crate::protocol::Message;
use crate::types::{LogIndex, Term};

/// A message between two Raft members. Every message carries the sender's
/// view of the term, which drives the step-down rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RaftMessage {
    /// "Would you vote for me at `term`?" sent before raising the term.
    /// `term` is the sender's current term plus one.
    PreVoteRequest {
        /// The term the sender would campaign in.
        term: Term,
        /// Index of the sender's last log entry, for the §5.4.1 check.
        last_log_index: LogIndex,
        /// Term of the sender's last log entry, for the §5.4.1 check.
        last_log_term: Term,
    },
    /// Answer to a pre-vote. When granted, `term` echoes the requested term;
    /// when refused, it is the responder's own term so a lagging requester
    /// can catch up.
    PreVoteResponse {
        /// See the variant docs.
        term: Term,
        /// Whether the responder would vote.
        granted: bool,
    },
    /// RequestVote (paper §5.2).
    VoteRequest {
        /// The candidate's term.
        term: Term,
        /// Index of the candidate's last log entry.
        last_log_index: LogIndex,
        /// Term of the candidate's last log entry.
        last_log_term: Term,
        /// Set when the campaign follows a TimeoutNow from the leader: voters
        /// then set leader stickiness aside, because the leader itself asked.
        leadership_transfer: bool,
    },
    /// Answer to RequestVote.
    VoteResponse {
        /// The responder's term.
        term: Term,
        /// Whether the vote was granted.
        granted: bool,
    },
    /// Leader liveness signal; resets followers' election timers.
    Heartbeat {
        /// The leader's term.
        term: Term,
    },
    /// Follower's answer to a heartbeat. It lets the leader count a quorum
    /// (CheckQuorum) and see how far each follower's log has come.
    HeartbeatResponse {
        /// The follower's term.
        term: Term,
        /// The follower's last log index.
        last_log_index: LogIndex,
        /// The follower's last log term.
        last_log_term: Term,
    },
    /// Leadership transfer (thesis §3.10): "start an election now".
    TimeoutNow {
        /// The leader's term.
        term: Term,
    },
}

impl RaftMessage {
    /// The term this message carries.
    pub fn term(&self) -> Term {
        match self {
            RaftMessage::PreVoteRequest { term, .. }
            | RaftMessage::PreVoteResponse { term, .. }
            | RaftMessage::VoteRequest { term, .. }
            | RaftMessage::VoteResponse { term, .. }
            | RaftMessage::Heartbeat { term }
            | RaftMessage::HeartbeatResponse { term, .. }
            | RaftMessage::TimeoutNow { term } => *term,
        }
    }
}

const RAFT_KINDS: &[&str] = &[
    "pre_vote_request",
    "pre_vote_response",
    "vote_request",
    "vote_response",
    "heartbeat",
    "heartbeat_response",
    "timeout_now",
];

impl Message for RaftMessage {
    fn kind(&self) -> &'static str {
        match self {
            RaftMessage::PreVoteRequest { .. } => RAFT_KINDS[0],
            RaftMessage::PreVoteResponse { .. } => RAFT_KINDS[1],
            RaftMessage::VoteRequest { .. } => RAFT_KINDS[2],
            RaftMessage::VoteResponse { .. } => RAFT_KINDS[3],
            RaftMessage::Heartbeat { .. } => RAFT_KINDS[4],
            RaftMessage::HeartbeatResponse { .. } => RAFT_KINDS[5],
            RaftMessage::TimeoutNow { .. } => RAFT_KINDS[6],
        }
    }

    fn all_kinds() -> &'static [&'static str] {
        RAFT_KINDS
    }
}

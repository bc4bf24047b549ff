//! Raft's messages: elections (paper §5.2, thesis §9.6, §3.10), replication
//! (§5.3), snapshots (§7) and read rounds (thesis §6.4).
//!
//! Heartbeats are separate from AppendEntries (as in etcd-io/raft): they are
//! small, never carry entries, and double as ReadIndex rounds.

use super::entry::{Entry, SnapshotMeta};
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
        /// What the follower may commit: the leader's commit index, capped at
        /// what the leader knows this follower has matched.
        commit: LogIndex,
        /// ReadIndex round (thesis §6.4): the follower echoes it, and a
        /// quorum of echoes proves the leader still led when it was sent.
        round: u64,
    },
    /// Follower's answer to a heartbeat. It lets the leader count a quorum
    /// (CheckQuorum, ReadIndex, leases).
    HeartbeatResponse {
        /// The follower's term.
        term: Term,
        /// The round being answered.
        round: u64,
        /// The follower's last log index, so the leader sees a follower that
        /// needs entries.
        last_log_index: LogIndex,
    },
    /// AppendEntries (paper §5.3).
    AppendEntries {
        /// The leader's term.
        term: Term,
        /// Index of the entry just before `entries`.
        prev_log_index: LogIndex,
        /// Term of that entry.
        prev_log_term: Term,
        /// Entries to append, possibly none.
        entries: Vec<Entry>,
        /// The leader's commit index.
        leader_commit: LogIndex,
    },
    /// Answer to AppendEntries.
    AppendResponse {
        /// The follower's term.
        term: Term,
        /// Whether the entries were accepted.
        success: bool,
        /// When accepted: the last index now known to match the leader.
        match_index: LogIndex,
        /// When refused: where the leader should try next (§5.3
        /// fast backtracking).
        hint_index: LogIndex,
        /// When refused: the follower's term at the probed index.
        hint_term: Option<Term>,
    },
    /// One chunk of a snapshot (paper §7, InstallSnapshot), sent in order.
    InstallSnapshot {
        /// The leader's term.
        term: Term,
        /// What the snapshot covers.
        meta: SnapshotMeta,
        /// Byte offset of `data` in the snapshot.
        offset: u64,
        /// Total size of the snapshot data.
        total_bytes: u64,
        /// The chunk.
        data: Vec<u8>,
    },
    /// Acknowledges snapshot chunks: the follower holds `received_bytes`.
    InstallSnapshotResponse {
        /// The follower's term.
        term: Term,
        /// Snapshot being received.
        last_index: LogIndex,
        /// Bytes held so far; the leader continues from there.
        received_bytes: u64,
    },
    /// "My log is on my disk up to `index`": lets a follower of a two- or
    /// three-voter cluster commit without waiting for the leader's commit
    /// index (see `durable_notice.rs`). Never answered.
    LeaderDurable {
        /// The leader's term.
        term: Term,
        /// The leader's last entry on disk, of this term.
        index: LogIndex,
        /// Index of the leader's configuration, which is committed.
        config_index: LogIndex,
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
            | RaftMessage::Heartbeat { term, .. }
            | RaftMessage::HeartbeatResponse { term, .. }
            | RaftMessage::AppendEntries { term, .. }
            | RaftMessage::AppendResponse { term, .. }
            | RaftMessage::InstallSnapshot { term, .. }
            | RaftMessage::InstallSnapshotResponse { term, .. }
            | RaftMessage::LeaderDurable { term, .. }
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
    "append_entries",
    "append_response",
    "install_snapshot",
    "install_snapshot_response",
    "leader_durable",
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
            RaftMessage::AppendEntries { .. } => RAFT_KINDS[7],
            RaftMessage::AppendResponse { .. } => RAFT_KINDS[8],
            RaftMessage::InstallSnapshot { .. } => RAFT_KINDS[9],
            RaftMessage::InstallSnapshotResponse { .. } => RAFT_KINDS[10],
            RaftMessage::LeaderDurable { .. } => RAFT_KINDS[11],
        }
    }

    fn all_kinds() -> &'static [&'static str] {
        RAFT_KINDS
    }
}

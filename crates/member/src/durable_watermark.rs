//! What this member's disk holds of its Raft state as of its last finished
//! fsync, and the check every Raft message it sends passes in release
//! builds: no message promises more than the disk holds.
//!
//! Why: the member sends some messages before its own fsync ends (a
//! leader's appends and durable notices, see `sendable_before_persist` in
//! `node.rs`) and the rest after it. Were that order ever wrong, a vote
//! could be granted twice in one term after a crash, or a follower could
//! count an entry that a crash then loses toward a commit. Raft's answers
//! carry exactly what they depend on, so the check is local and cheap: a
//! few comparisons per message, against two numbers and a vote.
//!
//! The rules, for a message to member `to`:
//! - every message but a pre-vote request or answer (which do not raise a
//!   term): its term is the durable term or an older one;
//! - a granted vote of the durable term: the durable vote is for `to`;
//! - an accepted append or a leader's durable notice of the durable term:
//!   its index is durable.
//!
//! A message of an older term was made before this member moved on (the
//! core keeps what it queued when a later message in the same batch
//! raises its term). Such a message promises nothing the disk must hold:
//! the newer term on disk means this member never votes in the older one
//! again, and an acknowledgement or notice of an older term cannot help
//! commit anything a later leader overwrote. So only messages of the
//! durable term are held to what it holds.

use bellwether_core::raft::{HardState, RaftDurable, RaftMessage};
use bellwether_core::{LogIndex, NodeId};

/// The member's Raft state on disk as of its last finished fsync.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurableWatermark {
    /// The last log index on disk (the snapshot's when no entry follows).
    pub last_index: LogIndex,
    /// The term and vote on disk.
    pub hard_state: HardState,
}

impl DurableWatermark {
    /// What an in-memory image of the disk holds (the simulator's and
    /// tests' disks): its last entry's index, or its snapshot's.
    pub fn of(disk: &RaftDurable) -> Self {
        let last_index = disk.entries.last().map(|e| e.index).unwrap_or_else(|| {
            disk.snapshot
                .as_ref()
                .map_or(LogIndex(0), |s| s.meta.last_index)
        });
        DurableWatermark {
            last_index,
            hard_state: disk.hard_state,
        }
    }

    /// Why sending `message` to `to` now would break the durability order,
    /// or `None` when it may leave.
    pub fn violation(&self, to: NodeId, message: &RaftMessage) -> Option<String> {
        let durable_term = self.hard_state.term;
        match message {
            RaftMessage::PreVoteRequest { .. } | RaftMessage::PreVoteResponse { .. } => {
                return None
            }
            RaftMessage::VoteResponse {
                term,
                granted: true,
            } if *term == durable_term && self.hard_state.voted_for != Some(to) => {
                return Some(format!(
                    "a vote for {to} in term {term} leaves before it is on disk (disk: term {durable_term}, vote {:?})",
                    self.hard_state.voted_for
                ));
            }
            RaftMessage::AppendResponse {
                success: true,
                match_index,
                term,
                ..
            } if *term == durable_term && *match_index > self.last_index => {
                return Some(format!(
                    "an append acknowledged to {match_index} leaves with the disk at {}",
                    self.last_index
                ));
            }
            RaftMessage::LeaderDurable { index, term, .. }
                if *term == durable_term && *index > self.last_index =>
            {
                return Some(format!(
                    "a durable notice for {index} leaves with the disk at {}",
                    self.last_index
                ));
            }
            _ => {}
        }
        let term = message.term();
        (term > durable_term).then(|| {
            format!(
                "a {} of term {term} leaves with term {durable_term} on disk",
                bellwether_core::Message::kind(message)
            )
        })
    }

    /// Whether `message` may leave before this member's next fsync ends:
    /// its term must already be on disk. A leader elected within one batch
    /// (a single voter) has its new term in the `Ready` it sends its first
    /// appends from; those wait for the fsync, as everything else does.
    pub fn term_is_durable(&self, message: &RaftMessage) -> bool {
        message.term() <= self.hard_state.term
    }

    /// Stops the member if sending `message` to `to` would break the
    /// durability order: a bug in the runtime, which no input excuses.
    pub fn assert_may_send(&self, to: NodeId, message: &RaftMessage) {
        if let Some(violation) = self.violation(to, message) {
            panic!("durability order broken: {violation}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_core::Term;

    fn disk(last: u64, term: u64, vote: Option<u64>) -> DurableWatermark {
        DurableWatermark {
            last_index: LogIndex(last),
            hard_state: HardState {
                term: Term(term),
                voted_for: vote.map(NodeId),
                commit: LogIndex(0),
            },
        }
    }

    #[test]
    fn a_vote_leaves_only_once_it_is_on_disk() {
        let vote = |term| RaftMessage::VoteResponse {
            term: Term(term),
            granted: true,
        };
        assert_eq!(disk(0, 3, Some(2)).violation(NodeId(2), &vote(3)), None);
        assert!(disk(0, 2, Some(2)).violation(NodeId(2), &vote(3)).is_some());
        // A later message of the same batch raised the term and cleared
        // the vote: the grant of term 3 is safe, no vote of 3 can follow.
        assert_eq!(disk(0, 4, None).violation(NodeId(2), &vote(3)), None);
        assert!(disk(0, 3, Some(1)).violation(NodeId(2), &vote(3)).is_some());
        assert!(disk(0, 3, None).violation(NodeId(2), &vote(3)).is_some());
        let refusal = RaftMessage::VoteResponse {
            term: Term(3),
            granted: false,
        };
        assert_eq!(disk(0, 3, Some(1)).violation(NodeId(2), &refusal), None);
    }

    #[test]
    fn an_acknowledged_append_and_a_durable_notice_name_only_what_is_on_disk() {
        let ack = |index| RaftMessage::AppendResponse {
            term: Term(1),
            success: true,
            match_index: LogIndex(index),
            hint_index: LogIndex(0),
            hint_term: None,
        };
        assert_eq!(disk(5, 1, None).violation(NodeId(1), &ack(5)), None);
        assert!(disk(4, 1, None).violation(NodeId(1), &ack(5)).is_some());
        // A newer leader truncated the log after this acknowledgement of
        // term 1 was made: it helps commit nothing of term 2.
        assert_eq!(disk(4, 2, None).violation(NodeId(1), &ack(5)), None);
        let notice = |index| RaftMessage::LeaderDurable {
            term: Term(1),
            index: LogIndex(index),
            config_index: LogIndex(0),
        };
        assert_eq!(disk(5, 1, Some(1)).violation(NodeId(2), &notice(5)), None);
        assert!(disk(4, 1, Some(1))
            .violation(NodeId(2), &notice(5))
            .is_some());
    }

    #[test]
    fn no_message_carries_a_term_not_yet_on_disk_except_pre_votes() {
        let heartbeat = RaftMessage::Heartbeat {
            term: Term(4),
            commit: LogIndex(0),
            round: 1,
        };
        assert!(disk(0, 3, None).violation(NodeId(2), &heartbeat).is_some());
        assert_eq!(disk(0, 4, None).violation(NodeId(2), &heartbeat), None);
        let pre_vote = RaftMessage::PreVoteRequest {
            term: Term(4),
            last_log_index: LogIndex(0),
            last_log_term: Term(0),
        };
        assert_eq!(disk(0, 3, None).violation(NodeId(2), &pre_vote), None);
    }
}

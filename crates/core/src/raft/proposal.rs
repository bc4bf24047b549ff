//! Proposals: a leader appends a command and replicates it at the next
//! `ready()`, so proposals made between two calls share one message per
//! follower (batching). Refusals are explicit; nothing is dropped silently.

use super::entry::{Entry, Payload};
use super::node::RaftNode;
use crate::protocol::Role;
use crate::types::{LogIndex, NodeId};
use std::fmt;

/// Why a proposal (or a membership change) was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposeError {
    /// Only the leader accepts proposals; `leader` is the current one if
    /// known.
    NotLeader {
        /// Where to send it instead.
        leader: Option<NodeId>,
    },
    /// A leadership transfer is under way; retry on the new leader.
    TransferInProgress,
    /// Too many entries are waiting to commit: back off and retry.
    Busy,
    /// The previous membership change is not committed yet.
    ConfigChangePending,
    /// The leader has not yet committed an entry of its own term.
    NotReady,
    /// That node is already a member.
    AlreadyMember(NodeId),
    /// That node is not a member (or not a learner, for a promotion).
    UnknownMember(NodeId),
    /// A learner is promoted only once it has caught up.
    LearnerBehind {
        /// The learner.
        id: NodeId,
        /// What it has matched.
        matched: LogIndex,
        /// What it must reach.
        commit: LogIndex,
    },
    /// The last voter cannot be removed.
    LastVoter,
}

impl fmt::Display for ProposeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProposeError::NotLeader { leader: Some(l) } => {
                write!(f, "not the leader; the leader is {l}")
            }
            ProposeError::NotLeader { leader: None } => {
                write!(f, "not the leader, and no leader is known")
            }
            ProposeError::TransferInProgress => {
                write!(f, "leadership is being transferred; retry shortly")
            }
            ProposeError::Busy => {
                write!(f, "too many uncommitted entries; retry after backing off")
            }
            ProposeError::ConfigChangePending => {
                write!(f, "the previous membership change is not committed yet")
            }
            ProposeError::NotReady => write!(
                f,
                "the new leader has not committed an entry of its term yet"
            ),
            ProposeError::AlreadyMember(id) => write!(f, "{id} is already a member"),
            ProposeError::UnknownMember(id) => write!(f, "{id} is not a member in that role"),
            ProposeError::LearnerBehind {
                id,
                matched,
                commit,
            } => {
                write!(
                    f,
                    "learner {id} has matched {matched}, needs {commit} before promotion"
                )
            }
            ProposeError::LastVoter => write!(f, "the last voter cannot be removed"),
        }
    }
}

impl std::error::Error for ProposeError {}

impl RaftNode {
    /// Appends `data` as a command. Returns the entry's index; the command
    /// is applied once `RaftOutput::Apply` hands that index out.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<LogIndex, ProposeError> {
        self.check_can_propose()?;
        let uncommitted = self.log.last_index().0 - self.commit.0;
        if uncommitted >= self.config.uncommitted_entries_max as u64 {
            return Err(ProposeError::Busy);
        }
        let index = self.log.last_index().next();
        self.log.append(Entry {
            term: self.term,
            index,
            payload: Payload::Command(data),
        });
        self.replication_pending = true;
        if self.cluster.voters.len() == 1 {
            self.maybe_commit();
        }
        Ok(index)
    }

    /// Leader and not handing over.
    pub(super) fn check_can_propose(&self) -> Result<(), ProposeError> {
        if self.role != Role::Leader {
            return Err(ProposeError::NotLeader {
                leader: self.leader,
            });
        }
        if self.transfer.is_some() {
            return Err(ProposeError::TransferInProgress);
        }
        Ok(())
    }
}

//! What a Raft node must find again after a crash (paper Figure 2,
//! "persistent state on all servers").

use super::log::RaftLog;
use crate::types::{LogIndex, NodeId, Term};

/// Term and vote. Both must be on disk before any message that depends on
/// them leaves, or a restarted node could vote twice in one term.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HardState {
    /// Latest term this node has seen.
    pub term: Term,
    /// Candidate that received this node's vote in `term`, if any.
    pub voted_for: Option<NodeId>,
    /// Highest index known committed. Not needed for safety (it can be
    /// relearned), but lets a restarted node re-apply without waiting.
    pub commit: LogIndex,
}

/// Everything a Raft node persists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftDurable {
    /// Term and vote.
    pub hard_state: HardState,
    /// The log, which elections compare.
    pub log: RaftLog,
}

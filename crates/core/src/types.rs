//! Newtypes for the nouns of the papers: node ids, terms and log indexes.
//!
//! They are distinct types so that a term can never be passed where a log
//! index is expected, a class of bug that plain `u64`s invite.

use std::fmt;

/// Identifies one member of a cluster. Ids are unique within a cluster and
/// never reused for a different member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NodeId(pub u64);

/// A Raft term (paper §5.1): a logical clock that only ever grows. Bully and
/// Ring reuse it as an election epoch, which carries no quorum guarantee.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Term(pub u64);

/// Position of an entry in the replicated log; index 0 means "no entry".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LogIndex(pub u64);

impl Term {
    /// The term after this one.
    pub fn next(self) -> Term {
        Term(self.0 + 1)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}", self.0)
    }
}

impl fmt::Display for LogIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "i{}", self.0)
    }
}

//! The part of the Raft log that elections need: the term of each entry.
//!
//! Elections only compare the last entry (paper §5.4.1). Replication, which
//! stores payloads and truncates conflicts, extends this type in the next
//! stage; until then a log is given to a node when it is built.

use crate::types::{LogIndex, Term};

/// Terms of the entries at indexes 1, 2, … in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftLog {
    /// `terms[i]` is the term of the entry at index `i + 1`. Terms never
    /// decrease along the log.
    terms: Vec<Term>,
}

impl RaftLog {
    /// A log holding entries with these terms at indexes 1, 2, …
    pub fn from_terms(terms: Vec<Term>) -> Self {
        assert!(
            terms.windows(2).all(|pair| pair[0] <= pair[1]),
            "log terms must never decrease: {terms:?}"
        );
        RaftLog { terms }
    }

    /// Index of the last entry, 0 for an empty log.
    pub fn last_index(&self) -> LogIndex {
        LogIndex(self.terms.len() as u64)
    }

    /// Term of the last entry, 0 for an empty log.
    pub fn last_term(&self) -> Term {
        self.terms.last().copied().unwrap_or_default()
    }

    /// The election restriction (§5.4.1): a log ending at
    /// `(last_term, last_index)` is at least as up-to-date as this one when
    /// its last term is higher, or equal with an index at least as high.
    pub fn is_behind_or_equal(&self, last_term: Term, last_index: LogIndex) -> bool {
        (last_term, last_index) >= (self.last_term(), self.last_index())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_to_date_compares_last_term_first_then_index() {
        let log = RaftLog::from_terms(vec![Term(1), Term(2), Term(2)]);
        assert!(
            log.is_behind_or_equal(Term(3), LogIndex(1)),
            "higher term wins"
        );
        assert!(log.is_behind_or_equal(Term(2), LogIndex(3)), "equal logs");
        assert!(
            !log.is_behind_or_equal(Term(2), LogIndex(2)),
            "shorter loses"
        );
        assert!(
            !log.is_behind_or_equal(Term(1), LogIndex(9)),
            "lower term loses"
        );
    }

    #[test]
    #[should_panic(expected = "never decrease")]
    fn decreasing_terms_are_refused() {
        RaftLog::from_terms(vec![Term(2), Term(1)]);
    }
}

//! Election Safety (Raft paper, Figure 3): at most one leader can be elected
//! in a given term.
//!
//! The checker remembers, for every term ever seen, which node led it. It
//! holds over the whole run, across crashes and restarts, not just at one
//! instant: two leaders of one term at different times are also a violation.

use super::Violation;
use bellwether_core::{NodeId, Role, Status, Term};
use std::collections::HashMap;

/// Remembers the leader of every term.
#[derive(Debug, Default)]
pub struct ElectionSafety {
    /// Term → the node that led it.
    leaders: HashMap<Term, NodeId>,
}

impl ElectionSafety {
    /// Records `status` if it is a leader, and fails if another node already
    /// led the same term.
    pub fn observe(&mut self, time_us: u64, status: &Status) -> Result<(), Violation> {
        if status.role != Role::Leader {
            return Ok(());
        }
        let first = *self.leaders.entry(status.term).or_insert(status.id);
        if first != status.id {
            return Err(Violation {
                property: "election-safety",
                time_us,
                detail: format!(
                    "{} and {} both became leader in {}",
                    first, status.id, status.term
                ),
            });
        }
        Ok(())
    }

    /// Number of distinct terms that had a leader.
    pub fn terms_led(&self) -> usize {
        self.leaders.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader(id: u64, term: u64) -> Status {
        Status {
            id: NodeId(id),
            role: Role::Leader,
            term: Term(term),
            leader: Some(NodeId(id)),
            fencing_token: Some(term),
        }
    }

    #[test]
    fn two_leaders_in_one_term_are_caught_even_at_different_times() {
        let mut checker = ElectionSafety::default();
        assert!(checker.observe(1, &leader(1, 3)).is_ok());
        assert!(
            checker.observe(2, &leader(1, 3)).is_ok(),
            "same node again is fine"
        );
        assert!(
            checker.observe(3, &leader(2, 4)).is_ok(),
            "new term, new leader"
        );
        let violation = checker.observe(9, &leader(2, 3)).unwrap_err();
        assert_eq!(violation.property, "election-safety");
        assert_eq!(checker.terms_led(), 2);
    }
}

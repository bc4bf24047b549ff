//! Monotonic terms: a node's term never decreases, not even across a crash,
//! because the term is persisted before it is used (paper Figure 2).

use super::Violation;
use bellwether_core::Term;

/// Highest term each node has shown so far.
#[derive(Debug)]
pub struct TermMonotonic {
    /// Index = node index.
    highest: Vec<Term>,
}

impl TermMonotonic {
    /// A checker for `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        TermMonotonic {
            highest: vec![Term(0); nodes],
        }
    }

    /// Fails if `term` is below what `node` showed before.
    pub fn observe(&mut self, time_us: u64, node: usize, term: Term) -> Result<(), Violation> {
        let highest = &mut self.highest[node];
        if term < *highest {
            return Err(Violation {
                property: "monotonic-term",
                time_us,
                detail: format!("n{} went back from {} to {}", node + 1, highest, term),
            });
        }
        *highest = term;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_going_back_is_caught() {
        let mut checker = TermMonotonic::new(2);
        assert!(checker.observe(0, 0, Term(2)).is_ok());
        assert!(
            checker.observe(1, 1, Term(1)).is_ok(),
            "nodes are independent"
        );
        assert!(checker.observe(2, 0, Term(2)).is_ok());
        assert_eq!(
            checker.observe(3, 0, Term(1)).unwrap_err().property,
            "monotonic-term"
        );
    }
}

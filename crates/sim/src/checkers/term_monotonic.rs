//! Monotonic terms: the term a node has on disk never decreases, not even
//! across a crash, because it is persisted before it is used (paper
//! Figure 2); and within one incarnation the term it shows never decreases.
//! (A term raised in memory but lost with unsynced writes in a crash was
//! never acted on, so the restarted node may show the older one.)

use super::Violation;
use bellwether_core::Term;

/// Highest terms seen per node.
#[derive(Debug)]
pub struct TermMonotonic {
    /// Shown in this incarnation; index = node index.
    highest: Vec<Term>,
    /// On disk, over the whole run.
    durable: Vec<Term>,
}

impl TermMonotonic {
    /// A checker for `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        TermMonotonic {
            highest: vec![Term(0); nodes],
            durable: vec![Term(0); nodes],
        }
    }

    /// A node restarted: what it shows now starts from its disk.
    pub fn restart(&mut self, node: usize, durable: Term) {
        self.highest[node] = durable;
    }

    /// A fault injected into `node`'s disk left it at `term`: the floor
    /// drops to it, since the damage is the simulator's doing. What the
    /// member then does with its disk is what the checkers judge.
    pub fn disk_damaged(&mut self, node: usize, term: Term) {
        self.durable[node] = self.durable[node].min(term);
    }

    /// Fails if the term on `node`'s disk went back.
    pub fn observe_durable(
        &mut self,
        time_us: u64,
        node: usize,
        term: Term,
    ) -> Result<(), Violation> {
        let highest = &mut self.durable[node];
        if term < *highest {
            return Err(Violation {
                property: "monotonic-term",
                time_us,
                detail: format!(
                    "n{}'s disk went back from {} to {}",
                    node + 1,
                    highest,
                    term
                ),
            });
        }
        *highest = term;
        Ok(())
    }

    /// Fails if `term` is below what `node` showed before in this
    /// incarnation.
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

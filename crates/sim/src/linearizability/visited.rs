//! The memo table of configurations the search has already entered.
//!
//! Lowe ("Testing for linearizability", 2017, section 3) observed that two
//! search paths reaching the same set of linearized operations and the same
//! model state have the same future, so the second can be cut. This table
//! adds one refinement for operations of unknown outcome: such an operation
//! never has to be placed (it may never have taken effect) and imposes no
//! real-time bound on anything, and interchangeable ones only count by
//! number (see [`super::classes`]). So if the search has entered a
//! configuration with completed operations C, state s and `p[k]` placed
//! unknown-outcome operations of each class k, a configuration with the same
//! C and s and at least as many placed of every class can do nothing the
//! first cannot: it has fewer operations left to use, and the same
//! constraints. The table is keyed by (C, s) and keeps, for each, the count
//! vectors seen; a new vector is cut when it is at or above one of them.

use std::collections::HashMap;
use std::hash::Hash;

/// Identifies the completed operations placed and the model state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct ConfigKey<S> {
    /// Every completed operation whose id is below this is placed.
    pub(super) completed_prefix: u32,
    /// The completed-set bitset from the word holding `completed_prefix` on,
    /// with trailing zero words dropped.
    pub(super) completed_tail: Box<[u64]>,
    /// The model state.
    pub(super) state: S,
}

/// How many unknown-outcome operations of each class are placed, as
/// (class, count) pairs sorted by class, zero counts omitted.
pub(super) type ClassCounts = Box<[(u32, u32)]>;

/// Configurations entered so far.
#[derive(Debug)]
pub(super) struct Visited<S> {
    /// (completed set, state) → the (class, count) vectors entered with it,
    /// each sorted by class.
    entries: HashMap<ConfigKey<S>, Vec<ClassCounts>>,
}

impl<S: Clone + Eq + Hash> Visited<S> {
    /// An empty table.
    pub(super) fn new() -> Self {
        Visited {
            entries: HashMap::new(),
        }
    }

    /// Records the configuration and returns true, unless one already
    /// entered covers it (same key, no more placed of any class), in which
    /// case it returns false and records nothing.
    pub(super) fn enter(&mut self, key: ConfigKey<S>, placed: ClassCounts) -> bool {
        assert!(
            placed.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "visited: class counts not sorted"
        );
        let seen = self.entries.entry(key).or_default();
        if seen.iter().any(|old| covers(old, &placed)) {
            return false;
        }
        seen.push(placed);
        true
    }
}

/// True if `old` places no more of any class than `new`; both sorted by
/// class, zero counts omitted.
fn covers(old: &[(u32, u32)], new: &[(u32, u32)]) -> bool {
    if old.len() > new.len() {
        return false;
    }
    let mut rest = new.iter();
    old.iter().all(|&(class, count)| {
        rest.find(|&&(other, _)| other >= class)
            .is_some_and(|&(other, other_count)| other == class && count <= other_count)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(state: u8) -> ConfigKey<u8> {
        ConfigKey {
            completed_prefix: 3,
            completed_tail: vec![0b1011].into(),
            state,
        }
    }

    #[test]
    fn same_configuration_is_entered_once() {
        let mut visited = Visited::new();
        assert!(visited.enter(key(1), vec![].into()));
        assert!(!visited.enter(key(1), vec![].into()));
        assert!(
            visited.enter(key(2), vec![].into()),
            "different state is new"
        );
    }

    #[test]
    fn more_placed_unknown_outcome_operations_are_covered() {
        let mut visited = Visited::new();
        assert!(visited.enter(key(1), vec![(2, 1), (5, 2)].into()));
        assert!(!visited.enter(key(1), vec![(1, 1), (2, 1), (5, 3), (9, 1)].into()));
        assert!(
            visited.enter(key(1), vec![(2, 1), (5, 1)].into()),
            "fewer is not covered"
        );
        assert!(visited.enter(key(1), vec![(5, 2), (7, 1)].into()));
    }

    #[test]
    fn covering_is_exact() {
        assert!(covers(&[], &[(1, 1)]));
        assert!(covers(&[(1, 1), (3, 2)], &[(0, 1), (1, 1), (2, 1), (3, 2)]));
        assert!(!covers(
            &[(1, 1), (4, 1)],
            &[(0, 1), (1, 1), (2, 1), (3, 1)]
        ));
        assert!(
            !covers(&[(3, 2)], &[(3, 1)]),
            "a higher count is not covered"
        );
        assert!(
            !covers(&[(3, 1), (1, 1)], &[(1, 1), (3, 1)]),
            "unsorted input"
        );
    }
}

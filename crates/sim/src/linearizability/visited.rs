//! The memo table of configurations the search has already entered.
//!
//! Lowe ("Testing for linearizability", 2017, section 3) observed that two
//! search paths reaching the same set of linearized operations and the same
//! model state have the same future, so the second can be cut. This table
//! adds one refinement for operations of unknown outcome ("indeterminate"):
//! such an operation never has to be linearized (it may have never taken
//! effect) and imposes no real-time bound on anything. So if the search has
//! entered (C, I, s) — completed operations C, indeterminate operations I,
//! state s — then (C, I', s) with I' a superset of I can do nothing that
//! (C, I, s) cannot: every continuation of the larger one is a continuation
//! of the smaller one. The table is therefore keyed by (C, s) and keeps, for
//! each, the indeterminate sets seen; a new set is cut when it contains one
//! of them.

use std::collections::HashMap;
use std::hash::Hash;

/// Identifies the completed operations linearized and the model state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct ConfigKey<S> {
    /// Every completed operation whose id is below this is linearized.
    pub(super) completed_prefix: u32,
    /// The completed-set bitset from the word holding `completed_prefix` on,
    /// with trailing zero words dropped.
    pub(super) completed_tail: Box<[u64]>,
    /// The model state.
    pub(super) state: S,
}

/// Configurations entered so far.
#[derive(Debug)]
pub(super) struct Visited<S> {
    /// (completed set, state) → the sorted indeterminate sets entered with it.
    entries: HashMap<ConfigKey<S>, Vec<Box<[u32]>>>,
}

impl<S: Clone + Eq + Hash> Visited<S> {
    /// An empty table.
    pub(super) fn new() -> Self {
        Visited {
            entries: HashMap::new(),
        }
    }

    /// Records the configuration and returns true, unless it is covered by
    /// one already entered (same key, indeterminate subset), in which case it
    /// returns false and records nothing. `indeterminate` must be sorted.
    pub(super) fn enter(&mut self, key: ConfigKey<S>, indeterminate: Box<[u32]>) -> bool {
        assert!(
            indeterminate.windows(2).all(|pair| pair[0] < pair[1]),
            "visited: indeterminate set not sorted"
        );
        let seen = self.entries.entry(key).or_default();
        if seen.iter().any(|old| is_subset(old, &indeterminate)) {
            return false;
        }
        seen.push(indeterminate);
        true
    }
}

/// True if every member of `small` is in `big`; both sorted ascending.
fn is_subset(small: &[u32], big: &[u32]) -> bool {
    if small.len() > big.len() {
        return false;
    }
    let mut rest = big.iter();
    small.iter().all(|member| rest.any(|candidate| candidate == member))
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
        assert!(visited.enter(key(2), vec![].into()), "different state is new");
    }

    #[test]
    fn superset_of_indeterminate_operations_is_covered() {
        let mut visited = Visited::new();
        assert!(visited.enter(key(1), vec![2, 5].into()));
        assert!(!visited.enter(key(1), vec![1, 2, 5, 9].into()));
        assert!(visited.enter(key(1), vec![2].into()), "a subset is not covered");
        assert!(visited.enter(key(1), vec![5, 7].into()));
    }

    #[test]
    fn subset_check_is_exact() {
        assert!(is_subset(&[], &[1]));
        assert!(is_subset(&[1, 3], &[0, 1, 2, 3]));
        assert!(!is_subset(&[1, 4], &[0, 1, 2, 3]));
        assert!(!is_subset(&[3, 1], &[1, 3]), "unsorted input is not a subset");
    }
}

//! Why a key's history is not linearizable, in terms a person can follow.
//!
//! A proof of non-linearizability is the whole exhausted search tree, far too
//! big to show. What helps debugging is where the search got furthest (as in
//! Porcupine's and Knossos's reports): the longest order of operations that
//! the register can explain, the state it leaves, and the operation that
//! could not be placed after it together with everything that could have
//! come next. The bug is usually among those few operations.

use super::command::{DisplayValue, Value};
use super::operation::Operation;
use serde::Serialize;
use std::fmt;

/// Most operations of the longest partial linearization shown, counted from
/// its end: the ones right before the failure matter.
pub const EXPLANATION_TAIL_MAX: usize = 8;

/// Most candidate operations shown.
pub const EXPLANATION_CANDIDATES_MAX: usize = 16;

/// An operation and its position in the checked history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IndexedOperation {
    /// Index into the history slice given to `check`.
    pub index: usize,
    /// The operation.
    pub operation: Operation,
}

/// One step of a partial linearization.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LinearizedStep {
    /// The operation placed.
    pub operation: IndexedOperation,
    /// The register's value after it.
    pub state_after: Option<Value>,
}

/// Where the search for a linearization of one key got stuck.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// Operations checked on the key (timed-out reads are left out: they
    /// observed nothing and changed nothing).
    pub operations: usize,
    /// How many of them completed.
    pub completed: usize,
    /// Completed operations in the longest partial linearization found.
    pub linearized_completed: usize,
    /// The last steps (at most [`EXPLANATION_TAIL_MAX`]) of that partial
    /// linearization, oldest first.
    pub linearized_tail: Vec<LinearizedStep>,
    /// Steps of the partial linearization left out of `linearized_tail`.
    pub linearized_omitted: usize,
    /// The register's value after the partial linearization.
    pub state: Option<Value>,
    /// The completed operation that finished first among those not placed:
    /// no order of the candidates could place it.
    pub blocking: IndexedOperation,
    /// Operations invoked before `blocking` completed and not placed, by
    /// invoke time (at most [`EXPLANATION_CANDIDATES_MAX`]).
    pub candidates: Vec<IndexedOperation>,
    /// Candidates left out of `candidates`.
    pub candidates_omitted: usize,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "the longest partial linearization places {} of {} completed operations ({} in all)",
            self.linearized_completed, self.completed, self.operations
        )?;
        if self.linearized_omitted > 0 {
            writeln!(f, "  ... {} earlier steps", self.linearized_omitted)?;
        }
        for step in &self.linearized_tail {
            writeln!(
                f,
                "  #{} {}  => {}",
                step.operation.index,
                step.operation.operation,
                DisplayValue(&step.state_after)
            )?;
        }
        writeln!(
            f,
            "leaving the value {}; then #{} {} cannot be placed by any order of:",
            DisplayValue(&self.state),
            self.blocking.index,
            self.blocking.operation
        )?;
        for candidate in &self.candidates {
            writeln!(f, "  #{} {}", candidate.index, candidate.operation)?;
        }
        if self.candidates_omitted > 0 {
            writeln!(f, "  ... and {} more", self.candidates_omitted)?;
        }
        Ok(())
    }
}

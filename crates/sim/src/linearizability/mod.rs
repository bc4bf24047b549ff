//! Linearizability checking for histories of the key-value store that
//! simulated clients drive.
//!
//! A history is linearizable (Herlihy & Wing, "Linearizability: a
//! correctness condition for concurrent objects", 1990) if every operation
//! can be given one instant between its invoke and its completion such that,
//! taken in that order, the operations are a legal sequential run of the
//! store. It is the property clients of a coordination service rely on: a
//! completed write is seen by every later read, and no read sees a value
//! that was never written or already overwritten.
//!
//! How [`check`] decides it:
//!
//! - The history is split per key (`check` module, after Herlihy & Wing's
//!   locality theorem and Horn & Kroening's P-compositionality, 2015).
//! - Each key's history is searched depth-first for an order, Wing & Gong's
//!   algorithm (1993) with Lowe's memo table of (operations placed, state)
//!   ("Testing for linearizability", 2017), as in Porcupine (`search`
//!   module).
//! - Operations whose client timed out may take effect at any instant after
//!   their invoke, or never. Left alone they make the search exponential;
//!   five sound cuts and a symmetry reduction between interchangeable ones
//!   keep it fast (`search`, `classes`, `visited` and `unobserved` modules).
//! - Every "linearizable" verdict is re-checked against the definition on
//!   the recorded operations (`witness` module) before it is returned.
//! - Work is bounded by [`CheckOptions::search_steps_max`]; running out gives
//!   [`CheckResult::Unknown`], never a false "linearizable".
//!
//! The sequential specification is a [`Model`]; [`Register`] is the one the
//! store uses, and another object can plug into the same search.

mod bitset;
mod check;
mod classes;
mod command;
mod explanation;
mod links;
mod longest;
mod model;
mod operation;
mod options;
mod register;
mod result;
mod search;
mod unobserved;
mod visited;
mod witness;

#[cfg(test)]
mod tests;

pub use check::check;
pub use command::{Command, Key, Response, Value};
pub use explanation::{
    Explanation, IndexedOperation, LinearizedStep, EXPLANATION_CANDIDATES_MAX, EXPLANATION_TAIL_MAX,
};
pub use model::Model;
pub use operation::{ClientId, Operation, Outcome};
pub use options::{CheckOptions, SEARCH_STEPS_MAX_DEFAULT};
pub use register::Register;
pub use result::{CheckResult, UnknownReason};

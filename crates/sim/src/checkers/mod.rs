//! Invariant checkers, one per property, each run after every event that
//! changes a node's observable state.
//!
//! A checker that finds a violation returns it; the world stops at once and
//! the run is reported as failed with its seed, which replays it exactly.

mod chosen_values;
mod election_safety;
mod split_brain;
mod term_monotonic;

pub use chosen_values::ChosenValues;
pub use election_safety::ElectionSafety;
pub use split_brain::{SplitBrain, SplitBrainIncident};
pub use term_monotonic::TermMonotonic;

use std::fmt;

/// A broken invariant, with enough detail to start debugging.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// The property, e.g. `"election-safety"`.
    pub property: &'static str,
    /// Virtual time of the event after which it was found.
    pub time_us: u64,
    /// What exactly went wrong.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} violated at {:.3} ms: {}",
            self.property,
            self.time_us as f64 / 1000.0,
            self.detail
        )
    }
}

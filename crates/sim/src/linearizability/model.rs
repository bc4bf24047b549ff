//! The sequential specification an implementation must look like.
//!
//! Linearizability (Herlihy & Wing 1990) asks whether the concurrent history
//! could have come from some sequential execution of the object's
//! specification that respects real-time order. The search only needs to run
//! the specification one step at a time, so a model is a pure step function
//! over a hashable state (Lowe, "Testing for linearizability", 2017, section
//! 3, keys its memo table by that state). Another object — a lock, a queue —
//! plugs in by implementing this trait; nothing in the search knows about
//! registers.

use std::fmt::Debug;
use std::hash::Hash;

/// A deterministic sequential object.
pub trait Model {
    /// The object's whole state. Compared and hashed by the search's memo
    /// table, so keep it small.
    type State: Clone + Eq + Hash + Debug;
    /// A request. Equal unknown-outcome requests are interchangeable to the
    /// search, hence `Eq + Hash`.
    type Command: Eq + Hash;
    /// An answer to a request.
    type Response;

    /// The state before any operation.
    fn initial_state(&self) -> Self::State;

    /// Applies `command` to `state`.
    ///
    /// With `response: Some(r)` the answer was observed: returns the next
    /// state if the specification allows answering `r` in `state`, else
    /// `None`. With `response: None` the answer is unknown (the client timed
    /// out): returns the state after applying the command, whatever it
    /// answered, or `None` if it cannot take effect in `state`.
    ///
    /// Must be a pure function: the search calls it on states other than the
    /// current one to decide which orders are redundant.
    fn step(
        &self,
        state: &Self::State,
        command: &Self::Command,
        response: Option<&Self::Response>,
    ) -> Option<Self::State>;
}

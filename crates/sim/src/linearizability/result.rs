//! The verdict of a check.
//!
//! Three outcomes, never two: a search that ran out of budget or met a
//! malformed record has not shown anything, and saying "linearizable" then
//! would hide exactly the histories that are hardest to check.

use super::command::Key;
use super::explanation::Explanation;
use serde::Serialize;
use std::fmt;

/// What a check concluded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum CheckResult {
    /// Every key's history has a linearization.
    Linearizable,
    /// Some key's history has none; the first such key in key order.
    NotLinearizable {
        /// The key whose history is not linearizable.
        key: Key,
        /// Where the search got stuck.
        explanation: Box<Explanation>,
    },
    /// No key failed, but at least one could not be decided; the first such
    /// key in key order.
    Unknown {
        /// The undecided key.
        key: Key,
        /// Why it was not decided.
        reason: UnknownReason,
    },
}

impl CheckResult {
    /// True only for a proven `Linearizable`.
    pub fn is_linearizable(&self) -> bool {
        matches!(self, CheckResult::Linearizable)
    }
}

/// Why a key's history was not decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum UnknownReason {
    /// The search used its whole budget (`CheckOptions::search_steps_max`).
    SearchStepsExceeded {
        /// The budget that ran out.
        steps_max: u64,
    },
    /// An operation record cannot be checked; this is a bug in whatever
    /// recorded the history.
    MalformedOperation {
        /// Index of the record in the history.
        index: usize,
        /// What is wrong with it.
        detail: String,
    },
}

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnknownReason::SearchStepsExceeded { steps_max } => write!(
                f,
                "the search gave up after {steps_max} steps; raise search_steps_max or shorten the history"
            ),
            UnknownReason::MalformedOperation { index, detail } => {
                write!(f, "operation #{index} is malformed: {detail}; fix the history recorder")
            }
        }
    }
}

impl fmt::Display for CheckResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckResult::Linearizable => write!(f, "linearizable"),
            CheckResult::NotLinearizable { key, explanation } => {
                write!(f, "not linearizable on key {key}: {explanation}")
            }
            CheckResult::Unknown { key, reason } => write!(f, "unknown on key {key}: {reason}"),
        }
    }
}

//! Knobs for a check.

use serde::{Deserialize, Serialize};

/// Default for [`CheckOptions::search_steps_max`]. A linearizable history
/// needs about one step per operation plus a little backtracking; proving a
/// violation means exhausting every order before it, which with many
/// timed-out operations takes far more (about 15 million steps for one key
/// of a 10,000-operation history with 10% timeouts and the violation at the
/// very end). A step costs roughly 30-50 ns in a release build and most do
/// not grow the memo table, so this bounds a hopeless key to about a second
/// and tens of megabytes.
pub const SEARCH_STEPS_MAX_DEFAULT: u64 = 20_000_000;

/// How much work a check may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOptions {
    /// Most placement attempts the search may make on one key's partition
    /// (the total is at most this times the number of keys). A partition
    /// that needs more is reported as `Unknown`, never as linearizable.
    pub search_steps_max: u64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            search_steps_max: SEARCH_STEPS_MAX_DEFAULT,
        }
    }
}

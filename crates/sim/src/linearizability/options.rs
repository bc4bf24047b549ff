//! Knobs for a check.

use serde::{Deserialize, Serialize};

/// Default for [`CheckOptions::search_steps_max`]. A linearizable history
/// usually needs about one step per operation plus a little backtracking, so
/// this leaves ample room for thousands of operations per key, while keeping
/// a hopeless search (and its memo table, roughly 100 bytes per step) under
/// about a second and a few hundred megabytes.
pub const SEARCH_STEPS_MAX_DEFAULT: u64 = 1_000_000;

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

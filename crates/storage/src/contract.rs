//! The caller-side rules of [`Storage`](crate::Storage), checked the same way
//! by every implementation.
//!
//! Breaking one of these is a bug in the Raft core, and storing the result
//! would corrupt the durable log silently, so they are assertions, kept in
//! release builds.

use bellwether_core::raft::{Entry, HardState};
use bellwether_core::{LogIndex, Term};

/// Checks an append against the log it extends.
///
/// `previous_term` is the term of the entry just before the batch when the
/// implementation knows it cheaply.
pub(crate) fn check_append(
    entries: &[Entry],
    last_index: LogIndex,
    snapshot_index: LogIndex,
    previous_term: Option<Term>,
) {
    let first = &entries[0];
    assert!(
        first.index.0 >= 1 && first.index.0 <= last_index.0 + 1,
        "append at {} would leave a gap after the last entry {last_index}",
        first.index
    );
    assert!(
        first.index > snapshot_index,
        "append at {} would rewrite entries covered by the snapshot at {snapshot_index}",
        first.index
    );
    if let Some(previous) = previous_term {
        assert!(
            first.term >= previous,
            "entry {} has term {} below its predecessor's {previous}",
            first.index,
            first.term
        );
    }
    for pair in entries.windows(2) {
        assert_eq!(
            pair[1].index.0,
            pair[0].index.0 + 1,
            "appended entries must be contiguous"
        );
        assert!(
            pair[0].term <= pair[1].term,
            "terms must never decrease along the log ({} then {})",
            pair[0].term,
            pair[1].term
        );
    }
}

/// Checks that `next` may replace `previous`: terms never go back, and a
/// vote cast in a term is never changed or withdrawn within that term (that
/// would let a restarted node vote twice, which is what durable votes exist
/// to prevent, paper §5.2).
pub(crate) fn check_hard_state(previous: &HardState, next: &HardState) {
    assert!(
        next.term >= previous.term,
        "hard state term went back from {} to {}",
        previous.term,
        next.term
    );
    if next.term == previous.term {
        if let Some(voted_for) = previous.voted_for {
            assert_eq!(
                next.voted_for,
                Some(voted_for),
                "the vote for {voted_for} in term {} was changed",
                next.term
            );
        }
    }
}

/// Checks that a snapshot at `new_index` may replace one at `current_index`.
pub(crate) fn check_snapshot(current_index: LogIndex, new_index: LogIndex) {
    assert!(
        new_index >= current_index,
        "snapshot at {new_index} is older than the stored one at {current_index}"
    );
}

/// Checks that compaction through `through` drops only snapshotted entries.
pub(crate) fn check_compact(through: LogIndex, snapshot_index: LogIndex) {
    assert!(
        through <= snapshot_index,
        "compacting through {through} would drop entries the snapshot at {snapshot_index} does not cover"
    );
}

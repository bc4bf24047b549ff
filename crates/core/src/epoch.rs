//! The durable epoch shared by Bully and Ring: the only state those
//! quorum-less algorithms persist, so that a restarted node never hands out
//! a fencing token it already used. One definition for both algorithms.

use crate::types::Term;

/// The epoch on disk, as a term for runtimes' monotonicity checks.
pub(crate) fn durable_term(durable: &u64) -> Term {
    Term(*durable)
}

/// Applies a persisted epoch to the in-memory image of the disk.
pub(crate) fn apply(durable: &mut u64, persist: u64) {
    assert!(persist >= *durable, "the epoch never goes back");
    *durable = persist;
}

/// The epoch to persist in this `ready()`, if it changed since the last one.
pub(crate) fn take_change(epoch: u64, persisted: &mut u64) -> Option<u64> {
    assert!(epoch >= *persisted, "the epoch never goes back");
    let change = (epoch != *persisted).then_some(epoch);
    *persisted = epoch;
    change
}

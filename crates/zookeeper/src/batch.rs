//! Several writes of one session in one log entry.
//!
//! ZooKeeper's clients pipeline: a session sends its next request before
//! the last is answered, and its writes must still be applied in the order
//! they were sent (a create of `/a/b` right after a create of `/a` has to
//! find `/a`). A member that proposed each write on its own could have two
//! of them reordered on the way to the leader, or one refused and retried
//! after the next; so it waits for each answer, and a session gets one
//! write per round trip to the leader. A batch carries every write the
//! session has queued at once, in order, as one entry: the order cannot
//! change, and a session's queued writes cost one round trip together.
//!
//! Each write in a batch is applied on its own, exactly as it would be
//! alone: its own zxid, its own answer, its own failure (a batch is not a
//! `multi`: one write failing does not undo the others).

use crate::entry::ZkEntry;

/// Writes of one session, to be applied in order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ZkBatch {
    /// The writes, in the order the client sent them.
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<ZkEntry>,
}

/// The answers to a [`ZkBatch`]: one [`crate::entry::answer`] per write, in
/// the same order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ZkBatchAnswer {
    /// Each write's answer.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub answers: Vec<Vec<u8>>,
}

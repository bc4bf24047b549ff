//! What the member asks its runtime to do, besides carrying out a
//! [`crate::ReadyPlan`]: answer clients, send forwarding messages, serve
//! other members' calls, and
//! run the slow parts of a snapshot (encoding one, decoding the leader's)
//! on another thread.
//!
//! The member queues effects in the order it decides them; the runtime
//! takes them with [`crate::Member::take_effects`] after every call and
//! carries them out in that order. Nothing here touches the disk's
//! durability order: every answer queued is one that may go out now.

use crate::client_error::ClientError;
use crate::forward::Forward;
use bellwether_core::raft::Snapshot;
use bellwether_core::{LogIndex, NodeId};
use std::fmt;
use std::time::Duration;

/// An answer this member owes a client. `W` and `R` are where a write's
/// and a read barrier's answers go: a channel in the server, an
/// operation's number in the simulator.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer<W, R> {
    /// A write's outcome: the state machine's answer, or why not.
    Write(W, Result<Vec<u8>, ClientError>),
    /// A read barrier's outcome: reading this member's state now is
    /// linearizable, or why not.
    Read(R, Result<(), ClientError>),
}

/// One thing for the runtime to do.
pub enum Effect<W, R> {
    /// Answer a client.
    Answer(Answer<W, R>),
    /// Send a forwarding message to `to`. A request that cannot be queued
    /// goes back through [`crate::Member::forward_unsent`].
    Forward(NodeId, Forward),
    /// Another member's call for this member's process (see
    /// [`Forward::Call`]): answer it with [`crate::Member::answer_call`],
    /// or [`crate::Member::refuse_call`].
    Call {
        /// The calling member.
        from: NodeId,
        /// Its request id, to answer with.
        request: u64,
        /// What it asks, in the runtime's encoding.
        body: Vec<u8>,
    },
    /// A local client's write, proposed at `proposed_at` on the member's
    /// clock, was applied and answered (for the latency metric).
    ProposalApplied {
        /// When it was proposed.
        proposed_at: Duration,
    },
    /// Run this job on another thread, streaming the snapshot at `index`
    /// into a file (or memory), and hand the bytes to
    /// [`crate::Member::snapshot_encoded`]. A failure to write them stops
    /// the member as a failed log write does.
    EncodeSnapshot {
        /// The applied index the snapshot covers.
        index: LogIndex,
        /// The state machine's encoding.
        job: crate::SnapshotJob,
    },
    /// Run this job on another thread, decoding the snapshot at `index`
    /// that came from the leader, and hand what it returns to
    /// [`crate::Member::snapshot_decoded`]. Committed entries wait until
    /// then.
    RestoreSnapshot {
        /// The snapshot's last index.
        index: LogIndex,
        /// The state machine's decoding.
        job: crate::RestoreJob,
    },
    /// The snapshot encoded at `index` will not be written: a snapshot
    /// from the leader restored meanwhile covers more. The runtime deletes
    /// what it streamed the snapshot into.
    SnapshotDropped {
        /// The index it covered.
        index: LogIndex,
    },
    /// Write this snapshot beside the log (and fsync it), then tell
    /// [`crate::Member::snapshot_written`]. A failed write stops the member
    /// as a failed log write does.
    WriteSnapshot(Snapshot),
}

impl<W: fmt::Debug, R: fmt::Debug> fmt::Debug for Effect<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Effect::Answer(answer) => f.debug_tuple("Answer").field(answer).finish(),
            Effect::Forward(to, forward) => {
                f.debug_tuple("Forward").field(to).field(forward).finish()
            }
            Effect::Call {
                from,
                request,
                body,
            } => f
                .debug_struct("Call")
                .field("from", from)
                .field("request", request)
                .field("bytes", &body.len())
                .finish(),
            Effect::ProposalApplied { proposed_at } => f
                .debug_struct("ProposalApplied")
                .field("proposed_at", proposed_at)
                .finish(),
            Effect::EncodeSnapshot { index, .. } => f
                .debug_struct("EncodeSnapshot")
                .field("index", index)
                .finish(),
            Effect::RestoreSnapshot { index, .. } => f
                .debug_struct("RestoreSnapshot")
                .field("index", index)
                .finish(),
            Effect::SnapshotDropped { index } => f
                .debug_struct("SnapshotDropped")
                .field("index", index)
                .finish(),
            Effect::WriteSnapshot(snapshot) => f
                .debug_tuple("WriteSnapshot")
                .field(&snapshot.meta)
                .finish(),
        }
    }
}

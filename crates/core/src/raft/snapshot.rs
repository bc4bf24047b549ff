//! Snapshots and log compaction (paper §7): the application hands the core
//! a snapshot of its state, the log before it is dropped, and followers too
//! far behind receive the snapshot in bounded chunks (InstallSnapshot).

use super::entry::{Snapshot, SnapshotData, SnapshotMeta, StoredSnapshot};
use super::message::RaftMessage;
use super::node::RaftNode;
use super::output::RaftOutput;
use super::progress::ReplicationState;
use crate::protocol::Role;
use crate::types::{LogIndex, NodeId};
use std::fmt;

/// A snapshot arriving in chunks.
#[derive(Clone, Debug)]
pub struct IncomingSnapshot {
    /// What it covers.
    pub meta: SnapshotMeta,
    /// Announced total size.
    pub total_bytes: u64,
    /// Bytes received so far, in order.
    pub data: Vec<u8>,
}

/// A snapshot from the leader that the application restores off its loop
/// (see [`RaftNode::restore_in_background`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingRestore {
    /// The snapshot's last index.
    pub index: LogIndex,
    /// The index the application's state is at until it has restored it.
    pub state_at: LogIndex,
}

/// Why a compaction request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactError {
    /// The snapshot must cover only applied entries.
    NotApplied {
        /// Requested index.
        index: LogIndex,
        /// Applied so far.
        applied: LogIndex,
    },
    /// The log is already compacted past that index.
    AlreadyCompacted(LogIndex),
}

impl fmt::Display for CompactError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompactError::NotApplied { index, applied } => {
                write!(f, "cannot snapshot at {index}: only {applied} is applied")
            }
            CompactError::AlreadyCompacted(index) => {
                write!(f, "the log is already compacted past {index}")
            }
        }
    }
}

impl std::error::Error for CompactError {}

impl RaftNode {
    /// Records the application's snapshot of its state after applying
    /// `last_index`, persists it, and drops the log up to there.
    pub fn compact(&mut self, last_index: LogIndex, data: Vec<u8>) -> Result<(), CompactError> {
        let snapshot = self.compact_unpersisted(last_index, data)?;
        self.snapshot_to_persist = Some(snapshot);
        Ok(())
    }

    /// [`compact`](Self::compact), except that the snapshot is not handed
    /// to a `Ready` to persist: it is returned, and the caller writes it
    /// durably itself, beside the log rather than in its order. Safe
    /// because a snapshot of applied entries only covers entries that are
    /// already durable, and the storage keeps them until the caller
    /// records the snapshot there: a crash at any point recovers either
    /// the older snapshot and those entries, or this snapshot. The
    /// snapshot is sent to lagging followers at once.
    pub fn compact_unpersisted(
        &mut self,
        last_index: LogIndex,
        data: impl Into<SnapshotData>,
    ) -> Result<Snapshot, CompactError> {
        if last_index > self.applied {
            return Err(CompactError::NotApplied {
                index: last_index,
                applied: self.applied,
            });
        }
        if last_index <= self.log.snapshot_index() {
            return Err(CompactError::AlreadyCompacted(last_index));
        }
        let meta = SnapshotMeta {
            last_index,
            last_term: self
                .log
                .term(last_index)
                .expect("applied entries are in the log"),
            config: self.config_at(last_index),
        };
        self.log.compact(&meta);
        let snapshot = Snapshot {
            meta,
            data: data.into(),
        };
        self.snapshot = Some(snapshot.clone());
        Ok(snapshot)
    }

    /// The runtime has the latest snapshot's bytes at `index` in a synced
    /// file: the node drops its copy in memory and reads the chunks it
    /// sends from `stored` (see [`SnapshotData`]). Ignored when the latest
    /// snapshot is another one by now; its length must match.
    pub fn snapshot_stored(&mut self, index: LogIndex, stored: std::sync::Arc<dyn StoredSnapshot>) {
        let Some(snapshot) = self
            .snapshot
            .as_mut()
            .filter(|s| s.meta.last_index == index)
        else {
            return;
        };
        assert_eq!(
            snapshot.data.len(),
            stored.len(),
            "the stored snapshot at {index} has the bytes the node holds"
        );
        snapshot.data = SnapshotData::Stored(stored);
    }

    /// From now on, a snapshot installed from the leader holds back the
    /// committed entries after it until the application says it restored
    /// it ([`snapshot_restored`](Self::snapshot_restored)), and
    /// [`applied_index`](Self::applied_index) stays where the application's
    /// state is meanwhile. For an application that decodes a large
    /// snapshot on another thread, so that its loop goes on answering the
    /// leader: the entries wait in the log, which bounds them, and no read
    /// is served from the state the snapshot replaces.
    pub fn restore_in_background(&mut self) {
        self.restores_in_background = true;
    }

    /// The snapshot from the leader at `index` is restored: committed
    /// entries after it go to the application again. One superseded by a
    /// later snapshot from the leader changes nothing; the later one is
    /// awaited.
    pub fn snapshot_restored(&mut self, index: LogIndex) {
        let Some(pending) = self.pending_restore else {
            return;
        };
        assert!(
            index <= pending.index,
            "restored a snapshot at {index} that was never handed out (latest {})",
            pending.index
        );
        if index == pending.index {
            self.pending_restore = None;
        }
    }

    /// Fault injection for the simulator's own tests: committed entries
    /// go on being handed out while a snapshot from the leader is restored,
    /// so they are applied to the state it then replaces. The state
    /// machine's check must stop the member. Not compiled into normal
    /// builds.
    #[cfg(feature = "fault-injection")]
    pub fn apply_while_restoring_for_fault_injection(&mut self) {
        self.ignore_pending_restore = true;
    }

    /// Whether the fault above is injected.
    pub(super) fn ignores_pending_restore(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        return self.ignore_pending_restore;
        #[cfg(not(feature = "fault-injection"))]
        false
    }

    /// The snapshot from the leader being restored, if any.
    pub fn pending_restore(&self) -> Option<PendingRestore> {
        self.pending_restore
    }

    /// The latest snapshot's index and size when its bytes are held in
    /// memory: one the runtime may hand over with
    /// [`snapshot_stored`](Self::snapshot_stored) once it is on disk.
    pub fn snapshot_in_memory(&self) -> Option<(LogIndex, u64)> {
        self.snapshot
            .as_ref()
            .filter(|s| s.data.in_memory())
            .map(|s| (s.meta.last_index, s.data.len()))
    }

    /// Switches `peer` to receiving the snapshot.
    pub(super) fn start_snapshot(&mut self, peer: NodeId) {
        let last_index = self
            .snapshot
            .as_ref()
            .expect("compacted logs have a snapshot")
            .meta
            .last_index;
        let progress = self.progress.get_mut(&peer).expect("a replica");
        progress.inflight.clear();
        progress.state = ReplicationState::Snapshot {
            last_index,
            offset: 0,
            paused: false,
        };
        self.send_snapshot_chunk(peer);
    }

    /// Sends the next chunk to `peer`.
    pub(super) fn send_snapshot_chunk(&mut self, peer: NodeId) {
        let snapshot = self
            .snapshot
            .as_ref()
            .expect("compacted logs have a snapshot");
        let progress = self.progress.get_mut(&peer).expect("a replica");
        let ReplicationState::Snapshot {
            last_index,
            offset,
            paused,
        } = &mut progress.state
        else {
            unreachable!("only called while sending a snapshot")
        };
        if *last_index != snapshot.meta.last_index {
            // A newer snapshot replaced the one being sent: start over.
            *last_index = snapshot.meta.last_index;
            *offset = 0;
        }
        *paused = true;
        let total_bytes = snapshot.data.len();
        let start = (*offset).min(total_bytes);
        let end = start.saturating_add(self.config.snapshot_chunk_bytes_max as u64);
        let message = RaftMessage::InstallSnapshot {
            term: self.term,
            meta: snapshot.meta.clone(),
            offset: start,
            total_bytes,
            data: snapshot.data.read(start, end),
        };
        self.send(peer, message);
    }

    /// A follower confirmed `received_bytes` of the snapshot at `last_index`.
    pub(super) fn handle_install_snapshot_response(
        &mut self,
        from: NodeId,
        last_index: LogIndex,
        received: u64,
    ) {
        if self.role != Role::Leader {
            return;
        }
        self.record_contact(from);
        let Some(progress) = self.progress.get_mut(&from) else {
            return;
        };
        if let ReplicationState::Snapshot {
            last_index: sending,
            offset,
            paused,
        } = &mut progress.state
        {
            if *sending == last_index {
                *offset = received;
                *paused = false;
                self.send_snapshot_chunk(from);
            }
        }
    }

    /// A chunk of the leader's snapshot.
    pub(super) fn handle_install_snapshot(
        &mut self,
        from: NodeId,
        meta: SnapshotMeta,
        offset: u64,
        total_bytes: u64,
        data: Vec<u8>,
    ) {
        self.note_leader(from);
        if meta.last_index <= self.commit {
            // Already have everything it covers.
            self.send_append_success(from, self.commit);
            return;
        }
        if total_bytes > self.config.snapshot_bytes_max {
            // Refuse loudly by never confirming; the operator must raise the
            // limit. Nothing of ours is touched.
            return;
        }
        let fresh = offset == 0
            && self
                .incoming_snapshot
                .as_ref()
                .is_none_or(|s| s.meta != meta || s.data.len() as u64 != 0);
        if fresh {
            self.incoming_snapshot = Some(IncomingSnapshot {
                meta: meta.clone(),
                total_bytes,
                data: Vec::new(),
            });
        }
        let Some(incoming) = self.incoming_snapshot.as_mut().filter(|s| s.meta == meta) else {
            self.send(
                from,
                RaftMessage::InstallSnapshotResponse {
                    term: self.term,
                    last_index: meta.last_index,
                    received_bytes: 0,
                },
            );
            return;
        };
        if incoming.data.len() as u64 == offset
            && offset + data.len() as u64 <= incoming.total_bytes
        {
            incoming.data.extend_from_slice(&data);
        }
        let received = incoming.data.len() as u64;
        if received < incoming.total_bytes {
            self.send(
                from,
                RaftMessage::InstallSnapshotResponse {
                    term: self.term,
                    last_index: meta.last_index,
                    received_bytes: received,
                },
            );
            return;
        }
        let incoming = self.incoming_snapshot.take().expect("complete");
        self.install_snapshot(Snapshot {
            meta: incoming.meta,
            data: SnapshotData::from(incoming.data),
        });
        self.send_append_success(from, meta.last_index);
    }

    /// Replaces this follower's state with a complete snapshot.
    fn install_snapshot(&mut self, snapshot: Snapshot) {
        let last = snapshot.meta.last_index;
        assert!(
            last > self.commit,
            "only snapshots ahead of us are installed"
        );
        self.log.compact(&snapshot.meta);
        if self.restores_in_background {
            // The application's state stays where it was until it has
            // restored this one, even when this one supersedes another it
            // is still restoring.
            let state_at = self.applied_index();
            self.pending_restore = Some(PendingRestore {
                index: last,
                state_at,
            });
        }
        self.commit = last;
        self.applied = last;
        self.hard_state_dirty = true;
        self.snapshot_to_persist = Some(snapshot.clone());
        self.pending_output
            .push(RaftOutput::Restore(snapshot.clone()));
        self.snapshot = Some(snapshot);
        self.refresh_cluster_from_log();
    }
}

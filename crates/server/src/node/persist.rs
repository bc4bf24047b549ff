//! Writing and fsyncing the log, on the event loop or on a blocking
//! thread, and telling the member what the disk now holds.

use super::{Node, NodeError};
use bellwether_core::raft::{RaftPersist, SnapshotMeta};
use bellwether_member::DurableWatermark;
use bellwether_storage::{Storage, StorageError, WalStorage};

impl Node {
    /// Writes and fsyncs `persist` on this thread.
    pub(super) fn persist_here(&mut self, persist: RaftPersist) -> Result<(), NodeError> {
        let repair = self.member.raft().repair();
        let wal = self
            .wal
            .as_mut()
            .expect("the log is back after every fsync");
        note_repair(wal, repair);
        persist_to(wal, persist, None).map_err(|error| NodeError::Persist {
            path: self.config.data_dir.display().to_string(),
            error,
        })?;
        let durable = watermark_of(wal);
        self.member.persisted(durable, true);
        self.snapshot_off_memory();
        self.delete_set_aside();
        Ok(())
    }

    /// Deletes the files the log set aside (covered segments, replaced
    /// snapshots) on a blocking thread: deleting a GiB of segments took
    /// about 300 ms, which on the loop (or in the persist it awaits) made
    /// a leader at 5 million keys lapse.
    fn delete_set_aside(&mut self) {
        let Some(wal) = self.wal.as_mut() else {
            return;
        };
        let doomed = wal.take_set_aside();
        if doomed.is_empty() {
            return;
        }
        tokio::task::spawn_blocking(move || {
            for path in doomed {
                if let Err(error) = std::fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), %error, "cannot delete a file the log set aside; the next start deletes it");
                }
            }
        });
    }

    /// Once the log holds the core's latest snapshot in a synced file (one
    /// from the leader, saved in the log's order, or the one recovered at
    /// start), the core reads it from there (see `Node::snapshot_on_disk`).
    pub(super) fn snapshot_off_memory(&mut self) {
        let Some((index, bytes)) = self.member.raft().snapshot_in_memory() else {
            return;
        };
        let Some(meta) = self
            .wal
            .as_ref()
            .and_then(|wal| wal.snapshot_meta().cloned())
            .filter(|meta| meta.last_index == index)
        else {
            return;
        };
        let path = self.snapshot_writer.path_of(index);
        self.snapshot_on_disk(&path, &meta, bytes);
    }

    /// Starts writing and fsyncing `persist` on a blocking thread, with the
    /// log lent to it, after recording the snapshot `record` written beside
    /// it. The runtime's other tasks, the gRPC services among them, keep
    /// running meanwhile, and requests that arrive wait in the queue for
    /// the next batch (group commit).
    pub(super) fn start_persist(
        &mut self,
        persist: RaftPersist,
        record: Option<SnapshotMeta>,
    ) -> tokio::task::JoinHandle<PersistDone> {
        let mut wal = self.wal.take().expect("the log is back after every fsync");
        note_repair(&mut wal, self.member.raft().repair());
        tokio::task::spawn_blocking(move || {
            let result = persist_to(&mut wal, persist, record);
            (wal, result)
        })
    }

    /// Waits for [`Node::start_persist`] to finish and takes the log back.
    pub(super) async fn finish_persist(
        &mut self,
        syncing: tokio::task::JoinHandle<PersistDone>,
    ) -> Result<(), NodeError> {
        let (wal, result) = syncing.await.expect("persisting does not panic");
        let durable = watermark_of(&wal);
        self.wal = Some(wal);
        result.map_err(|error| NodeError::Persist {
            path: self.config.data_dir.display().to_string(),
            error,
        })?;
        self.member.persisted(durable, false);
        self.snapshot_off_memory();
        self.delete_set_aside();
        Ok(())
    }
}

/// Carries the core's repair into the promise record written at the next
/// sync, and says so once when it ends.
fn note_repair(wal: &mut WalStorage, repair: Option<bellwether_core::raft::Repair>) {
    if wal.repair().is_some() && repair.is_none() {
        tracing::warn!(
            "repair complete: this member's log again holds everything it had acknowledged; it votes and campaigns normally"
        );
    }
    wal.set_repair(repair);
}

/// What a blocking persist hands back: the log, and whether it worked.
pub(super) type PersistDone = (WalStorage, Result<(), bellwether_storage::StorageError>);

/// What `wal` holds once its staged writes are synced: its last index and
/// hard state (the storage answers both "synced or not"; called only after
/// an fsync, or at start, when nothing is staged).
pub(super) fn watermark_of(wal: &WalStorage) -> DurableWatermark {
    DurableWatermark {
        last_index: wal.last_index(),
        hard_state: wal.hard_state(),
    }
}

/// Writes `persist` to the log, after recording this member's own
/// snapshot `record` if one was written since the last persist. A snapshot
/// from the leader, saved in the log's order, deletes the segments it
/// covers too: without that, a member's log only shrank when it restarted.
pub(super) fn persist_to(
    wal: &mut WalStorage,
    persist: RaftPersist,
    record: Option<SnapshotMeta>,
) -> Result<(), StorageError> {
    if let Some(written) = record {
        wal.record_snapshot(&written)?;
    }
    wal.persist(&persist)?;
    if let Some(snapshot) = &persist.snapshot {
        wal.compact(snapshot.meta.last_index)?;
    }
    Ok(())
}

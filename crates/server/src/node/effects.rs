//! Carrying out the member's effects: answers to clients, forwarding
//! messages, and the snapshot jobs that run on blocking threads.

use super::Node;
use crate::member_calls::IncomingCall;
use crate::peer_message::PeerMessage;
use bellwether_core::raft::{SnapshotData, SnapshotMeta};
use bellwether_core::LogIndex;
use bellwether_member::{Answer, DecodedSnapshot, Effect, SnapshotJob};
use bellwether_storage::{
    RealFileSystem, SnapshotFileData, SnapshotStream, SnapshotWriter, StorageError,
};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio::sync::oneshot;

/// Streams the snapshot at `index` that `job` encodes into a new file
/// beside the log; the file is finished once the member compacts with it.
pub(crate) fn stream_snapshot(
    writer: &SnapshotWriter,
    index: LogIndex,
    job: SnapshotJob,
) -> Result<SnapshotStream<RealFileSystem>, StorageError> {
    let mut stream = writer.stream(index)?;
    job(&mut stream).map_err(|error| StorageError::Io {
        operation: "write",
        path: stream.temp_path(),
        source: error,
    })?;
    stream.seal_data()?;
    Ok(stream)
}

/// A snapshot being written beside the log on a blocking thread.
#[derive(Debug)]
pub(crate) struct WritingSnapshot {
    /// When the write began, for the log line that says how long it took.
    started: Instant,
    /// What it covers and its size, to open the file once written.
    meta: SnapshotMeta,
    /// See `meta`.
    bytes: u64,
    /// Where the outcome arrives: the file's path, or why it failed.
    written: oneshot::Receiver<Result<PathBuf, StorageError>>,
}

/// A snapshot from the leader being decoded on a blocking thread, while
/// the loop goes on answering the leader and committed entries wait.
#[derive(Debug)]
pub(crate) struct RestoringSnapshot {
    /// When the decoding began, for the log line that says how long it
    /// took.
    started: Instant,
    /// The snapshot's last index.
    index: LogIndex,
    /// Where the decoded state arrives.
    decoded: oneshot::Receiver<DecodedSnapshot>,
}

impl Node {
    /// The snapshot for `meta`, of `bytes` bytes, is in the synced file at
    /// `path`: the core reads the chunks it sends lagging followers from
    /// there and drops its copy in memory, which was a second image of the
    /// whole state. A file that cannot be opened leaves the copy where it
    /// is, with a warning.
    pub(super) fn snapshot_on_disk(&mut self, path: &Path, meta: &SnapshotMeta, bytes: u64) {
        match SnapshotFileData::open(path, meta, bytes) {
            Ok(data) => {
                self.member
                    .snapshot_stored(meta.last_index, std::sync::Arc::new(data));
                tracing::debug!(
                    index = meta.last_index.0,
                    bytes,
                    "snapshot: sent to followers from its file from now on"
                );
            }
            Err(error) => tracing::warn!(
                %error,
                "snapshot: its file cannot be opened; the member keeps it in memory"
            ),
        }
    }

    /// Carries out the effects the member queued, in order.
    pub(super) fn carry_out_effects(&mut self) {
        while let Some(effect) = self.member.next_effect() {
            match effect {
                Effect::Answer(Answer::Write(reply, result)) => {
                    let _ = reply.send(result);
                }
                Effect::Answer(Answer::Read(reply, result)) => {
                    let _ = reply.send(result);
                }
                Effect::Forward(to, forward) => {
                    let message = PeerMessage::Forward(forward);
                    let unsent = match self.outbound.get(&to) {
                        Some(queue) => queue.try_send(message).err().map(|e| e.into_inner()),
                        None => Some(message),
                    };
                    if let Some(PeerMessage::Forward(forward)) = unsent {
                        self.member.forward_unsent(to, forward);
                    }
                }
                Effect::Call {
                    from,
                    request,
                    body,
                } => {
                    let call = IncomingCall {
                        from,
                        request,
                        body,
                    };
                    if self.calls.try_send(call).is_err() {
                        self.member.refuse_call(from, request);
                    }
                }
                Effect::ProposalApplied { proposed_at } => {
                    let waited = self.now().saturating_sub(proposed_at);
                    self.metrics
                        .proposal_latency
                        .observe_us(waited.as_micros() as u64);
                }
                Effect::EncodeSnapshot { index, job } => {
                    tracing::info!(
                        index = index.0,
                        "snapshot: streaming the store into its file on a blocking thread"
                    );
                    // A stream left from a snapshot the member dropped (one
                    // from the leader was restored meanwhile).
                    if let Some(stream) = self.encoded_stream.take() {
                        let _ = std::fs::remove_file(stream.temp_path());
                    }
                    let writer = self.snapshot_writer.clone();
                    let (done, encoded) = oneshot::channel();
                    tokio::task::spawn_blocking(move || {
                        let _ = done.send(stream_snapshot(&writer, index, job));
                    });
                    self.encoding_snapshot = Some((Instant::now(), encoded));
                }
                Effect::RestoreSnapshot { index, job } => {
                    tracing::info!(
                        index = index.0,
                        "snapshot: decoding the leader's on a blocking thread"
                    );
                    let (done, decoded) = oneshot::channel();
                    tokio::task::spawn_blocking(move || {
                        let _ = done.send(job());
                    });
                    // One still decoding is superseded: the member drops
                    // what it decodes.
                    self.restoring_snapshot = Some(RestoringSnapshot {
                        started: Instant::now(),
                        index,
                        decoded,
                    });
                }
                Effect::SnapshotDropped { index } => {
                    let ours = self.encoded_stream.as_ref().map(|s| s.index()) == Some(index);
                    if let Some(stream) = self.encoded_stream.take_if(|_| ours) {
                        let _ = std::fs::remove_file(stream.temp_path());
                        tracing::info!(
                            index = index.0,
                            "snapshot: dropped (the leader's, restored meanwhile, covers more); \
                             its file is deleted"
                        );
                    }
                }
                Effect::WriteSnapshot(snapshot) if !snapshot.data.in_memory() => {
                    let stream = self
                        .encoded_stream
                        .take()
                        .filter(|s| s.index() == snapshot.meta.last_index)
                        .expect("a snapshot in a file was streamed into it");
                    tracing::info!(
                        index = snapshot.meta.last_index.0,
                        bytes = snapshot.data.len(),
                        "snapshot: syncing its file beside the log"
                    );
                    let bytes_max = self.snapshot_writer.bytes_max();
                    let (done, written) = oneshot::channel();
                    let meta = snapshot.meta.clone();
                    tokio::task::spawn_blocking(move || {
                        let _ = done.send(stream.finish(&meta, bytes_max));
                    });
                    self.writing_snapshot = Some(WritingSnapshot {
                        started: Instant::now(),
                        meta: snapshot.meta.clone(),
                        bytes: snapshot.data.len(),
                        written,
                    });
                }
                Effect::WriteSnapshot(snapshot) => {
                    tracing::info!(
                        index = snapshot.meta.last_index.0,
                        bytes = snapshot.data.len(),
                        "snapshot: writing it beside the log"
                    );
                    let writer = self.snapshot_writer.clone();
                    let (done, written) = oneshot::channel();
                    let meta = snapshot.meta.clone();
                    let bytes = snapshot.data.len();
                    tokio::task::spawn_blocking(move || {
                        let _ = done.send(writer.write(&snapshot));
                    });
                    self.writing_snapshot = Some(WritingSnapshot {
                        started: Instant::now(),
                        meta,
                        bytes,
                        written,
                    });
                }
            }
        }
    }

    /// Hands the member the snapshot jobs that finished. A snapshot that
    /// could not be written (a full disk, an IO error, one over the log's
    /// size bound) stops the member at its next batch, as a failed write
    /// to its log does: it must not run on with a log it can no longer
    /// compact.
    pub(super) fn collect_snapshot_jobs(&mut self) {
        if let Some(restoring) = &mut self.restoring_snapshot {
            match restoring.decoded.try_recv() {
                Ok(decoded) => {
                    let restoring = self.restoring_snapshot.take().expect("matched above");
                    let ms = restoring.started.elapsed().as_secs_f64() * 1000.0;
                    self.member.snapshot_decoded(restoring.index, decoded);
                    tracing::info!(
                        index = restoring.index.0,
                        ms,
                        "snapshot: the leader's is restored; applying again"
                    );
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
                Err(oneshot::error::TryRecvError::Closed) => {
                    panic!("the leader's snapshot could not be decoded (its job panicked, above)")
                }
            }
        }
        if let Some((started, encoded)) = &mut self.encoding_snapshot {
            match encoded.try_recv() {
                Ok(outcome) => {
                    let ms = started.elapsed().as_secs_f64() * 1000.0;
                    self.encoding_snapshot = None;
                    match outcome.and_then(|stream| Ok((stream.data()?, stream))) {
                        Ok((data, stream)) => {
                            tracing::info!(bytes = stream.data_len(), ms, "snapshot: encoded");
                            self.encoded_stream = Some(stream);
                            self.member
                                .snapshot_encoded(SnapshotData::Stored(std::sync::Arc::new(data)));
                        }
                        Err(error) => {
                            tracing::error!(ms, %error, "snapshot: streaming it into its file failed");
                            self.snapshot_failed = Some(error);
                        }
                    }
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
                Err(oneshot::error::TryRecvError::Closed) => {
                    panic!("encoding a snapshot does not panic")
                }
            }
        }
        if let Some(writing) = &mut self.writing_snapshot {
            match writing.written.try_recv() {
                Ok(outcome) => {
                    let writing = self.writing_snapshot.take().expect("matched above");
                    let ms = writing.started.elapsed().as_secs_f64() * 1000.0;
                    match &outcome {
                        Ok(_) => tracing::info!(ms, "snapshot: written and synced"),
                        Err(error) => tracing::error!(ms, %error, "snapshot: the write failed"),
                    }
                    match outcome {
                        Ok(path) => {
                            self.member.snapshot_written();
                            self.snapshot_on_disk(&path, &writing.meta, writing.bytes);
                        }
                        Err(error) => self.snapshot_failed = Some(error),
                    }
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
                Err(oneshot::error::TryRecvError::Closed) => {
                    panic!("writing a snapshot does not panic")
                }
            }
        }
    }
}

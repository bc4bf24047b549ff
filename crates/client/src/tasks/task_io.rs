//! [`TaskIo`]: a worker's reads of its tasks and writes of their results,
//! batched ([`Batcher`]) so that under load many go in one txn.
//!
//! A batch of results is one txn guarded by every task's assignment token;
//! if any token is stale the whole txn changes nothing, and each result is
//! then tried alone, so a stale one is refused without holding back the
//! others.

use super::batcher::Batcher;
use super::layout::Layout;
use super::modified_at;
use super::queue::Queue;
use super::record::{TaskRecord, TaskState};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys;
use bellwether_api::etcdserverpb as pb;
use std::time::Duration;

/// Tasks read per txn, at most (two reads each; etcd allows 128).
const READS_PER_TXN: usize = 60;

/// Results written per txn, at most (up to three writes each).
const REPORTS_PER_TXN: usize = 40;

/// Bytes of results written per txn, about (etcd refuses requests over
/// 1.5 MiB).
const REPORT_TXN_BYTES_MAX: usize = 1024 * 1024;

/// Pause after a failed txn before it is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// A task's record and payload, read for assignment (id, token).
pub(crate) type ReadTask = Option<(TaskRecord, Vec<u8>)>;

/// One result to write.
pub(crate) struct Report {
    /// The worker whose inbox held the assignment.
    pub worker: String,
    /// The task.
    pub id: String,
    /// The assignment token.
    pub token: i64,
    /// The record to write.
    pub next: TaskRecord,
}

/// The batched reads and writes of one worker.
#[derive(Clone)]
pub(crate) struct TaskIo {
    /// Reads of (id, token).
    reads: Batcher<(String, i64), ReadTask>,
    /// Result writes; the answer says whether the result was accepted.
    reports: Batcher<Report, bool>,
}

impl TaskIo {
    /// Starts the batching tasks for `queue`.
    pub(crate) fn start(queue: &Queue) -> TaskIo {
        let (client, layout) = (queue.client().clone(), queue.layout().clone());
        let reads = Batcher::start(READS_PER_TXN, move |batch: Vec<(String, i64)>| {
            let (client, layout) = (client.clone(), layout.clone());
            async move { read_tasks(&client, &layout, batch).await }
        });
        let (client, layout) = (queue.client().clone(), queue.layout().clone());
        let reports = Batcher::start(REPORTS_PER_TXN, move |batch: Vec<Report>| {
            let (client, layout) = (client.clone(), layout.clone());
            async move { write_reports(&client, &layout, batch).await }
        });
        TaskIo { reads, reports }
    }

    /// The task's record and payload, if assignment `token` is still
    /// current.
    pub(crate) async fn read(&self, id: &str, token: i64) -> ReadTask {
        self.reads.call((id.to_string(), token)).await.flatten()
    }

    /// Writes a result under its token; returns whether it was accepted.
    pub(crate) async fn report(&self, report: Report) -> bool {
        self.reports.call(report).await.unwrap_or(false)
    }
}

/// Runs `txn`, again while the cluster is unavailable; fails on a
/// refusal (which repeating would not change).
async fn send(client: &Client, txn: &pb::TxnRequest) -> Result<pb::TxnResponse> {
    loop {
        match client.txn(txn.clone()).await {
            Err(Error::Unavailable { .. }) => {
                tracing::debug!("tasks worker: the cluster is unavailable; trying again");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            answered => return answered,
        }
    }
}

/// Runs a read-only `txn` until it is answered.
async fn until_answered(client: &Client, txn: pb::TxnRequest) -> pb::TxnResponse {
    loop {
        match send(client, &txn).await {
            Ok(response) => return response,
            Err(error) => {
                tracing::warn!(%error, "tasks worker: a read failed; trying again");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// Reads every (id, token) of `batch`: first serializably, from the member
/// the client talks to (no ReadIndex round; that member delivered the
/// assignment, so it has almost always applied it), then linearizably for
/// the tasks that member had not caught up with.
async fn read_tasks(client: &Client, layout: &Layout, batch: Vec<(String, i64)>) -> Vec<ReadTask> {
    let mut reads = read_batch(client, layout, &batch, true).await;
    let behind: Vec<usize> = (0..reads.len())
        .filter(|&i| matches!(reads[i], TaskRead::Behind))
        .collect();
    if !behind.is_empty() {
        let again: Vec<(String, i64)> = behind.iter().map(|&i| batch[i].clone()).collect();
        let current = read_batch(client, layout, &again, false).await;
        for (i, read) in behind.into_iter().zip(current) {
            reads[i] = read;
        }
    }
    reads
        .into_iter()
        .map(|read| match read {
            TaskRead::Current(record, payload) => Some((record, payload)),
            TaskRead::Gone | TaskRead::Behind => None,
        })
        .collect()
}

/// What one read found of an assignment.
enum TaskRead {
    /// The assignment is current: the task's record and payload.
    Current(TaskRecord, Vec<u8>),
    /// The task moved on (reassigned, ended) or is gone: nothing to run.
    Gone,
    /// A serializable read from a member that has not yet applied the
    /// assignment: read again, linearizably.
    Behind,
}

/// Reads every (id, token) of `batch` in one txn.
async fn read_batch(
    client: &Client,
    layout: &Layout,
    batch: &[(String, i64)],
    serializable: bool,
) -> Vec<TaskRead> {
    let get = |key: &[u8]| {
        let mut op = keys::get_op(key);
        if let Some(pb::request_op::Request::RequestRange(range)) = &mut op.request {
            range.serializable = serializable;
        }
        op
    };
    let success = batch
        .iter()
        .flat_map(|(id, _)| [get(&layout.task(id)), get(&layout.payload(id))])
        .collect();
    let read = pb::TxnRequest {
        compare: Vec::new(),
        success,
        failure: Vec::new(),
    };
    let response = until_answered(client, read).await;
    let mut values = response.responses.into_iter().map(|op| match op.response {
        Some(pb::response_op::Response::ResponseRange(range)) => range.kvs.into_iter().next(),
        _ => None,
    });
    batch
        .iter()
        .map(|(_, token)| {
            let record_kv = values.next().flatten();
            let payload = values
                .next()
                .flatten()
                .map(|kv| kv.value)
                .unwrap_or_default();
            // No record, or one older than the assignment: only a
            // serializable read can be behind it.
            let Some(record_kv) = record_kv.filter(|kv| kv.mod_revision >= *token) else {
                return if serializable {
                    TaskRead::Behind
                } else {
                    TaskRead::Gone
                };
            };
            if record_kv.mod_revision > *token {
                return TaskRead::Gone;
            }
            match TaskRecord::decode(&record_kv.value) {
                Ok(record) if record.meta.state == TaskState::Assigned => {
                    TaskRead::Current(record, payload)
                }
                _ => TaskRead::Gone,
            }
        })
        .collect()
}

/// The compare and writes of one report.
fn report_ops(layout: &Layout, report: &Report) -> (pb::Compare, Vec<pb::RequestOp>) {
    let encoded = report.next.encode();
    let mut writes = vec![
        keys::put_op(&layout.task(&report.id), &encoded, 0),
        keys::delete_op(&layout.inbox(&report.worker, &report.id)),
    ];
    if report.next.meta.state == TaskState::Dead {
        writes.push(keys::put_op(&layout.dead(&report.id), &encoded, 0));
    }
    (modified_at(&layout.task(&report.id), report.token), writes)
}

/// Writes `batch`: in txns of at most [`REPORT_TXN_BYTES_MAX`] bytes with
/// each task at most once (a worker's old and new session may both report
/// one task), and one at a time where such a txn fails.
async fn write_reports(client: &Client, layout: &Layout, batch: Vec<Report>) -> Vec<bool> {
    let mut accepted = vec![false; batch.len()];
    let mut chunk: Vec<usize> = Vec::new();
    let (mut bytes, mut ids) = (0, std::collections::BTreeSet::new());
    for (i, report) in batch.iter().enumerate() {
        let size = report.next.result.len() + 512;
        if !chunk.is_empty() && (bytes + size > REPORT_TXN_BYTES_MAX || ids.contains(&report.id)) {
            write_chunk(client, layout, &batch, &chunk, &mut accepted).await;
            chunk.clear();
            bytes = 0;
            ids.clear();
        }
        chunk.push(i);
        bytes += size;
        ids.insert(report.id.clone());
    }
    write_chunk(client, layout, &batch, &chunk, &mut accepted).await;
    accepted
}

/// Writes the reports `chunk` of `batch` in one txn, else one by one.
async fn write_chunk(
    client: &Client,
    layout: &Layout,
    batch: &[Report],
    chunk: &[usize],
    accepted: &mut [bool],
) {
    if chunk.is_empty() {
        return;
    }
    let mut txn = pb::TxnRequest::default();
    for i in chunk {
        let (compare, writes) = report_ops(layout, &batch[*i]);
        txn.compare.push(compare);
        txn.success.extend(writes);
    }
    match send(client, &txn).await {
        Ok(response) if response.succeeded => {
            for i in chunk {
                accepted[*i] = true;
            }
            return;
        }
        Ok(_) if chunk.len() == 1 => return,
        Ok(_) => {}
        Err(error) if chunk.len() > 1 => {
            tracing::debug!(%error, "tasks worker: a batch of results was refused; one by one");
        }
        Err(error) => {
            // The store refuses this result: record the attempt as failed
            // instead, so the task moves on rather than waiting forever.
            let report = &batch[chunk[0]];
            tracing::warn!(%error, task = report.id, "tasks worker: the result was refused");
            let failed = Report {
                worker: report.worker.clone(),
                id: report.id.clone(),
                token: report.token,
                next: report.next.without_result(&error.to_string()),
            };
            let (compare, writes) = report_ops(layout, &failed);
            let txn = pb::TxnRequest {
                compare: vec![compare],
                success: writes,
                failure: Vec::new(),
            };
            if let Err(error) = send(client, &txn).await {
                tracing::error!(%error, task = report.id, "tasks worker: not even the failure could be written");
            }
            return;
        }
    }
    for i in chunk {
        Box::pin(write_chunk(client, layout, batch, &[*i], accepted)).await;
    }
}

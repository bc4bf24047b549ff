//! [`TaskIo`]: a worker's reads of its tasks and writes of their results,
//! batched ([`Batcher`]) so that under load many go in one txn.
//!
//! A batch of results is one txn guarded by every task's assignment token;
//! if any token is stale the whole txn changes nothing, and each result is
//! then tried alone, so a stale one is refused without holding back the
//! others.

use super::batcher::Batcher;
use super::layout::Layout;
use super::leader::modified_at;
use super::queue::Queue;
use super::record::{TaskRecord, TaskState};
use crate::client::Client;
use crate::keys;
use bellwether_api::etcdserverpb as pb;
use std::time::Duration;

/// Tasks read per txn, at most (two reads each; etcd allows 128).
const READS_PER_TXN: usize = 60;

/// Results written per txn, at most (up to three writes each).
const REPORTS_PER_TXN: usize = 40;

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

/// Runs `txn` until it is answered (the reads and the token-guarded
/// writes here are safe to repeat).
async fn until_answered(client: &Client, txn: pb::TxnRequest) -> pb::TxnResponse {
    loop {
        match client.txn(txn.clone()).await {
            Ok(response) => return response,
            Err(error) => {
                tracing::debug!(%error, "tasks worker: a txn failed; trying again");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// Reads every (id, token) of `batch` in one txn.
async fn read_tasks(client: &Client, layout: &Layout, batch: Vec<(String, i64)>) -> Vec<ReadTask> {
    let success = batch
        .iter()
        .flat_map(|(id, _)| {
            [
                keys::get_op(&layout.task(id)),
                keys::get_op(&layout.payload(id)),
            ]
        })
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
            let record_kv = record_kv.filter(|kv| kv.mod_revision == *token)?;
            let record = TaskRecord::decode(&record_kv.value).ok()?;
            (record.meta.state == TaskState::Assigned).then_some((record, payload))
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

/// Writes `batch` in one txn, or one at a time if any token is stale.
async fn write_reports(client: &Client, layout: &Layout, batch: Vec<Report>) -> Vec<bool> {
    let mut txn = pb::TxnRequest::default();
    for report in &batch {
        let (compare, writes) = report_ops(layout, report);
        txn.compare.push(compare);
        txn.success.extend(writes);
    }
    if until_answered(client, txn).await.succeeded {
        return vec![true; batch.len()];
    }
    if batch.len() == 1 {
        return vec![false];
    }
    let mut accepted = Vec::with_capacity(batch.len());
    for report in &batch {
        let (compare, writes) = report_ops(layout, report);
        let txn = pb::TxnRequest {
            compare: vec![compare],
            success: writes,
            failure: Vec::new(),
        };
        accepted.push(until_answered(client, txn).await.succeeded);
    }
    accepted
}

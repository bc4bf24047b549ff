//! Leader-Followers over the etcd API: a durable task queue whose elected
//! worker assigns tasks to the others.
//!
//! Every worker registers with a session and campaigns to lead the queue.
//! The leader follows pending tasks and live workers and **pushes**
//! assignments, each in a txn guarded by its fencing token; an assignment's
//! token is the revision that wrote it. A worker runs the task and reports
//! in a txn guarded by that token, so a result for an assignment that is no
//! longer current (the task moved after the worker was thought dead) is
//! refused and counted. When a worker's session ends, its tasks go to
//! others with one more attempt; a task out of attempts goes to the dead
//! letters with its history. When the leader dies another worker leads,
//! reads the state and carries on; tasks keep running where they are.
//!
//! A handler gets its task's [`Cancellation`], which fires when the
//! worker's session is lost, before the server can expire the lease and
//! the task move: a handler that stops within the session's extra margin
//! never runs at the same time as the task's next attempt.
//!
//! Groups fan out and in: once every member is done (or more failed than
//! allowed) the leader creates the group's aggregator task, at most once
//! (its create compares that it does not exist), with every member's
//! result as its payload.
//!
//! ```no_run
//! use bellwether_client::tasks::{Queue, Worker, WorkerOptions};
//! # async fn run() -> Result<(), bellwether_client::Error> {
//! let client = bellwether_client::Client::connect(["127.0.0.1:7201"])?;
//! let queue = Queue::new(&client, "thumbnails")?;
//! let id = queue.submit("cat.jpg").await?;
//! let worker = Worker::start(&queue, WorkerOptions::default(), |task| async move {
//!     Ok::<_, String>(format!("resized {}", String::from_utf8_lossy(&task.payload)).into_bytes())
//! });
//! let done = queue.result(&id).await?;
//! assert_eq!(done.result, b"resized cat.jpg");
//! worker.stop().await;
//! # Ok(())
//! # }
//! ```

mod batcher;
mod cancellation;
mod leader;
mod queue;
mod status;
mod task_io;
mod view;
mod worker;
pub mod worker_metrics;
mod worker_stats;

// The keys and records are the task-layout crate's, which a member reads
// too; the modules below use them as `super::layout` and `super::record`.
use bellwether_task_layout::{layout, record};

pub use bellwether_metrics::LatencyHistogram;
pub use bellwether_task_layout::{
    leader_prefix, state_prefix, DATA_BYTES_MAX, ID_BYTES_MAX, QUEUE_REGISTRY_PREFIX,
};
pub use bellwether_task_layout::{QueueStatus, WorkerLoad};
pub use cancellation::Cancellation;
pub use queue::{GroupOptions, Queue, SubmitOptions, Submitted};
pub use record::{
    Attempt, GroupInput, MemberResult, Retention, TaskMeta, TaskRecord, TaskState,
    MAX_ATTEMPTS_DEFAULT, MAX_ATTEMPTS_LIMIT, RETENTION_KEEP_DEFAULT,
};
pub use worker::{Task, Worker, WorkerHandle, WorkerOptions, CANCEL_MARGIN_DEFAULT};
pub use worker_stats::WorkerStats;

/// A compare that holds while `key` was last written at `revision`.
fn modified_at(key: &[u8], revision: i64) -> crate::pb::Compare {
    use crate::pb::compare::{CompareResult, CompareTarget, TargetUnion};
    crate::pb::Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Mod as i32,
        key: key.to_vec(),
        range_end: Vec::new(),
        target_union: Some(TargetUnion::ModRevision(revision)),
    }
}

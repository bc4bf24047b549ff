//! [`WorkerStats`]: what a task worker has done, counted where it happens
//! (the worker's runs and reports, and, while it leads the queue, the
//! leader's assignments), read by its logs, its metrics and tests.

use crate::LatencyHistogram;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// What a worker has done, for logs, metrics and tests.
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Handler runs started.
    pub executed: AtomicU64,
    /// Handler runs whose cancellation fired before they returned.
    pub cancelled: AtomicU64,
    /// Results accepted as done.
    pub done: AtomicU64,
    /// Failures accepted (retried or dead-lettered).
    pub failed: AtomicU64,
    /// Results refused: the task had moved to another assignment.
    pub refused: AtomicU64,
    /// Assignments skipped because they were no longer current on arrival.
    pub skipped: AtomicU64,
    /// As leader: first assignments written.
    pub assigned: AtomicU64,
    /// As leader: tasks moved from a worker that was gone.
    pub reassigned: AtomicU64,
    /// As leader: tasks moved to the dead letters.
    pub dead_lettered: AtomicU64,
    /// As leader: group aggregators created.
    pub aggregated: AtomicU64,
    /// As leader: finished tasks removed past the queue's retention.
    pub removed: AtomicU64,
    /// Sessions started (1 unless sessions were lost).
    pub sessions: AtomicU64,
    /// Whether this worker leads the queue now.
    pub leading: AtomicBool,
    /// As leader: a waiting task seen → its assignment written.
    pub assignment_latency: LatencyHistogram,
    /// As leader: a worker seen gone → its task moved.
    pub reassignment_latency: LatencyHistogram,
    /// As leader: a group's last member seen done → its aggregator created.
    pub group_completion_latency: LatencyHistogram,
}

//! [`QueueStatus`]: one consistent look at a queue, for `bellwether tasks
//! status` and dashboards, counted from the queue's keys read at one
//! revision.

use crate::layout::{Layout, StateKey};
use crate::record::{Retention, TaskRecord, TaskState, WorkerMeta};
use serde::Serialize;
use std::collections::BTreeMap;

/// Dead letters listed by name in a status, at most.
pub const DEAD_LETTERS_LISTED_MAX: usize = 100;

/// A live worker and what it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerLoad {
    /// The worker's name.
    pub name: String,
    /// Tasks it runs at once, at most (0 while it drains).
    pub concurrency: u32,
    /// Tasks assigned to it now.
    pub in_flight: u64,
}

/// A queue at one revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueStatus {
    /// The queue's name.
    pub queue: String,
    /// The revision the status was read at.
    pub revision: i64,
    /// Tasks by state: pending, assigned, failed, done, dead.
    pub depth: BTreeMap<String, u64>,
    /// Live workers.
    pub workers: Vec<WorkerLoad>,
    /// The leading worker's name.
    pub leader: Option<String>,
    /// The leader's fencing token.
    pub leader_token: Option<i64>,
    /// Dead-lettered task ids (the first [`DEAD_LETTERS_LISTED_MAX`]).
    pub dead_letters: Vec<String>,
    /// Tasks assigned to a worker that is gone, waiting to move.
    pub orphaned: u64,
    /// Groups submitted, and those whose aggregator exists.
    pub groups: u64,
    /// Groups aggregated.
    pub groups_aggregated: u64,
    /// How many finished tasks the queue keeps, and how long: the done
    /// and dead counts in `depth` stay near `keep` once the history is
    /// longer.
    pub retention: Retention,
}

impl QueueStatus {
    /// The status of queue `queue` from its keys under `Q/s/` (key, value)
    /// read at `revision`, and its leader (value, token); `None` when the
    /// keys hold no queue marker. The bellwether server uses this for its
    /// dashboard and metrics, reading its own store.
    pub fn from_keys<'a>(
        queue: &str,
        revision: i64,
        state_keys: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        leader: Option<(String, i64)>,
    ) -> Option<QueueStatus> {
        let layout = Layout::new(queue).ok()?;
        let mut tally = StateTally::new();
        for (key, value) in state_keys {
            match layout.parse_state(key) {
                Some(StateKey::Task(id)) => tally.count_task(id, value),
                Some(StateKey::Worker(name)) => tally.count_worker(name, value),
                Some(StateKey::Group(_)) => tally.groups += 1,
                Some(StateKey::Marker) => tally.marked = true,
                Some(StateKey::Retention) => {
                    tally.retention = serde_json::from_slice(value).unwrap_or_default();
                }
                None => {}
            }
        }
        if !tally.marked {
            return None;
        }
        let orphaned = tally.settle_assignments();
        Some(QueueStatus {
            queue: queue.to_string(),
            revision,
            depth: tally.depth,
            workers: tally.workers.into_values().collect(),
            leader: leader.as_ref().map(|(value, _)| value.clone()),
            leader_token: leader.map(|(_, token)| token),
            dead_letters: tally.dead_letters,
            orphaned,
            groups: tally.groups,
            groups_aggregated: tally.aggregated,
            retention: tally.retention,
        })
    }
}

/// What [`QueueStatus::from_keys`] has counted so far of a queue's state
/// keys, one key at a time.
struct StateTally {
    /// Whether the queue marker was seen (else there is no queue).
    marked: bool,
    /// Tasks by state name, every state present from the start.
    depth: BTreeMap<String, u64>,
    /// Live workers by name.
    workers: BTreeMap<String, WorkerLoad>,
    /// Tasks assigned, by the worker named in them (live or gone).
    assigned_to: BTreeMap<String, u64>,
    /// Dead-lettered task ids, the first [`DEAD_LETTERS_LISTED_MAX`].
    dead_letters: Vec<String>,
    /// Groups submitted.
    groups: u64,
    /// Aggregator tasks, one per group aggregated.
    aggregated: u64,
    /// The queue's retention settings.
    retention: Retention,
}

impl StateTally {
    /// Nothing counted yet: every state at 0, so that a status lists them
    /// all.
    fn new() -> Self {
        let depth = [
            TaskState::Pending,
            TaskState::Assigned,
            TaskState::Failed,
            TaskState::Done,
            TaskState::Dead,
        ]
        .iter()
        .map(|s| (s.name().to_string(), 0))
        .collect();
        StateTally {
            marked: false,
            depth,
            workers: BTreeMap::new(),
            assigned_to: BTreeMap::new(),
            dead_letters: Vec::new(),
            groups: 0,
            aggregated: 0,
            retention: Retention::default(),
        }
    }

    /// Counts task `id` stored as `value`; an unreadable record is
    /// skipped.
    fn count_task(&mut self, id: String, value: &[u8]) {
        let Ok(record) = TaskRecord::decode(value) else {
            return;
        };
        *self
            .depth
            .entry(record.meta.state.name().to_string())
            .or_default() += 1;
        if let Some(worker) = record.meta.worker {
            *self.assigned_to.entry(worker).or_default() += 1;
        }
        if record.meta.state == TaskState::Dead && self.dead_letters.len() < DEAD_LETTERS_LISTED_MAX
        {
            self.dead_letters.push(id.clone());
        }
        if id.starts_with(&Layout::aggregator_id("")) {
            self.aggregated += 1;
        }
    }

    /// Counts live worker `name` registered with `value`; unreadable
    /// settings count as concurrency 0.
    fn count_worker(&mut self, name: String, value: &[u8]) {
        let concurrency = serde_json::from_slice::<WorkerMeta>(value).map_or(0, |m| m.concurrency);
        self.workers.insert(
            name.clone(),
            WorkerLoad {
                name,
                concurrency,
                in_flight: 0,
            },
        );
    }

    /// Once every key is counted: gives each live worker its tasks in
    /// flight, and returns how many tasks are assigned to workers that are
    /// gone.
    fn settle_assignments(&mut self) -> u64 {
        let mut orphaned = 0;
        for (worker, count) in std::mem::take(&mut self.assigned_to) {
            match self.workers.get_mut(&worker) {
                Some(load) => load.in_flight = count,
                None => orphaned += count,
            }
        }
        orphaned
    }
}

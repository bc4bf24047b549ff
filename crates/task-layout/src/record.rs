//! The values stored for tasks, workers and groups, and their encoding.
//!
//! A task record is its metadata as one line of JSON, then a newline, then
//! the result's bytes as they are: results need no escaping, and JSON never
//! holds a raw newline, so the first newline ends the metadata.

use crate::{LayoutError as Error, Result};
use serde::{Deserialize, Serialize};

/// The attempts a task gets by default, worker deaths included.
pub const MAX_ATTEMPTS_DEFAULT: u32 = 5;

/// The most attempts a task may be given.
pub const MAX_ATTEMPTS_LIMIT: u32 = 1000;

/// The longest failure message kept in a task's history, in bytes.
pub const ERROR_BYTES_MAX: usize = 1024;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Waiting for the leader to assign it.
    Pending,
    /// Assigned to a worker, which runs it.
    Assigned,
    /// Its last attempt failed and attempts remain: waiting to be assigned
    /// again.
    Failed,
    /// Done; the result is accepted. Final.
    Done,
    /// Out of attempts: in the dead-letter set with its history. Final.
    Dead,
}

impl TaskState {
    /// Whether the task will change no more.
    pub fn is_final(self) -> bool {
        matches!(self, TaskState::Done | TaskState::Dead)
    }

    /// Whether the leader should assign it.
    pub fn is_waiting(self) -> bool {
        matches!(self, TaskState::Pending | TaskState::Failed)
    }

    /// The state's name, as `status` prints it.
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Assigned => "assigned",
            TaskState::Failed => "failed",
            TaskState::Done => "done",
            TaskState::Dead => "dead",
        }
    }
}

/// How one assignment ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The attempt's number, from 1.
    pub attempt: u32,
    /// The worker it was assigned to.
    pub worker: String,
    /// The assignment token: the revision that wrote the assignment.
    pub token: i64,
    /// `done`, `failed: …`, or `worker lost`.
    pub outcome: String,
}

/// A task's metadata (the first line of its record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskMeta {
    /// The state.
    pub state: TaskState,
    /// Assignments made so far (the current one included).
    pub attempt: u32,
    /// Assignments allowed before the task is dead-lettered.
    pub max_attempts: u32,
    /// The worker it is assigned to, while assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// The group it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The token of the assignment whose result was accepted (when done)
    /// or that ended it (when dead).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub token: i64,
    /// Every assignment that ended, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Attempt>,
    /// When it finished (done or dead), in milliseconds since the Unix
    /// epoch by the clock of the process that finished it; 0 while it is
    /// not finished, and in records written before this field existed.
    /// The queue's age limit counts from it, so that a new leader does not
    /// restart the ages; a clock that is off moves when a task is removed,
    /// nothing else.
    #[serde(default, skip_serializing_if = "is_zero_ms")]
    pub finished_ms: u64,
}

/// Serde's test for an unset finish time.
fn is_zero_ms(value: &u64) -> bool {
    *value == 0
}

/// Now, in milliseconds since the Unix epoch (0 for a clock set before it).
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Serde's test for a zero token.
fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// A task's record: metadata and, once done, the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    /// The metadata.
    pub meta: TaskMeta,
    /// The result (done) or nothing.
    pub result: Vec<u8>,
}

impl TaskRecord {
    /// A new pending task.
    pub fn pending(max_attempts: u32, group: Option<String>) -> TaskRecord {
        TaskRecord {
            meta: TaskMeta {
                state: TaskState::Pending,
                attempt: 0,
                max_attempts,
                worker: None,
                group,
                token: 0,
                history: Vec::new(),
                finished_ms: 0,
            },
            result: Vec::new(),
        }
    }

    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(&self.meta).expect("task metadata serialises");
        bytes.push(b'\n');
        bytes.extend_from_slice(&self.result);
        bytes
    }

    /// Reads a stored record.
    pub fn decode(bytes: &[u8]) -> Result<TaskRecord> {
        let newline = bytes
            .iter()
            .position(|b| *b == b'\n')
            .ok_or(Error::Malformed("a task record without its metadata line"))?;
        let meta: TaskMeta = serde_json::from_slice(&bytes[..newline])
            .map_err(|_| Error::Malformed("a task record whose metadata is not valid"))?;
        Ok(TaskRecord {
            meta,
            result: bytes[newline + 1..].to_vec(),
        })
    }

    /// The record after the current assignment ended with `outcome`: the
    /// attempt goes into the history, and the task becomes `state`.
    pub fn ended(&self, token: i64, outcome: &str, state: TaskState) -> TaskRecord {
        let mut next = self.clone();
        let mut outcome = outcome.to_string();
        if outcome.len() > ERROR_BYTES_MAX {
            let mut cut = ERROR_BYTES_MAX;
            while !outcome.is_char_boundary(cut) {
                cut -= 1;
            }
            outcome.truncate(cut);
        }
        next.meta.history.push(Attempt {
            attempt: self.meta.attempt,
            worker: self.meta.worker.clone().unwrap_or_default(),
            token,
            outcome,
        });
        next.meta.state = state;
        next.meta.worker = None;
        next.meta.token = token;
        next.stamp_if_finished();
        next
    }

    /// Records now as the finish time, if the task is finished.
    pub fn stamp_if_finished(&mut self) {
        self.meta.finished_ms = if self.meta.state.is_final() {
            unix_ms_now()
        } else {
            0
        };
    }

    /// This ended record with its result dropped and the attempt counted
    /// as failed: for a result the store refused to take.
    pub fn without_result(&self, reason: &str) -> TaskRecord {
        let mut next = self.clone();
        next.result.clear();
        next.meta.state = if next.meta.attempt >= next.meta.max_attempts {
            TaskState::Dead
        } else {
            TaskState::Failed
        };
        if let Some(last) = next.meta.history.last_mut() {
            let mut outcome = format!("failed: the result could not be stored: {reason}");
            let mut cut = outcome.len().min(ERROR_BYTES_MAX);
            while !outcome.is_char_boundary(cut) {
                cut -= 1;
            }
            outcome.truncate(cut);
            last.outcome = outcome;
        }
        next.stamp_if_finished();
        next
    }

    /// The state a failed or abandoned assignment leads to.
    pub fn after_failure(&self) -> TaskState {
        if self.meta.attempt >= self.meta.max_attempts {
            TaskState::Dead
        } else {
            TaskState::Failed
        }
    }
}

/// A worker's registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerMeta {
    /// Tasks it runs at once, at most.
    pub concurrency: u32,
}

/// A group of tasks and what to do once they are all in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMeta {
    /// The member tasks' ids.
    pub tasks: Vec<String>,
    /// Failed (dead-lettered) members tolerated before the aggregator runs
    /// without waiting for the rest.
    pub failures_allowed: u32,
    /// The aggregator's own payload, given at submit.
    #[serde(default)]
    pub aggregator: String,
    /// The aggregator's attempts.
    pub max_attempts: u32,
}

/// What an aggregator task gets as its payload: the group and every
/// member's outcome, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupInput {
    /// The group's name.
    pub group: String,
    /// The payload given for the aggregator at submit.
    pub aggregator: String,
    /// One entry per member, in submit order.
    pub results: Vec<MemberResult>,
}

/// One member's outcome in a [`GroupInput`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberResult {
    /// The member's id.
    pub id: String,
    /// `done`, `dead`, or `unfinished` when the failure threshold ended the
    /// wait first.
    pub state: String,
    /// The result as text, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The result in hex, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_hex: Option<String>,
}

impl MemberResult {
    /// The entry for member `id` with `state` and `result`.
    pub fn new(id: &str, state: &str, result: &[u8]) -> MemberResult {
        let (text, hex) = match std::str::from_utf8(result) {
            Ok(text) => (Some(text.to_string()), None),
            Err(_) => (
                None,
                Some(result.iter().map(|b| format!("{b:02x}")).collect()),
            ),
        };
        MemberResult {
            id: id.to_string(),
            state: state.to_string(),
            result: text,
            result_hex: hex,
        }
    }

    /// The result's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        if let Some(text) = &self.result {
            return text.as_bytes().to_vec();
        }
        let hex = self.result_hex.as_deref().unwrap_or("");
        (0..hex.len() / 2)
            .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_with_any_result_bytes() {
        let mut record = TaskRecord::pending(3, Some("g".into()));
        record.result = b"line one\nline two\n\xff".to_vec();
        record.meta.state = TaskState::Done;
        let decoded = TaskRecord::decode(&record.encode()).unwrap();
        assert_eq!(decoded, record);
        assert!(TaskRecord::decode(b"no newline").is_err());
        assert!(TaskRecord::decode(b"{bad}\n").is_err());
    }

    #[test]
    fn an_ending_goes_into_the_history_and_attempts_run_out() {
        let mut record = TaskRecord::pending(2, None);
        record.meta.state = TaskState::Assigned;
        record.meta.attempt = 1;
        record.meta.worker = Some("w1".into());
        assert_eq!(record.after_failure(), TaskState::Failed);
        let failed = record.ended(40, &"x".repeat(5000), TaskState::Failed);
        assert_eq!(failed.meta.history.len(), 1);
        assert_eq!(failed.meta.history[0].token, 40);
        assert_eq!(failed.meta.history[0].outcome.len(), ERROR_BYTES_MAX);
        assert_eq!(failed.meta.worker, None);
        record.meta.attempt = 2;
        assert_eq!(record.after_failure(), TaskState::Dead);
    }

    #[test]
    fn member_results_keep_binary_bytes() {
        let entry = MemberResult::new("a", "done", &[0xff, 0x00]);
        assert_eq!(entry.result, None);
        assert_eq!(entry.bytes(), vec![0xff, 0x00]);
        assert_eq!(MemberResult::new("b", "done", b"ok").bytes(), b"ok");
    }
}

/// How many finished tasks a queue keeps, and for how long: its leader
/// removes the oldest finished tasks past either bound (record, payload,
/// dead letter), so a queue's store does not grow with its history.
/// Stored at `Q/s/retention`; a queue without it keeps
/// [`Retention::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Finished (done or dead) tasks kept, newest first; at least 1.
    pub keep: u64,
    /// Seconds a finished task is kept at most; 0 for no age limit. The
    /// age counts from the finish time in the task's record (by the clock
    /// of whoever finished it), or, for a record from before finish times,
    /// from when the leader saw it finished.
    #[serde(default)]
    pub max_age_seconds: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            keep: RETENTION_KEEP_DEFAULT,
            max_age_seconds: 0,
        }
    }
}

/// Finished tasks a queue keeps unless told otherwise: a history for
/// `status` and late `result` calls, at about 30 MiB of store for
/// kilobyte-sized tasks.
pub const RETENTION_KEEP_DEFAULT: u64 = 100_000;

impl Retention {
    /// Refuses a retention that would remove a task the moment it ends.
    pub fn check(&self) -> Result<()> {
        if self.keep == 0 {
            return Err(Error::InvalidArgument(
                "a queue keeps at least 1 finished task (--keep 1)".into(),
            ));
        }
        Ok(())
    }

    /// The age limit, if any.
    pub fn max_age(&self) -> Option<std::time::Duration> {
        (self.max_age_seconds > 0).then(|| std::time::Duration::from_secs(self.max_age_seconds))
    }
}

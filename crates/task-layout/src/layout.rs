//! Where a queue keeps what in the key space.
//!
//! A queue named `Q` owns every key under `Q/`:
//!
//! | key | value | written by |
//! |---|---|---|
//! | `Q/s/queue` | a marker: the queue exists | the first submit or worker |
//! | `__bellwether/queues/Q` | the queue's name, for tools to find it | the same |
//! | `Q/s/t/ID` | the task's record ([`crate::record::TaskRecord`]) | submit, leader, worker |
//! | `Q/s/w/NAME` | a live worker, on its session's lease | the worker |
//! | `Q/s/g/GROUP` | a group: its size, aggregator payload, threshold | submit |
//! | `Q/s/retention` | how many finished tasks are kept, how long ([`crate::record::Retention`]) | `tasks retention` |
//! | `Q/p/ID` | the task's payload, never rewritten | submit |
//! | `Q/i/NAME/ID` | an assignment in worker NAME's inbox | the leader |
//! | `Q/d/ID` | a dead letter: the record as it ended | leader or worker |
//! | `Q/leader/…` | the queue's election (`bellwether_client::Election`) | every worker |
//!
//! Everything the leader needs to decide (records, workers, groups) lies
//! under `Q/s/`, so one read and one watch of that range keep its view
//! current; payloads, which may be large, stay out of it.

use crate::{LayoutError as Error, Result};

/// The longest task id, group name or queue name, in bytes.
pub const ID_BYTES_MAX: usize = 256;

/// The largest payload or result, in bytes: the largest value the client
/// writes (`bellwether_client::keys::VALUE_BYTES_MAX`, within etcd's
/// default request limit).
pub const DATA_BYTES_MAX: usize = 1024 * 1024;

/// Ids starting with this are the queue's own (group aggregators).
pub const RESERVED_ID_START: char = '~';

/// Every queue also leaves its name under this prefix, so that tools (the
/// bellwether dashboard) can find the queues without scanning the store.
pub const QUEUE_REGISTRY_PREFIX: &str = "__bellwether/queues/";

/// What is stored under `Q/s/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateKey {
    /// `Q/s/queue`.
    Marker,
    /// `Q/s/t/ID`.
    Task(String),
    /// `Q/s/w/NAME`.
    Worker(String),
    /// `Q/s/g/GROUP`.
    Group(String),
    /// `Q/s/retention`.
    Retention,
}

/// The keys of one queue.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The queue's name.
    name: String,
}

impl Layout {
    /// The layout of queue `name`; refuses an empty, oversized or
    /// slash-holding name.
    pub fn new(name: &str) -> Result<Layout> {
        check_id("queue name", name)?;
        if name.contains('/') {
            return Err(Error::InvalidArgument(format!(
                "queue name {name:?} must not contain '/'"
            )));
        }
        Ok(Layout {
            name: name.to_string(),
        })
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `Q/` + `rest`.
    fn key(&self, rest: &str) -> Vec<u8> {
        format!("{}/{rest}", self.name).into_bytes()
    }

    /// The start of the range the leader reads and watches.
    pub fn state_prefix(&self) -> Vec<u8> {
        state_prefix(&self.name)
    }

    /// The queue's marker key.
    pub fn marker(&self) -> Vec<u8> {
        self.key("s/queue")
    }

    /// The queue's entry in the registry of queues.
    pub fn registry_entry(&self) -> Vec<u8> {
        format!("{QUEUE_REGISTRY_PREFIX}{}", self.name).into_bytes()
    }

    /// The queue's retention settings.
    pub fn retention(&self) -> Vec<u8> {
        self.key("s/retention")
    }

    /// A task's record.
    pub fn task(&self, id: &str) -> Vec<u8> {
        self.key(&format!("s/t/{id}"))
    }

    /// A worker's registration.
    pub fn worker(&self, name: &str) -> Vec<u8> {
        self.key(&format!("s/w/{name}"))
    }

    /// A group's record.
    pub fn group(&self, group: &str) -> Vec<u8> {
        self.key(&format!("s/g/{group}"))
    }

    /// A task's payload.
    pub fn payload(&self, id: &str) -> Vec<u8> {
        self.key(&format!("p/{id}"))
    }

    /// Worker `name`'s inbox.
    pub fn inbox_prefix(&self, worker: &str) -> Vec<u8> {
        self.key(&format!("i/{worker}/"))
    }

    /// One assignment in worker `name`'s inbox.
    pub fn inbox(&self, worker: &str, id: &str) -> Vec<u8> {
        self.key(&format!("i/{worker}/{id}"))
    }

    /// A dead letter.
    pub fn dead(&self, id: &str) -> Vec<u8> {
        self.key(&format!("d/{id}"))
    }

    /// The queue's election's name.
    pub fn election(&self) -> String {
        format!("{}/leader", self.name)
    }

    /// What a key under `Q/s/` stands for, or `None` for a foreign key.
    pub fn parse_state(&self, key: &[u8]) -> Option<StateKey> {
        let rest = key.strip_prefix(self.state_prefix().as_slice())?;
        let rest = std::str::from_utf8(rest).ok()?;
        if rest == "queue" {
            return Some(StateKey::Marker);
        }
        if rest == "retention" {
            return Some(StateKey::Retention);
        }
        let (kind, name) = rest.split_once('/')?;
        let name = name.to_string();
        match kind {
            "t" => Some(StateKey::Task(name)),
            "w" => Some(StateKey::Worker(name)),
            "g" => Some(StateKey::Group(name)),
            _ => None,
        }
    }

    /// The task id of an inbox key of `worker`.
    pub fn parse_inbox(&self, worker: &str, key: &[u8]) -> Option<String> {
        let rest = key.strip_prefix(self.inbox_prefix(worker).as_slice())?;
        String::from_utf8(rest.to_vec()).ok()
    }

    /// The id of group `group`'s aggregator task.
    pub fn aggregator_id(group: &str) -> String {
        format!("{RESERVED_ID_START}group/{group}")
    }
}

/// Refuses an empty, oversized or control-character-holding id or name.
pub fn check_id(what: &str, id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "the {what} must not be empty"
        )));
    }
    if id.len() > ID_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "the {what} is {} bytes; at most {ID_BYTES_MAX} are allowed",
            id.len()
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::InvalidArgument(format!(
            "the {what} {id:?} holds a control character"
        )));
    }
    Ok(())
}

/// Refuses a task id the caller may not choose.
pub fn check_task_id(id: &str) -> Result<()> {
    check_id("task id", id)?;
    if id.starts_with(RESERVED_ID_START) {
        return Err(Error::InvalidArgument(format!(
            "task id {id:?}: ids starting with '{RESERVED_ID_START}' are the queue's own"
        )));
    }
    Ok(())
}

/// Refuses an oversized payload or result.
pub fn check_data(what: &str, data: &[u8]) -> Result<()> {
    if data.len() > DATA_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "the {what} is {} bytes; at most {DATA_BYTES_MAX} are allowed",
            data.len()
        )));
    }
    Ok(())
}

/// The start of the range holding queue `queue`'s state (tasks, workers,
/// groups): what [`crate::QueueStatus::from_keys`] reads.
pub fn state_prefix(queue: &str) -> Vec<u8> {
    format!("{queue}/s/").into_bytes()
}

/// The start of the range of queue `queue`'s election: its oldest key is
/// the leading worker's.
pub fn leader_prefix(queue: &str) -> Vec<u8> {
    format!("{queue}/leader/").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_parse_back() {
        let layout = Layout::new("jobs").unwrap();
        assert_eq!(
            layout.parse_state(&layout.task("a/b")),
            Some(StateKey::Task("a/b".into()))
        );
        assert_eq!(
            layout.parse_state(&layout.worker("w1")),
            Some(StateKey::Worker("w1".into()))
        );
        assert_eq!(
            layout.parse_state(&layout.group("g")),
            Some(StateKey::Group("g".into()))
        );
        assert_eq!(layout.parse_state(&layout.marker()), Some(StateKey::Marker));
        assert_eq!(layout.parse_state(&layout.payload("a")), None);
        assert_eq!(
            layout.parse_inbox("w1", &layout.inbox("w1", "x/y")),
            Some("x/y".into())
        );
        assert_eq!(layout.parse_inbox("w1", &layout.inbox("w11", "x")), None);
    }

    #[test]
    fn bad_names_and_ids_are_refused() {
        assert!(Layout::new("").is_err());
        assert!(Layout::new("a/b").is_err());
        assert!(check_task_id("~group/x").is_err());
        assert!(check_task_id("line\nbreak").is_err());
        assert!(check_task_id(&"x".repeat(ID_BYTES_MAX + 1)).is_err());
        assert!(check_data("payload", &vec![0; DATA_BYTES_MAX + 1]).is_err());
        assert!(check_task_id("ok-1").is_ok());
    }
}

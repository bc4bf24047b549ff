//! What the kubernetes workload's object clients ([`super::kubernetes`])
//! and watchers ([`super::kubernetes_watch`]) record, and where their
//! objects live.

use super::kubernetes_check::{Entry, Item, Write};
use serde::Serialize;

/// Every object's key starts with it; the watchers watch all of it.
pub const REGISTRY_PREFIX: &str = "/registry/";

/// What the run's clients and watchers recorded.
#[derive(Default, Serialize)]
pub struct KubeHistory {
    /// Every acknowledged successful txn.
    pub writes: Vec<Write>,
    /// Each watcher's log.
    pub logs: Vec<Vec<Entry>>,
    /// How many of each operation, for the report.
    pub counts: Counts,
    /// Watchers that did not reach the final revision, and why.
    pub trouble: Vec<String>,
}

/// Operations by kind.
#[derive(Default, Serialize)]
pub struct Counts {
    /// Txns that succeeded (creates, updates, deletes, multi-creates).
    pub acknowledged: u64,
    /// Txns whose compare failed: another client got there first.
    pub conflicts: u64,
    /// Requests without an answer.
    pub unanswered: u64,
    pub gets: u64,
    pub lists: u64,
    pub pages: u64,
    pub counts: u64,
    pub compactions: u64,
}

/// Items of a range answer.
pub fn items(kvs: &[bellwether_api::mvccpb::KeyValue]) -> Vec<Item> {
    kvs.iter()
        .map(|kv| Item {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            value: String::from_utf8_lossy(&kv.value).into_owned(),
            mod_revision: kv.mod_revision,
        })
        .collect()
}

//! The applications' elections and locks that this member's Election and
//! Lock services serve: counters for `/metrics` and a list for the
//! dashboard (`GET /elections`).
//!
//! Names are chosen by clients, so the registry keeps at most
//! [`NAMES_MAX`] of them; campaigns on further names are counted under
//! [`OTHER`]. The current leader of each name is read from the store when
//! the list is asked for, so it is never staler than this member's applied
//! state; "since" is when this member first saw that leader's token.

use bellwether_kv::{KvStore, RangeRequest, SortOrder, SortTarget};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Names tracked one by one, at most.
pub const NAMES_MAX: usize = 64;

/// The label under which campaigns on untracked names are counted.
pub const OTHER: &str = "(other)";

/// The longest leader value shown, in bytes; longer ones are cut.
const VALUE_SHOWN_BYTES_MAX: usize = 256;

/// What is known of one name.
#[derive(Debug, Default, Clone)]
struct Entry {
    /// "election" or "lock".
    kind: &'static str,
    /// Campaign (or Lock) calls received.
    campaigns: u64,
    /// Calls that returned leadership (or the lock).
    leaderships: u64,
    /// The last leader token seen, and since when (Unix ms).
    seen: Option<(i64, u64)>,
}

/// One name as the dashboard shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AppElectionView {
    /// The election or lock name.
    pub name: String,
    /// "election" or "lock".
    pub kind: &'static str,
    /// Campaign or Lock calls this member received.
    pub campaigns: u64,
    /// Of those, the ones that returned leadership.
    pub leaderships: u64,
    /// The leader's value (lossy UTF-8, cut), if anyone leads.
    pub leader_value: Option<String>,
    /// The leader's fencing token (its key's create revision).
    pub token: Option<i64>,
    /// When this member first saw that token, Unix ms.
    pub since_unix_ms: Option<u64>,
}

/// The registry; shared by the services and the HTTP side.
#[derive(Debug, Default)]
pub struct AppElections {
    /// Tracked names, and the [`OTHER`] bucket.
    entries: Mutex<BTreeMap<String, Entry>>,
    /// The member's store, to read current leaders; set when the etcd API
    /// is served.
    store: Mutex<Option<Arc<Mutex<KvStore>>>>,
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl AppElections {
    /// Gives the registry the store it reads leaders from.
    pub fn attach_store(&self, store: Arc<Mutex<KvStore>>) {
        *self.store.lock().expect("registry lock") = Some(store);
    }

    /// Runs `change` on the entry of `name`, or of [`OTHER`] once
    /// [`NAMES_MAX`] names are tracked.
    fn with_entry(&self, name: &[u8], kind: &'static str, change: impl FnOnce(&mut Entry)) {
        let name = String::from_utf8_lossy(name).into_owned();
        let mut entries = self.entries.lock().expect("registry lock");
        let tracked = entries.len() - usize::from(entries.contains_key(OTHER));
        let key = if entries.contains_key(&name) || tracked < NAMES_MAX {
            name
        } else {
            OTHER.to_string()
        };
        let entry = entries.entry(key).or_insert_with(|| Entry {
            kind,
            ..Entry::default()
        });
        change(entry);
        assert!(entries.len() <= NAMES_MAX + 1, "registry over its bound");
    }

    /// A Campaign or Lock call arrived.
    pub fn campaigned(&self, name: &[u8], kind: &'static str) {
        self.with_entry(name, kind, |e| e.campaigns += 1);
    }

    /// A Campaign or Lock call returned leadership with `token`.
    pub fn led(&self, name: &[u8], kind: &'static str, token: i64) {
        self.with_entry(name, kind, |e| {
            e.leaderships += 1;
            if e.seen.is_none_or(|(seen, _)| seen != token) {
                e.seen = Some((token, now_unix_ms()));
            }
        });
    }

    /// Every tracked name with its current leader, read from the store.
    pub fn snapshot(&self) -> Vec<AppElectionView> {
        let store = self.store.lock().expect("registry lock").clone();
        let mut entries = self.entries.lock().expect("registry lock");
        let mut views = Vec::with_capacity(entries.len());
        for (name, entry) in entries.iter_mut() {
            let leader = match (&store, name.as_str()) {
                (Some(store), n) if n != OTHER => first_key(store, n),
                _ => None,
            };
            if let Some((_, token)) = &leader {
                if entry.seen.is_none_or(|(seen, _)| seen != *token) {
                    entry.seen = Some((*token, now_unix_ms()));
                }
            }
            views.push(AppElectionView {
                name: name.clone(),
                kind: entry.kind,
                campaigns: entry.campaigns,
                leaderships: entry.leaderships,
                token: leader.as_ref().map(|(_, t)| *t),
                since_unix_ms: leader.as_ref().and(entry.seen.map(|(_, at)| at)),
                leader_value: leader.map(|(value, _)| value),
            });
        }
        views
    }
}

impl Collector for AppElections {
    /// The counters, by name and kind, when `/metrics` is read.
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let entries = self.entries.lock().expect("registry lock");
        for (family, help, pick) in [
            (
                "bellwether_app_campaigns",
                "Campaign and Lock calls this member received, by election or lock name (at most 64 names; the rest as (other)).",
                (|e: &Entry| e.campaigns) as fn(&Entry) -> u64,
            ),
            (
                "bellwether_app_leaderships",
                "Campaign and Lock calls that returned leadership, by name: one per change of leader served here.",
                |e: &Entry| e.leaderships,
            ),
        ] {
            let mut metric = encoder.encode_descriptor(family, help, None, MetricType::Counter)?;
            for (name, entry) in entries.iter() {
                let labels = [("name", escape_label(name)), ("kind", entry.kind.to_string())];
                metric
                    .encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(&pick(entry), None)?;
            }
        }
        Ok(())
    }
}

/// The oldest key under `name/` (the leader): its value, cut, and its
/// create revision.
fn first_key(store: &Mutex<KvStore>, name: &str) -> Option<(String, i64)> {
    let prefix = format!("{name}/").into_bytes();
    let mut end = prefix.clone();
    *end.last_mut().expect("a prefix ends with /") += 1;
    let request = RangeRequest {
        limit: 1,
        sort_order: SortOrder::Ascend,
        sort_target: SortTarget::Create,
        ..RangeRequest::new(prefix, end)
    };
    let response = store.lock().expect("store lock").range(&request).ok()?;
    let kv = response.kvs.into_iter().next()?;
    let mut value = kv.value;
    value.truncate(VALUE_SHOWN_BYTES_MAX);
    Some((
        String::from_utf8_lossy(&value).into_owned(),
        kv.create_revision,
    ))
}

/// A label value with `\`, `"` and newlines escaped, as the text format
/// requires.
pub(crate) fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_kv::PutRequest;

    #[test]
    fn names_past_the_bound_are_counted_as_other() {
        let registry = Arc::new(AppElections::default());
        for i in 0..NAMES_MAX + 10 {
            registry.campaigned(format!("e{i}").as_bytes(), "election");
        }
        let views = registry.snapshot();
        assert_eq!(views.len(), NAMES_MAX + 1);
        let other = views.iter().find(|v| v.name == OTHER).unwrap();
        assert_eq!(other.campaigns, 10);
        let text = crate::metrics::render_collector(registry.clone());
        assert!(
            text.contains("bellwether_app_campaigns_total{name=\"(other)\",kind=\"election\"} 10")
        );
    }

    #[test]
    fn the_leader_is_read_from_the_store() {
        let store = Arc::new(Mutex::new(KvStore::new()));
        let registry = Arc::new(AppElections::default());
        registry.attach_store(store.clone());
        registry.campaigned(b"cron", "election");
        assert_eq!(registry.snapshot()[0].leader_value, None);
        store
            .lock()
            .unwrap()
            .put(&PutRequest::new("cron/1", "first"))
            .unwrap();
        store
            .lock()
            .unwrap()
            .put(&PutRequest::new("cron/2", "second"))
            .unwrap();
        registry.led(b"cron", "election", 2);
        let view = &registry.snapshot()[0];
        assert_eq!(
            (view.leader_value.as_deref(), view.token, view.leaderships),
            (Some("first"), Some(2), 1)
        );
        assert!(view.since_unix_ms.is_some());
        let text = crate::metrics::render_collector(registry.clone());
        assert!(
            text.contains("bellwether_app_leaderships_total{name=\"cron\",kind=\"election\"} 1")
        );
    }
}

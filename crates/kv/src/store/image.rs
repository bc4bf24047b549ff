//! The whole store as plain records, in and out: what a backend file of
//! another system lists (etcd's bolt database, whose `key` bucket holds
//! every retained write by revision), so a store can be written as one and
//! rebuilt from one.
//!
//! The store's own snapshot (`snapshot.rs`) stays the format members send
//! each other; this is the exchange format at the edge, checked as hard as
//! a snapshot is, because the file comes from outside.

use super::compaction_queue::CompactionQueue;
use super::KvStore;
use crate::event_log::EventLog;
use crate::key_history::{KeyHistory, KeyMap, KeyRevision};
use crate::{
    Alarm, AuthImage, AuthState, Event, EventKind, IdMap, KeyValue, Lease, LEASES_MAX,
    LEASE_TTL_SECONDS_MAX, LEASE_TTL_SECONDS_MIN,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One retained write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageWrite {
    /// The key written.
    pub key: Vec<u8>,
    /// The write's revision.
    pub revision: i64,
    /// The key's state after it; `None` for a delete.
    pub kv: Option<Arc<KeyValue>>,
}

/// Everything a store holds that outlives a cluster: the data, the leases,
/// the alarms and auth. The member directory is not in it: a store rebuilt
/// from an image starts a new cluster, whose members are named afresh.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreImage {
    /// The revision of the last write.
    pub revision: i64,
    /// The revision of the last compaction, 0 if none.
    pub compact_revision: i64,
    /// Every retained write in revision order; the writes of one revision
    /// (one txn) in the order they were made.
    pub writes: Vec<ImageWrite>,
    /// Live leases: id and TTL in seconds, in id order.
    pub leases: Vec<(i64, i64)>,
    /// Raised alarms.
    pub alarms: Vec<Alarm>,
    /// Users and roles.
    pub auth: AuthImage,
}

/// What an image is built from, taken from a store in constant time (the
/// keys, the leases and the event log share their nodes with the store's;
/// see [`KvStore::image_pending`]), so that a member's store lock is not
/// held while a large store's image is sorted.
#[derive(Clone, Debug)]
pub struct PendingImage {
    revision: i64,
    compact_revision: i64,
    keys: KeyMap,
    leases: IdMap<Lease>,
    events: EventLog,
    alarms: Vec<Alarm>,
    auth: AuthImage,
}

impl KvStore {
    /// The store as an image. One txn's writes come in the order they were
    /// made while the event log still holds that revision, and in key order
    /// after that (the histories keep no order within a revision).
    pub fn image(&self) -> StoreImage {
        self.image_pending().image()
    }

    /// What [`image`](Self::image) is built from, cloned in constant time
    /// (but for the alarms and auth, which are small): take it under the
    /// store's lock, build the image after.
    pub fn image_pending(&self) -> PendingImage {
        PendingImage {
            revision: self.revision,
            compact_revision: self.compact_revision,
            keys: self.keys.clone(),
            leases: self.leases.clone(),
            events: self.events.clone(),
            alarms: self.alarms.iter().copied().collect(),
            auth: self.auth.image(),
        }
    }
}

impl PendingImage {
    /// The image (see [`KvStore::image`]).
    pub fn image(self) -> StoreImage {
        let mut made_order: HashMap<(i64, &[u8]), usize> = HashMap::new();
        for entry in &self.events.revisions {
            for (index, event) in entry.events.iter().enumerate() {
                made_order.insert((entry.revision, event.kv.key.as_slice()), index);
            }
        }
        let mut writes: Vec<(i64, usize, &[u8], &KeyRevision)> = self
            .keys
            .iter()
            .flat_map(|(key, history)| {
                history.revisions.iter().map(|entry| {
                    let order = made_order
                        .get(&(entry.revision, key.as_slice()))
                        .copied()
                        .unwrap_or(0);
                    (entry.revision, order, key.as_slice(), entry)
                })
            })
            .collect();
        writes.sort_unstable_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
        StoreImage {
            revision: self.revision,
            compact_revision: self.compact_revision,
            writes: writes
                .into_iter()
                .map(|(revision, _, key, entry)| ImageWrite {
                    key: key.to_vec(),
                    revision,
                    kv: entry.kv.clone(),
                })
                .collect(),
            leases: self
                .leases
                .iter()
                .map(|(id, lease)| (id, lease.ttl_seconds))
                .collect(),
            alarms: self.alarms,
            auth: self.auth,
        }
    }
}

impl KvStore {
    /// The store `image` describes, with `auth_secret` to sign tokens if
    /// auth is enabled. Refuses, naming what is wrong, anything no history
    /// of requests could have made: revisions out of order, a key's state
    /// that disagrees with its write, a key on a missing lease. A lease TTL
    /// outside bellwether's bounds is moved inside them, as a grant would.
    /// The compaction the image names is applied again, so a file written
    /// while one was under way holds what the finished one keeps.
    pub fn from_image(image: StoreImage, auth_secret: Vec<u8>) -> Result<KvStore, String> {
        let StoreImage {
            revision,
            compact_revision,
            writes,
            leases: lease_list,
            alarms,
            auth,
        } = image;
        let revision = revision.max(super::REVISION_INITIAL);
        if !(0..=revision).contains(&compact_revision) {
            return Err(format!(
                "compaction at {compact_revision} is past the last write's revision {revision}"
            ));
        }
        if lease_list.len() > LEASES_MAX {
            return Err(format!(
                "{} leases; a store holds at most {LEASES_MAX}",
                lease_list.len()
            ));
        }
        let mut leases = IdMap::new();
        for (id, ttl) in lease_list {
            let ttl_seconds = ttl.clamp(LEASE_TTL_SECONDS_MIN, LEASE_TTL_SECONDS_MAX);
            if id == 0 || leases.insert(id, Lease { ttl_seconds }).is_some() {
                return Err(format!("lease {id:#x} is zero or listed twice"));
            }
        }
        let mut keys = std::collections::BTreeMap::<Vec<u8>, KeyHistory>::new();
        let mut events = EventLog::new(compact_revision.max(super::REVISION_INITIAL));
        let mut pending: Vec<Event> = Vec::new();
        let mut last_revision = 0;
        for write in writes {
            let ImageWrite {
                key,
                revision: at,
                kv,
            } = write;
            if at < last_revision || at < 1 || at > revision {
                return Err(format!(
                    "a write at revision {at} out of order (after {last_revision}, store at {revision})"
                ));
            }
            if let Some(kv) = &kv {
                let consistent = kv.key == key
                    && kv.mod_revision == at
                    && (1..=at).contains(&kv.create_revision)
                    && kv.version >= 1;
                if !consistent {
                    return Err(format!(
                        "key {:?} at revision {at}: its state disagrees with the write",
                        String::from_utf8_lossy(&key)
                    ));
                }
            }
            if key.is_empty() {
                return Err(format!("an empty key written at revision {at}"));
            }
            if at != last_revision && !pending.is_empty() {
                events.push(last_revision, std::mem::take(&mut pending));
            }
            last_revision = at;
            let history = keys.entry(key.clone()).or_default();
            if history
                .revisions
                .last()
                .is_some_and(|last| last.revision >= at)
            {
                return Err(format!(
                    "key {:?} written twice at revision {at}",
                    String::from_utf8_lossy(&key)
                ));
            }
            let previous = history.latest_shared().cloned();
            if at >= events.first_revision {
                let event = match &kv {
                    Some(kv) => Event {
                        kind: EventKind::Put,
                        kv: kv.clone(),
                        prev_kv: previous,
                    },
                    None => Event {
                        kind: EventKind::Delete,
                        kv: Arc::new(KeyValue::tombstone(key.clone(), at)),
                        prev_kv: previous,
                    },
                };
                pending.push(event);
            }
            history.revisions.push(KeyRevision { revision: at, kv });
        }
        if !pending.is_empty() {
            events.push(last_revision, pending);
        }
        if compact_revision > 0 {
            keys.retain(|key, history| !history.compact(compact_revision, key.len()).0);
        }
        let keys: KeyMap = keys.into_iter().collect();
        let lease_keys = super::snapshot::lease_key_sets(&keys, &leases).map_err(|kv| {
            format!(
                "key {:?} is attached to lease {:#x}, which the image does not hold",
                String::from_utf8_lossy(&kv.key),
                kv.lease
            )
        })?;
        let auth = AuthState::from_image(auth, auth_secret)?;
        let mut store = KvStore {
            revision,
            compact_revision,
            to_compact: CompactionQueue::of(&keys),
            keys,
            leases,
            lease_keys,
            events,
            alarms: alarms.into_iter().collect(),
            members: BTreeMap::new(),
            next_member_id: 1,
            auth,
            size_bytes: 0,
        };
        store.size_bytes = store.count_size_bytes();
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeleteRangeRequest, KeyRange, PutRequest, RangeRequest, RequestOp, TxnRequest};

    fn busy_store() -> KvStore {
        let mut store = KvStore::new();
        let lease = 0x77;
        store.lease_grant(lease, 60).unwrap();
        for i in 0..50 {
            store
                .put(&PutRequest::new(format!("k{:02}", i % 17), format!("v{i}")))
                .unwrap();
        }
        let mut on_lease = PutRequest::new("leased", "x");
        on_lease.lease = lease;
        store.put(&on_lease).unwrap();
        // One txn writing two keys, the later key first.
        let txn = TxnRequest {
            success: vec![
                RequestOp::Put(PutRequest::new("zz", "1")),
                RequestOp::Put(PutRequest::new("aa", "2")),
            ],
            ..TxnRequest::default()
        };
        store.txn(&txn).unwrap();
        store
            .delete_range(&DeleteRangeRequest::new("k0", "k1"))
            .unwrap();
        store.compact(30).unwrap();
        store.put(&PutRequest::new("k01", "again")).unwrap();
        store
    }

    #[test]
    fn a_store_rebuilt_from_its_image_reads_and_watches_alike() {
        let store = busy_store();
        let image = store.image();
        // The txn's writes keep the order they were made in.
        let txn_writes: Vec<&[u8]> = image
            .writes
            .iter()
            .filter(|w| w.key == b"zz" || w.key == b"aa")
            .map(|w| w.key.as_slice())
            .collect();
        assert_eq!(txn_writes, [b"zz".as_slice(), b"aa"]);
        let rebuilt = KvStore::from_image(image.clone(), Vec::new()).unwrap();
        assert_eq!(rebuilt.image(), image);
        for at in [30, 40, store.revision()] {
            let read = RangeRequest {
                revision: at,
                ..RangeRequest::new("\0", "\0")
            };
            assert_eq!(rebuilt.range(&read), store.range(&read), "at {at}");
        }
        assert_eq!(
            rebuilt.events_since(31, &KeyRange::new("\0", "\0")),
            store.events_since(31, &KeyRange::new("\0", "\0"))
        );
        assert_eq!(rebuilt.size_bytes(), store.size_bytes());
    }

    #[test]
    fn an_inconsistent_image_is_refused_with_its_reason() {
        let image = busy_store().image();
        let mut unordered = image.clone();
        unordered.writes.swap(3, 40);
        assert!(KvStore::from_image(unordered, Vec::new()).is_err());
        let mut orphan = image.clone();
        orphan.leases.clear();
        let error = KvStore::from_image(orphan, Vec::new()).unwrap_err();
        assert!(error.contains("lease 0x77"), "{error}");
        let mut wrong = image;
        let last = wrong.writes.last_mut().unwrap();
        last.kv = Some(Arc::new(KeyValue {
            mod_revision: 1,
            ..(**last.kv.as_ref().unwrap()).clone()
        }));
        assert!(KvStore::from_image(wrong, Vec::new()).is_err());
    }
}

//! Compaction and watch events: reads below the compact revision fail,
//! the compacted state stays readable, and the event log reports what it
//! no longer holds.

use bellwether_kv::{
    DeleteRangeRequest, EventKind, KeyRange, KvError, KvStore, PutRequest, RangeRequest,
    EVENT_LOG_EVENTS_MAX,
};

/// "a" = 1 at 2, "b" at 3, "a" = 2 at 4, "b" deleted at 5, "c" at 6.
fn store() -> KvStore {
    let mut store = KvStore::new();
    store.put(&PutRequest::new("a", "1")).unwrap();
    store.put(&PutRequest::new("b", "1")).unwrap();
    store.put(&PutRequest::new("a", "2")).unwrap();
    store
        .delete_range(&DeleteRangeRequest::new("b", ""))
        .unwrap();
    store.put(&PutRequest::new("c", "1")).unwrap();
    store
}

/// A key and its value.
type Entry = (Vec<u8>, Vec<u8>);

fn read_at(store: &KvStore, revision: i64) -> Result<Vec<Entry>, KvError> {
    let request = RangeRequest {
        revision,
        ..RangeRequest::new(vec![0], vec![0])
    };
    let response = store.range(&request)?;
    Ok(response
        .kvs
        .into_iter()
        .map(|kv| (kv.key, kv.value))
        .collect())
}

#[test]
fn reads_below_the_compact_revision_fail_and_at_it_succeed() {
    let mut store = store();
    let before = read_at(&store, 4).unwrap();
    store.compact(4).unwrap();
    assert_eq!(
        read_at(&store, 3),
        Err(KvError::Compacted {
            compact_revision: 4
        })
    );
    assert_eq!(
        read_at(&store, 4).unwrap(),
        before,
        "state at the compact revision survives"
    );
    assert_eq!(read_at(&store, 5).unwrap().len(), 1);
    assert_eq!(store.get(b"a").unwrap().version, 2);
}

#[test]
fn compaction_rejects_old_and_future_revisions() {
    let mut store = store();
    assert_eq!(store.compact(7), Err(KvError::FutureRevision));
    store.compact(5).unwrap();
    assert_eq!(
        store.compact(5),
        Err(KvError::Compacted {
            compact_revision: 5
        })
    );
    assert_eq!(
        store.compact(3),
        Err(KvError::Compacted {
            compact_revision: 5
        })
    );
    assert_eq!(store.compact_revision(), 5);
    assert_eq!(store.revision(), 6, "compaction does not write");
}

#[test]
fn compaction_forgets_deleted_keys_without_changing_reads() {
    let mut store = store();
    store.compact(6).unwrap();
    assert_eq!(read_at(&store, 6).unwrap().len(), 2);
    store.put(&PutRequest::new("b", "again")).unwrap();
    let b = store.get(b"b").unwrap();
    assert_eq!((b.version, b.create_revision), (1, 7));
}

#[test]
fn events_since_returns_writes_in_order_with_prev_kv() {
    let store = store();
    let events = store.events_since(3, &KeyRange::new("a", "c")).unwrap();
    let summary: Vec<(EventKind, &[u8], i64)> = events
        .iter()
        .map(|event| (event.kind, event.kv.key.as_slice(), event.revision()))
        .collect();
    assert_eq!(
        summary,
        [
            (EventKind::Put, b"b".as_slice(), 3),
            (EventKind::Put, b"a", 4),
            (EventKind::Delete, b"b", 5)
        ]
    );
    assert_eq!(events[1].prev_kv.as_ref().unwrap().value, b"1");
    assert_eq!(events[2].prev_kv.as_ref().unwrap().mod_revision, 3);
    assert!(store
        .events_since(7, &KeyRange::single("a"))
        .unwrap()
        .is_empty());
}

#[test]
fn events_since_a_compacted_revision_names_the_compact_revision() {
    let mut store = store();
    store.compact(4).unwrap();
    let all = KeyRange::new(vec![0], vec![0]);
    assert_eq!(
        store.events_since(3, &all),
        Err(KvError::Compacted {
            compact_revision: 4
        })
    );
    let from_compact = store.events_since(4, &all).unwrap();
    assert_eq!(from_compact.first().map(|event| event.revision()), Some(4));
}

#[test]
fn event_log_bound_drops_the_oldest_revisions() {
    let mut store = KvStore::new();
    let writes = EVENT_LOG_EVENTS_MAX + 10;
    for i in 0..writes {
        store
            .put(&PutRequest::new(format!("k{}", i % 100), "v"))
            .unwrap();
    }
    let all = KeyRange::new(vec![0], vec![0]);
    assert_eq!(
        store.events_since(2, &all),
        Err(KvError::Compacted {
            compact_revision: 12
        })
    );
    assert_eq!(
        store.events_since(12, &all).unwrap().len(),
        EVENT_LOG_EVENTS_MAX
    );
}

#[test]
fn retained_writes_list_history_up_to_a_revision_and_refuse_gone_or_future_ones() {
    let mut store = bellwether_kv::KvStore::new();
    store.put(&PutRequest::new("b", "1")).unwrap(); // 2
    store.put(&PutRequest::new("a", "1")).unwrap(); // 3
    store.put(&PutRequest::new("b", "2")).unwrap(); // 4
    store
        .delete_range(&bellwether_kv::DeleteRangeRequest::new("a", ""))
        .unwrap(); // 5
    let listed = |store: &bellwether_kv::KvStore, revision| -> Vec<(Vec<u8>, i64, bool)> {
        store
            .retained_writes(revision)
            .unwrap()
            .map(|w| (w.key.to_vec(), w.revision, w.kv.is_some()))
            .collect()
    };
    let all = listed(&store, 0);
    assert_eq!(
        all,
        [
            (b"a".to_vec(), 3, true),
            (b"a".to_vec(), 5, false),
            (b"b".to_vec(), 2, true),
            (b"b".to_vec(), 4, true),
        ]
    );
    assert_eq!(
        listed(&store, 3),
        [(b"a".to_vec(), 3, true), (b"b".to_vec(), 2, true)]
    );
    assert!(matches!(
        store.retained_writes(6).err(),
        Some(KvError::FutureRevision)
    ));
    store.compact(4).unwrap();
    for gone in [3, 4] {
        assert!(matches!(
            store.retained_writes(gone).err(),
            Some(KvError::Compacted {
                compact_revision: 4
            })
        ));
    }
    // "a" as of 4 (written at 3) is still readable, so it stays listed.
    assert_eq!(
        listed(&store, 0),
        [
            (b"a".to_vec(), 3, true),
            (b"a".to_vec(), 5, false),
            (b"b".to_vec(), 4, true)
        ]
    );
}

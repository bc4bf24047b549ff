//! Alarms and the store's size: alarms survive snapshots and are the same
//! on every replica; the size grows with every retained write and shrinks
//! only by compaction, by exactly what compaction dropped.

use bellwether_kv::{
    Alarm, AlarmKind, DeleteRangeRequest, KvStore, PutRequest, REVISION_OVERHEAD_BYTES,
};

#[test]
fn alarms_are_raised_once_cleared_once_and_kept_in_snapshots() {
    let mut store = KvStore::new();
    let no_space = Alarm {
        member_id: 7,
        kind: AlarmKind::NoSpace,
    };
    let corrupt = Alarm {
        member_id: 3,
        kind: AlarmKind::Corrupt,
    };
    assert!(!store.is_alarmed(AlarmKind::NoSpace));
    assert_eq!(store.alarm_activate(no_space), no_space);
    assert_eq!(store.alarm_activate(no_space), no_space, "raising twice");
    store.alarm_activate(corrupt);
    assert!(store.is_alarmed(AlarmKind::NoSpace));
    assert_eq!(store.alarms().collect::<Vec<_>>(), [corrupt, no_space]);
    let restored = KvStore::restore(&store.snapshot()).unwrap();
    assert_eq!(restored, store);
    assert_eq!(restored.alarms().count(), 2);
    assert_eq!(store.alarm_deactivate(no_space), Some(no_space));
    assert_eq!(store.alarm_deactivate(no_space), None, "cleared already");
    assert!(!store.is_alarmed(AlarmKind::NoSpace));
    assert_ne!(restored, store);
}

#[test]
fn the_size_counts_every_retained_write_and_compaction_gives_it_back() {
    let mut store = KvStore::new();
    assert_eq!(store.size_bytes(), 0);
    store.put(&PutRequest::new("key", "12345")).unwrap();
    let one = REVISION_OVERHEAD_BYTES + 3 + 5;
    assert_eq!(store.size_bytes(), one);
    store.put(&PutRequest::new("key", "1234567890")).unwrap();
    assert_eq!(store.size_bytes(), one + REVISION_OVERHEAD_BYTES + 3 + 10);
    store
        .delete_range(&DeleteRangeRequest::new("key", ""))
        .unwrap();
    let all = store.size_bytes();
    assert_eq!(all, 2 * one + 5 + REVISION_OVERHEAD_BYTES + 3);
    // Compacting at the delete forgets the key: nothing is left to count.
    store.compact(store.revision()).unwrap();
    assert_eq!(store.size_bytes(), 0);
    // A restored store counts the same from scratch.
    for i in 0..50 {
        store
            .put(&PutRequest::new(format!("k{}", i % 7), "v".repeat(i)))
            .unwrap();
    }
    store.compact(store.revision() - 10).unwrap();
    let restored = KvStore::restore(&store.snapshot()).unwrap();
    assert_eq!(restored.size_bytes(), store.size_bytes());
    assert!(store.size_bytes() > 0);
}

//! Snapshots: a restored store equals the original and behaves the same;
//! damaged input is rejected with an error, never a panic.

use bellwether_kv::{
    DeleteRangeRequest, KeyRange, KvError, KvStore, PutRequest, RangeRequest, SNAPSHOT_VERSION,
};

fn store() -> KvStore {
    let mut store = KvStore::new();
    store.lease_grant(9, 30).unwrap();
    store.put(&PutRequest::new("a", "1")).unwrap();
    store
        .put(&PutRequest {
            lease: 9,
            ..PutRequest::new("b", "leased")
        })
        .unwrap();
    store.put(&PutRequest::new("a", "2")).unwrap();
    store
        .delete_range(&DeleteRangeRequest::new("a", ""))
        .unwrap();
    store.put(&PutRequest::new("c", vec![0xff, 0])).unwrap();
    store.compact(3).unwrap();
    store
}

#[test]
fn snapshot_round_trip_restores_an_equal_store() {
    let original = store();
    let restored = KvStore::restore(&original.snapshot()).expect("restore");
    assert_eq!(restored, original);
    assert_eq!(
        restored.snapshot(),
        original.snapshot(),
        "encoding is deterministic"
    );
}

#[test]
fn restored_store_serves_the_same_reads_events_and_revokes() {
    let mut original = store();
    let mut restored = KvStore::restore(&original.snapshot()).unwrap();
    let old_read = RangeRequest {
        revision: 4,
        ..RangeRequest::new("a", "")
    };
    assert_eq!(restored.range(&old_read), original.range(&old_read));
    let all = KeyRange::new(vec![0], vec![0]);
    assert_eq!(
        restored.events_since(3, &all),
        original.events_since(3, &all)
    );
    assert_eq!(restored.lease_keys(9).unwrap(), [b"b".to_vec()]);
    assert_eq!(restored.lease_revoke(9), original.lease_revoke(9));
    assert_eq!(restored, original);
}

#[test]
fn every_truncation_is_rejected_with_an_error() {
    let bytes = store().snapshot();
    for length in 0..bytes.len() {
        let result = KvStore::restore(&bytes[..length]);
        assert!(
            matches!(result, Err(KvError::SnapshotCorrupt { .. })),
            "length {length}"
        );
    }
}

#[test]
fn unknown_version_is_rejected() {
    let mut bytes = store().snapshot();
    bytes[4..8].copy_from_slice(&(SNAPSHOT_VERSION + 1).to_le_bytes());
    assert_eq!(
        KvStore::restore(&bytes),
        Err(KvError::SnapshotVersion {
            version: SNAPSHOT_VERSION + 1,
            expected: SNAPSHOT_VERSION
        })
    );
}

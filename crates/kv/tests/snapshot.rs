//! Snapshots: a restored store equals the original and behaves the same;
//! damaged input is rejected with an error, never a panic.

use bellwether_kv::{
    DeleteRangeRequest, KeyRange, KvError, KvStore, PutRequest, RangeRequest,
    LEASE_TTL_SECONDS_MAX, SNAPSHOT_VERSION,
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
fn a_pending_snapshot_encodes_the_store_as_it_was_taken() {
    let mut store = store();
    for id in 100..5_000 {
        store.lease_grant(id, 60).unwrap();
    }
    // Enough keys for the key map to have many nodes, each with history.
    for round in 0..2 {
        for key in 0..3_000 {
            store
                .put(&PutRequest::new(format!("k{key:05}"), format!("{round}")))
                .unwrap();
        }
    }
    let then = store.clone();
    let pending = store.snapshot_pending();
    // The store goes on changing while the snapshot waits to be encoded:
    // leases granted and revoked in the pages the snapshot shares, keys
    // written.
    for id in (100..5_000).step_by(3) {
        store.lease_revoke(id).unwrap();
    }
    for id in 10_000..12_000 {
        store.lease_grant(id, 90).unwrap();
    }
    store.put(&PutRequest::new("d", "later")).unwrap();
    // Keys overwritten, deleted and added in nodes the snapshot shares,
    // and histories and events dropped by a compaction.
    for key in (0..3_000).step_by(7) {
        store
            .put(&PutRequest::new(format!("k{key:05}"), "later"))
            .unwrap();
    }
    store
        .delete_range(&DeleteRangeRequest::new("k01000", "k01500"))
        .unwrap();
    for key in 0..500 {
        store
            .put(&PutRequest::new(format!("k{key:05}x"), "new"))
            .unwrap();
    }
    store.compact(store.revision() - 10).unwrap();
    let encoded = pending.encode();
    assert_eq!(encoded, then.snapshot());
    assert_eq!(KvStore::restore(&encoded).unwrap(), then);
    assert_ne!(store, then);
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

#[test]
fn leases_round_trip_at_the_ends_of_the_id_range() {
    let mut store = KvStore::new();
    for id in [i64::MIN, -5, -4, 1, 2, 3, 1 << 48, i64::MAX] {
        store.lease_grant(id, 60).unwrap();
    }
    store.lease_grant(9, LEASE_TTL_SECONDS_MAX).unwrap();
    let restored = KvStore::restore(&store.snapshot()).expect("restore");
    assert_eq!(restored, store);
    assert_eq!(restored.leases(), store.leases());
    assert_eq!(
        restored.lease(9).map(|l| l.ttl_seconds),
        Some(LEASE_TTL_SECONDS_MAX)
    );
}

#[test]
fn counter_issued_leases_take_about_two_bytes_each() {
    let mut store = KvStore::new();
    let empty = store.snapshot().len();
    // Three members' counters, interleaved as their grants reach the log.
    for n in 0..30_000i64 {
        let member = n % 3 + 1;
        store
            .lease_grant((member << 48) + 1_000_000 + n / 3, 60)
            .unwrap();
    }
    let per_lease = (store.snapshot().len() - empty) as f64 / 30_000.0;
    assert!(per_lease < 2.1, "{per_lease} bytes a lease");
    assert_eq!(KvStore::restore(&store.snapshot()).unwrap(), store);
}

#[test]
fn out_of_order_or_out_of_range_leases_are_corrupt() {
    let mut store = KvStore::new();
    store.lease_grant(7, 60).unwrap();
    store.lease_grant(8, 60).unwrap();
    let bytes = store.snapshot();
    // Version 3's lease section: the count (u32), then zigzag(7) = 14 and
    // TTL 60, then distance 1 and TTL 60.
    let section = [2, 0, 0, 0, 14, 60, 1, 60];
    let start = bytes
        .windows(section.len())
        .position(|w| w == section)
        .expect("the lease section as documented");
    let at = start + 6;
    let mut zero_distance = bytes.clone();
    zero_distance[at] = 0;
    assert!(matches!(
        KvStore::restore(&zero_distance),
        Err(KvError::SnapshotCorrupt { .. })
    ));
    let mut short_ttl = bytes.clone();
    short_ttl[at + 1] = 1;
    assert!(matches!(
        KvStore::restore(&short_ttl),
        Err(KvError::SnapshotCorrupt { .. })
    ));
}

#[test]
fn a_streamed_snapshot_comes_in_bounded_writes_and_equals_the_whole() {
    let mut store = store();
    for key in 0..6_000 {
        store
            .put(&PutRequest::new(format!("big/{key:05}"), vec![b'v'; 300]))
            .unwrap();
    }
    /// Records the size of every write.
    struct Writes(Vec<u8>, Vec<usize>);
    impl std::io::Write for Writes {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.extend_from_slice(bytes);
            self.1.push(bytes.len());
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Writes(Vec::new(), Vec::new());
    store.snapshot_pending().encode_to(&mut out).unwrap();
    assert_eq!(out.0, store.snapshot());
    assert!(out.1.len() >= 2, "more than one write: {:?}", out.1);
    assert!(
        out.1
            .iter()
            .all(|&n| n < 2 * bellwether_kv::STREAM_CHUNK_BYTES),
        "each write is about a chunk: {:?}",
        out.1
    );
}

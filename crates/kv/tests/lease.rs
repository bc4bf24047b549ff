//! Leases: grant bounds, attach on put, detach on delete or re-put, and
//! revoke deleting every attached key in one revision.

use bellwether_kv::{
    DeleteRangeRequest, EventKind, KeyRange, KvError, KvStore, PutRequest, LEASES_MAX,
    LEASE_TTL_SECONDS_MIN,
};

fn put_with_lease(store: &mut KvStore, key: &str, lease: i64) -> Result<i64, KvError> {
    store
        .put(&PutRequest {
            lease,
            ..PutRequest::new(key, "v")
        })
        .map(|response| response.revision)
}

#[test]
fn a_grant_past_the_lease_bound_is_refused_until_one_is_revoked() {
    let mut store = KvStore::new();
    for id in 1..=LEASES_MAX as i64 {
        store.lease_grant(id, 60).unwrap();
    }
    let past = LEASES_MAX as i64 + 1;
    let refused = store.lease_grant(past, 60).unwrap_err();
    assert_eq!(
        refused,
        KvError::TooManyLeases {
            leases_max: LEASES_MAX
        }
    );
    assert_eq!(
        refused.to_string(),
        "bellwether: too many leases (at most 1000000); revoke unused leases"
    );
    assert_eq!(
        store.leases().len(),
        LEASES_MAX,
        "the refusal changed nothing"
    );
    store.lease_revoke(17).unwrap();
    assert_eq!(store.lease_grant(past, 60), Ok(60));
}

#[test]
fn grant_raises_short_ttls_and_rejects_zero_and_duplicate_ids() {
    let mut store = KvStore::new();
    assert_eq!(store.lease_grant(7, 0), Ok(LEASE_TTL_SECONDS_MIN));
    assert_eq!(store.lease_grant(8, 60), Ok(60));
    assert_eq!(store.lease_grant(7, 60), Err(KvError::LeaseExists));
    assert_eq!(store.lease_grant(0, 60), Err(KvError::LeaseIdZero));
    assert_eq!(store.leases(), [7, 8]);
    assert_eq!(store.revision(), 1, "lease grants are not key writes");
    assert_eq!(store.lease_keep_alive(8), Ok(60));
    assert_eq!(store.lease_keep_alive(9), Err(KvError::LeaseNotFound));
}

#[test]
fn put_attaches_and_requires_an_existing_lease() {
    let mut store = KvStore::new();
    assert_eq!(
        put_with_lease(&mut store, "a", 5),
        Err(KvError::LeaseNotFound)
    );
    store.lease_grant(5, 10).unwrap();
    put_with_lease(&mut store, "a", 5).unwrap();
    put_with_lease(&mut store, "b", 5).unwrap();
    assert_eq!(store.get(b"a").unwrap().lease, 5);
    assert_eq!(store.lease_keys(5).unwrap(), [b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn reput_with_another_lease_or_delete_detaches_the_key() {
    let mut store = KvStore::new();
    store.lease_grant(1, 10).unwrap();
    store.lease_grant(2, 10).unwrap();
    put_with_lease(&mut store, "a", 1).unwrap();
    put_with_lease(&mut store, "b", 1).unwrap();
    put_with_lease(&mut store, "a", 2).unwrap();
    store
        .delete_range(&DeleteRangeRequest::new("b", ""))
        .unwrap();
    assert!(store.lease_keys(1).unwrap().is_empty());
    assert_eq!(store.lease_keys(2).unwrap(), [b"a".to_vec()]);
}

#[test]
fn ignore_lease_keeps_the_attached_lease() {
    let mut store = KvStore::new();
    store.lease_grant(1, 10).unwrap();
    put_with_lease(&mut store, "a", 1).unwrap();
    store
        .put(&PutRequest {
            ignore_lease: true,
            ..PutRequest::new("a", "new")
        })
        .unwrap();
    assert_eq!(store.get(b"a").unwrap().lease, 1);
    let both = PutRequest {
        ignore_lease: true,
        lease: 1,
        ..PutRequest::new("a", "x")
    };
    assert_eq!(store.put(&both), Err(KvError::LeaseProvided));
}

#[test]
fn revoke_deletes_all_attached_keys_in_one_revision() {
    let mut store = KvStore::new();
    store.lease_grant(3, 10).unwrap();
    for key in ["a", "b", "c"] {
        put_with_lease(&mut store, key, 3).unwrap();
    }
    store.put(&PutRequest::new("free", "v")).unwrap();
    let revision = store.lease_revoke(3).unwrap();
    assert_eq!(revision, 6);
    assert!(["a", "b", "c"]
        .iter()
        .all(|key| store.get(key.as_bytes()).is_none()));
    assert!(store.get(b"free").is_some());
    let events = store
        .events_since(6, &KeyRange::new(vec![0], vec![0]))
        .unwrap();
    assert_eq!(events.len(), 3);
    assert!(events
        .iter()
        .all(|event| event.kind == EventKind::Delete && event.revision() == 6));
    assert_eq!(store.lease_revoke(3), Err(KvError::LeaseNotFound));
    assert!(store.leases().is_empty());
}

#[test]
fn revoke_of_a_lease_without_keys_does_not_advance_the_revision() {
    let mut store = KvStore::new();
    store.lease_grant(3, 10).unwrap();
    assert_eq!(store.lease_revoke(3), Ok(1));
}

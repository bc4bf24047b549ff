//! Revision, version, create and mod revision rules for puts and deletes.

use bellwether_kv::{DeleteRangeRequest, KvError, KvStore, PutRequest, REVISION_INITIAL};

fn put(store: &mut KvStore, key: &str, value: &str) -> i64 {
    store
        .put(&PutRequest::new(key, value))
        .expect("put")
        .revision
}

#[test]
fn store_starts_at_revision_1_and_first_write_is_revision_2() {
    let mut store = KvStore::new();
    assert_eq!(store.revision(), REVISION_INITIAL);
    assert_eq!(put(&mut store, "a", "1"), 2);
    assert_eq!(store.revision(), 2);
}

#[test]
fn update_keeps_create_revision_and_bumps_mod_revision_and_version() {
    let mut store = KvStore::new();
    put(&mut store, "a", "1");
    put(&mut store, "b", "x");
    put(&mut store, "a", "2");
    let kv = store.get(b"a").expect("a exists");
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 4, 2));
    assert_eq!(kv.value, b"2");
}

#[test]
fn recreate_after_delete_resets_version_and_create_revision() {
    let mut store = KvStore::new();
    put(&mut store, "a", "1");
    put(&mut store, "a", "2");
    let deleted = store
        .delete_range(&DeleteRangeRequest::new("a", ""))
        .expect("delete");
    assert_eq!((deleted.revision, deleted.deleted), (4, 1));
    assert!(store.get(b"a").is_none());
    put(&mut store, "a", "3");
    let kv = store.get(b"a").expect("a re-created");
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (5, 5, 1));
}

#[test]
fn delete_of_nothing_does_not_advance_the_revision() {
    let mut store = KvStore::new();
    put(&mut store, "a", "1");
    let response = store
        .delete_range(&DeleteRangeRequest::new("zz", ""))
        .expect("delete");
    assert_eq!((response.revision, response.deleted), (2, 0));
    assert_eq!(store.revision(), 2);
}

#[test]
fn delete_range_returns_prev_kvs_in_key_order_in_one_revision() {
    let mut store = KvStore::new();
    for key in ["c", "a", "b", "d"] {
        put(&mut store, key, key);
    }
    let request = DeleteRangeRequest {
        key: b"a".to_vec(),
        range_end: b"d".to_vec(),
        prev_kv: true,
    };
    let response = store.delete_range(&request).expect("delete");
    assert_eq!(response.revision, 6);
    assert_eq!(response.deleted, 3);
    let keys: Vec<&[u8]> = response
        .prev_kvs
        .iter()
        .map(|kv| kv.key.as_slice())
        .collect();
    assert_eq!(keys, [b"a", b"b", b"c"]);
    assert!(store.get(b"d").is_some());
}

#[test]
fn put_prev_kv_returns_the_state_before_the_put() {
    let mut store = KvStore::new();
    assert_eq!(
        store
            .put(&PutRequest {
                prev_kv: true,
                ..PutRequest::new("a", "1")
            })
            .unwrap()
            .prev_kv,
        None
    );
    let response = store
        .put(&PutRequest {
            prev_kv: true,
            ..PutRequest::new("a", "2")
        })
        .unwrap();
    assert_eq!(response.prev_kv.expect("previous").value, b"1");
}

#[test]
fn ignore_value_keeps_the_value_and_needs_an_existing_key() {
    let mut store = KvStore::new();
    let ignore = PutRequest {
        ignore_value: true,
        ..PutRequest::new("a", "")
    };
    assert_eq!(store.put(&ignore), Err(KvError::KeyNotFound));
    assert_eq!(store.revision(), 1, "a rejected put changes nothing");
    put(&mut store, "a", "kept");
    store.put(&ignore).expect("ignore_value on an existing key");
    let kv = store.get(b"a").unwrap();
    assert_eq!((kv.value.as_slice(), kv.version), (b"kept".as_slice(), 2));
    let with_value = PutRequest {
        ignore_value: true,
        ..PutRequest::new("a", "v")
    };
    assert_eq!(store.put(&with_value), Err(KvError::ValueProvided));
}

#[test]
fn empty_keys_and_oversized_values_are_rejected() {
    let mut store = KvStore::new();
    assert_eq!(
        store.put(&PutRequest::new("", "v")),
        Err(KvError::KeyNotProvided)
    );
    let huge = vec![0u8; bellwether_kv::REQUEST_BYTES_MAX];
    assert!(matches!(
        store.put(&PutRequest::new("k", huge)),
        Err(KvError::RequestTooLarge { .. })
    ));
    assert_eq!(store.revision(), 1);
}

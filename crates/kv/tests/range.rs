//! Range reads: etcd's range_end conventions, limit and more, sorting,
//! count_only, keys_only, revision filters and historical reads.

use bellwether_kv::{KeyRange, KvError, KvStore, PutRequest, RangeRequest, SortOrder, SortTarget};

/// Keys a..e written in the order e, d, c, b, a (so mod order is reversed
/// key order), then "c" updated: revisions 2..=7.
fn store() -> KvStore {
    let mut store = KvStore::new();
    for (key, value) in [
        ("e", "1"),
        ("d", "5"),
        ("c", "3"),
        ("b", "4"),
        ("a", "2"),
        ("c", "9"),
    ] {
        store.put(&PutRequest::new(key, value)).expect("put");
    }
    store
}

fn keys(store: &KvStore, request: &RangeRequest) -> Vec<String> {
    let response = store.range(request).expect("range");
    response
        .kvs
        .iter()
        .map(|kv| String::from_utf8(kv.key.clone()).unwrap())
        .collect()
}

#[test]
fn single_key_range_returns_only_that_key() {
    assert_eq!(keys(&store(), &RangeRequest::new("c", "")), ["c"]);
    assert!(keys(&store(), &RangeRequest::new("cc", "")).is_empty());
}

#[test]
fn prefix_range_returns_keys_with_the_prefix() {
    let mut store = store();
    store.put(&PutRequest::new("ba", "x")).unwrap();
    let prefix = KeyRange::prefix("b");
    assert_eq!(
        keys(&store, &RangeRequest::new(prefix.key, prefix.range_end)),
        ["b", "ba"]
    );
}

#[test]
fn zero_byte_range_end_means_all_keys_from_key() {
    assert_eq!(
        keys(&store(), &RangeRequest::new("c", vec![0])),
        ["c", "d", "e"]
    );
    assert_eq!(
        keys(&store(), &RangeRequest::new(vec![0], vec![0])).len(),
        5
    );
}

#[test]
fn limit_cuts_the_result_sets_more_and_keeps_the_full_count() {
    let request = RangeRequest {
        limit: 2,
        ..RangeRequest::new("a", vec![0])
    };
    let response = store().range(&request).unwrap();
    assert_eq!(response.kvs.len(), 2);
    assert!(response.more);
    assert_eq!(response.count, 5);
    let exact = RangeRequest {
        limit: 5,
        ..RangeRequest::new("a", vec![0])
    };
    assert!(!store().range(&exact).unwrap().more);
}

#[test]
fn sort_by_each_target_in_both_directions() {
    let store = store();
    let sorted = |sort_order, sort_target| {
        keys(
            &store,
            &RangeRequest {
                sort_order,
                sort_target,
                ..RangeRequest::new("a", "z")
            },
        )
    };
    assert_eq!(
        sorted(SortOrder::Descend, SortTarget::Key),
        ["e", "d", "c", "b", "a"]
    );
    assert_eq!(
        sorted(SortOrder::Ascend, SortTarget::Mod),
        ["e", "d", "b", "a", "c"]
    );
    assert_eq!(
        sorted(SortOrder::Ascend, SortTarget::Create),
        ["e", "d", "c", "b", "a"]
    );
    assert_eq!(
        sorted(SortOrder::Descend, SortTarget::Value),
        ["c", "d", "b", "a", "e"]
    );
    assert_eq!(
        sorted(SortOrder::Descend, SortTarget::Version),
        ["c", "a", "b", "d", "e"]
    );
    // A non-key target without an order implies ascending, as in etcd.
    assert_eq!(
        sorted(SortOrder::None, SortTarget::Value),
        ["e", "a", "b", "d", "c"]
    );
}

/// etcd without an order or a filter reads only the first limit + 1 keys
/// and sorts those by a non-key target: the window, not the range.
#[test]
fn a_non_key_target_without_an_order_sorts_the_limited_window() {
    let mut store = KvStore::new();
    for (key, value) in [("a", "3"), ("b", "2"), ("c", "1")] {
        store.put(&PutRequest::new(key, value)).unwrap();
    }
    let request = RangeRequest {
        limit: 1,
        sort_target: SortTarget::Value,
        ..RangeRequest::new("a", "z")
    };
    let response = store.range(&request).unwrap();
    let keys: Vec<&[u8]> = response.kvs.iter().map(|kv| kv.key.as_slice()).collect();
    assert_eq!(keys, [b"b".as_slice()], "of a and b, b's value is smaller");
    assert!(response.more);
    assert_eq!(response.count, 3);
}

#[test]
fn sort_then_limit_returns_the_top_entries() {
    let request = RangeRequest {
        limit: 1,
        sort_order: SortOrder::Descend,
        sort_target: SortTarget::Mod,
        ..RangeRequest::new("a", "z")
    };
    assert_eq!(keys(&store(), &request), ["c"]);
}

#[test]
fn count_only_returns_the_count_without_keys() {
    let request = RangeRequest {
        count_only: true,
        ..RangeRequest::new("b", "e")
    };
    let response = store().range(&request).unwrap();
    assert_eq!((response.count, response.kvs.len()), (3, 0));
}

#[test]
fn keys_only_strips_values_but_keeps_metadata() {
    let request = RangeRequest {
        keys_only: true,
        ..RangeRequest::new("c", "")
    };
    let kv = store().range(&request).unwrap().kvs.remove(0);
    assert!(kv.value.is_empty());
    assert_eq!((kv.version, kv.mod_revision), (2, 7));
}

#[test]
fn min_max_revision_filters_keep_matching_keys_only() {
    let store = store();
    let all = RangeRequest::new("a", "z");
    assert_eq!(
        keys(
            &store,
            &RangeRequest {
                min_mod_revision: 6,
                ..all.clone()
            }
        ),
        ["a", "c"]
    );
    assert_eq!(
        keys(
            &store,
            &RangeRequest {
                max_mod_revision: 3,
                ..all.clone()
            }
        ),
        ["d", "e"]
    );
    assert_eq!(
        keys(
            &store,
            &RangeRequest {
                min_create_revision: 5,
                ..all.clone()
            }
        ),
        ["a", "b"]
    );
    assert_eq!(
        keys(
            &store,
            &RangeRequest {
                max_create_revision: 2,
                ..all.clone()
            }
        ),
        ["e"]
    );
    let filtered = store
        .range(&RangeRequest {
            min_mod_revision: 6,
            ..all
        })
        .unwrap();
    assert_eq!(filtered.count, 5, "count ignores the filters, as in etcd");
}

#[test]
fn historical_read_sees_the_state_of_that_revision() {
    let store = store();
    let at_4 = store
        .range(&RangeRequest {
            revision: 4,
            ..RangeRequest::new("a", "z")
        })
        .unwrap();
    let found: Vec<&[u8]> = at_4.kvs.iter().map(|kv| kv.key.as_slice()).collect();
    assert_eq!(found, [b"c", b"d", b"e"]);
    assert_eq!(at_4.kvs[0].value, b"3", "c before its update");
    assert_eq!(at_4.revision, 7, "the header carries the current revision");
}

#[test]
fn future_revision_and_empty_key_are_rejected() {
    let store = store();
    let future = RangeRequest {
        revision: 8,
        ..RangeRequest::new("a", "")
    };
    assert_eq!(store.range(&future), Err(KvError::FutureRevision));
    assert_eq!(
        store.range(&RangeRequest::new("", "")),
        Err(KvError::KeyNotProvided)
    );
}

#[test]
fn inverted_range_is_empty() {
    assert!(keys(&store(), &RangeRequest::new("d", "b")).is_empty());
}

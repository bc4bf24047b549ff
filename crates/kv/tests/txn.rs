//! Txns: the compare matrix, range compares, branches, nested txns, one
//! revision per txn, and the duplicate-key and size rules.

use bellwether_kv::{
    Compare, CompareResult, CompareTarget, DeleteRangeRequest, KvError, KvStore, PutRequest,
    RangeRequest, RequestOp, ResponseOp, TxnRequest, TXN_OPS_MAX,
};

fn put_op(key: &str, value: &str) -> RequestOp {
    RequestOp::Put(PutRequest::new(key, value))
}

/// "a" created at 2 with lease 0, updated at 3: version 2, create 2, mod 3,
/// value "v2". "b" created at 4.
fn store() -> KvStore {
    let mut store = KvStore::new();
    store.put(&PutRequest::new("a", "v1")).unwrap();
    store.put(&PutRequest::new("a", "v2")).unwrap();
    store.put(&PutRequest::new("b", "v1")).unwrap();
    store
}

fn holds(store: &mut KvStore, compare: Compare) -> bool {
    let txn = TxnRequest {
        compare: vec![compare],
        ..TxnRequest::default()
    };
    store.txn(&txn).expect("txn").succeeded
}

#[test]
fn compare_matrix_over_every_target_and_result() {
    use CompareResult::{Equal, Greater, Less, NotEqual};
    let mut store = store();
    let cases = [
        (CompareTarget::Version(2), [true, false, false, false]),
        (CompareTarget::Version(1), [false, true, false, true]),
        (CompareTarget::Create(3), [false, false, true, true]),
        (CompareTarget::Mod(3), [true, false, false, false]),
        (
            CompareTarget::Value(b"v1".to_vec()),
            [false, true, false, true],
        ),
        (
            CompareTarget::Value(b"v3".to_vec()),
            [false, false, true, true],
        ),
        (CompareTarget::Lease(0), [true, false, false, false]),
    ];
    for (target, expected) in cases {
        for (result, want) in [Equal, Greater, Less, NotEqual].into_iter().zip(expected) {
            let compare = Compare::new("a", result, target.clone());
            assert_eq!(holds(&mut store, compare), want, "{target:?} {result:?}");
        }
    }
    assert_eq!(store.revision(), 4, "compare-only txns do not write");
}

#[test]
fn missing_key_compares_as_zero_but_fails_value_compares() {
    let mut store = store();
    assert!(holds(
        &mut store,
        Compare::new("zz", CompareResult::Equal, CompareTarget::Version(0))
    ));
    assert!(holds(
        &mut store,
        Compare::new("zz", CompareResult::Equal, CompareTarget::Create(0))
    ));
    let empty_value = Compare::new("zz", CompareResult::Equal, CompareTarget::Value(Vec::new()));
    assert!(!holds(&mut store, empty_value));
}

#[test]
fn range_compare_needs_every_key_in_the_range_to_hold() {
    let mut store = store();
    let versions_positive = Compare::new("a", CompareResult::Greater, CompareTarget::Version(0));
    assert!(holds(&mut store, versions_positive.with_range_end("c")));
    let all_version_2 = Compare::new("a", CompareResult::Equal, CompareTarget::Version(2));
    assert!(
        !holds(&mut store, all_version_2.clone().with_range_end("c")),
        "b has version 1"
    );
    assert!(holds(&mut store, all_version_2.with_range_end("b")));
    let from_key =
        Compare::new("a", CompareResult::Less, CompareTarget::Mod(5)).with_range_end(vec![0]);
    assert!(holds(&mut store, from_key));
}

#[test]
fn txn_writes_share_one_revision() {
    let mut store = store();
    let txn = TxnRequest {
        success: vec![
            put_op("x", "1"),
            put_op("y", "2"),
            RequestOp::DeleteRange(DeleteRangeRequest::new("b", "")),
        ],
        ..TxnRequest::default()
    };
    let response = store.txn(&txn).unwrap();
    assert!(response.succeeded);
    assert_eq!((response.revision, store.revision()), (5, 5));
    assert_eq!(store.get(b"x").unwrap().mod_revision, 5);
    assert_eq!(store.get(b"y").unwrap().mod_revision, 5);
    assert!(store.get(b"b").is_none());
}

#[test]
fn read_only_txn_does_not_advance_the_revision() {
    let mut store = store();
    let txn = TxnRequest {
        success: vec![RequestOp::Range(RangeRequest::new("a", ""))],
        ..TxnRequest::default()
    };
    let response = store.txn(&txn).unwrap();
    assert_eq!((response.revision, store.revision()), (4, 4));
    let ResponseOp::Range(range) = &response.responses[0] else {
        panic!("expected a range")
    };
    assert_eq!(range.kvs[0].value, b"v2");
}

#[test]
fn failed_compare_runs_the_failure_branch() {
    let mut store = store();
    let txn = TxnRequest {
        compare: vec![Compare::new(
            "a",
            CompareResult::Equal,
            CompareTarget::Version(0),
        )],
        success: vec![put_op("a", "won")],
        failure: vec![put_op("lost", "1")],
    };
    let response = store.txn(&txn).unwrap();
    assert!(!response.succeeded);
    assert_eq!(store.get(b"a").unwrap().value, b"v2");
    assert!(store.get(b"lost").is_some());
}

#[test]
fn reads_in_a_txn_see_its_earlier_writes() {
    let mut store = store();
    let txn = TxnRequest {
        success: vec![
            put_op("a", "new"),
            RequestOp::Range(RangeRequest::new("a", "")),
        ],
        ..TxnRequest::default()
    };
    let response = store.txn(&txn).unwrap();
    let ResponseOp::Range(range) = &response.responses[1] else {
        panic!("expected a range")
    };
    assert_eq!(
        (range.kvs[0].value.as_slice(), range.kvs[0].mod_revision),
        (b"new".as_slice(), 5)
    );
}

#[test]
fn nested_txn_compares_see_the_state_before_the_outer_writes() {
    let mut store = store();
    let nested = TxnRequest {
        compare: vec![Compare::new(
            "n",
            CompareResult::Equal,
            CompareTarget::Version(0),
        )],
        success: vec![put_op("inner", "ran")],
        failure: vec![],
    };
    let txn = TxnRequest {
        success: vec![put_op("n", "1"), RequestOp::Txn(nested)],
        ..TxnRequest::default()
    };
    let response = store.txn(&txn).unwrap();
    let ResponseOp::Txn(inner) = &response.responses[1] else {
        panic!("expected a txn")
    };
    assert!(inner.succeeded, "n did not exist before the txn");
    assert_eq!(inner.revision, 0, "etcd leaves a nested txn's header empty");
    assert_eq!(response.revision, 5);
    assert_eq!(
        store.get(b"inner").unwrap().mod_revision,
        store.get(b"n").unwrap().mod_revision
    );
}

/// The revision each nested response carries, as etcd 3.4 answers the same
/// txns (checked by hand with its JSON gateway, and by the differential
/// test): an operation sees the txn's revision as it stands when it runs.
fn revisions(response: &bellwether_kv::TxnResponse) -> Vec<i64> {
    let mut out = Vec::new();
    for op in &response.responses {
        match op {
            ResponseOp::Range(r) => out.push(r.revision),
            ResponseOp::Put(r) => out.push(r.revision),
            ResponseOp::DeleteRange(r) => out.push(r.revision),
            ResponseOp::Txn(r) => {
                out.push(r.revision);
                out.extend(revisions(r));
            }
        }
    }
    out
}

#[test]
fn nested_responses_carry_the_revision_their_operation_saw() {
    let mut store = store();
    let range_a = || RequestOp::Range(RangeRequest::new("a", ""));
    let nested = TxnRequest {
        success: vec![range_a(), put_op("x", "1"), range_a()],
        ..TxnRequest::default()
    };
    let txn = TxnRequest {
        success: vec![range_a(), RequestOp::Txn(nested), range_a()],
        ..TxnRequest::default()
    };
    let response = store.txn(&txn).unwrap();
    assert_eq!(response.revision, 5);
    // range (before the write), nested txn (empty header), its range, its
    // put, its range after the put, the outer range after it.
    assert_eq!(revisions(&response), vec![4, 0, 4, 5, 5, 5]);

    let delete = |key: &str| RequestOp::DeleteRange(DeleteRangeRequest::new(key, ""));
    let nothing_then_b = TxnRequest {
        success: vec![delete("none"), delete("b"), delete("none")],
        ..TxnRequest::default()
    };
    let response = store.txn(&nothing_then_b).unwrap();
    assert_eq!(revisions(&response), vec![5, 6, 6]);
    assert_eq!(response.revision, 6);
}

#[test]
fn duplicate_writes_in_one_txn_are_rejected() {
    let mut store = store();
    let put_put = TxnRequest {
        success: vec![put_op("k", "1"), put_op("k", "2")],
        ..TxnRequest::default()
    };
    assert_eq!(store.txn(&put_put), Err(KvError::DuplicateKey));
    let delete = RequestOp::DeleteRange(DeleteRangeRequest::new("j", "l"));
    let put_delete = TxnRequest {
        success: vec![put_op("k", "1"), delete],
        ..TxnRequest::default()
    };
    assert_eq!(store.txn(&put_delete), Err(KvError::DuplicateKey));
    let nested = TxnRequest {
        success: vec![put_op("k", "2")],
        ..TxnRequest::default()
    };
    let nested_dup = TxnRequest {
        success: vec![put_op("k", "1"), RequestOp::Txn(nested)],
        ..TxnRequest::default()
    };
    assert_eq!(store.txn(&nested_dup), Err(KvError::DuplicateKey));
    let branches = TxnRequest {
        success: vec![put_op("k", "1")],
        failure: vec![put_op("k", "2")],
        ..TxnRequest::default()
    };
    assert!(
        store.txn(&branches).is_ok(),
        "the two top-level branches never both run"
    );
}

#[test]
fn too_many_operations_are_rejected() {
    let mut store = store();
    let success = (0..=TXN_OPS_MAX)
        .map(|i| put_op(&format!("k{i}"), "v"))
        .collect();
    let txn = TxnRequest {
        success,
        ..TxnRequest::default()
    };
    assert_eq!(store.txn(&txn), Err(KvError::TooManyOps));
    assert_eq!(store.revision(), 4);
    // Compares count too, as in etcd.
    let compare = (0..=TXN_OPS_MAX)
        .map(|i| {
            Compare::new(
                format!("k{i}"),
                CompareResult::Equal,
                CompareTarget::Version(0),
            )
        })
        .collect();
    let txn = TxnRequest {
        compare,
        success: vec![put_op("a", "v")],
        ..TxnRequest::default()
    };
    assert_eq!(store.txn(&txn), Err(KvError::TooManyOps));
    assert_eq!(store.revision(), 4);
}

#[test]
fn a_failing_check_applies_nothing() {
    let mut store = store();
    let txn = TxnRequest {
        success: vec![
            put_op("x", "1"),
            RequestOp::Put(PutRequest {
                lease: 99,
                ..PutRequest::new("y", "2")
            }),
        ],
        ..TxnRequest::default()
    };
    assert_eq!(store.txn(&txn), Err(KvError::LeaseNotFound));
    assert!(store.get(b"x").is_none());
    assert_eq!(store.revision(), 4);
}

#[test]
fn a_txn_of_ranges_only_is_read_only_and_read_txn_leaves_the_store_as_it_was() {
    let mut store = store();
    let snapshot = store.snapshot();
    let reads = TxnRequest {
        compare: vec![Compare::new(
            "a",
            CompareResult::Equal,
            CompareTarget::Mod(3),
        )],
        success: vec![RequestOp::Range(RangeRequest::new("a", ""))],
        failure: vec![RequestOp::Range(RangeRequest::new("b", ""))],
    };
    assert!(reads.is_read_only());
    let response = store.read_txn(&reads).expect("read txn");
    assert!(response.succeeded);
    let ResponseOp::Range(range) = &response.responses[0] else {
        panic!("a range answer: {response:?}");
    };
    assert_eq!(range.kvs[0].value, b"v2");
    assert_eq!(
        store.snapshot(),
        snapshot,
        "a read-only txn changed the store"
    );
    // Any write, in either branch, or a nested txn, is not read-only.
    for op in [
        put_op("c", "v"),
        RequestOp::DeleteRange(DeleteRangeRequest::new("nothing", "")),
        RequestOp::Txn(TxnRequest::default()),
    ] {
        let writes = TxnRequest {
            failure: vec![op],
            ..reads.clone()
        };
        assert!(!writes.is_read_only(), "{writes:?}");
    }
}

#[test]
#[should_panic(expected = "read_txn takes only txns that read")]
fn read_txn_refuses_a_txn_that_may_write() {
    let mut store = store();
    let writes = TxnRequest {
        failure: vec![put_op("c", "v")],
        ..TxnRequest::default()
    };
    let _ = store.read_txn(&writes);
}

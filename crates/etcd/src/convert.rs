//! Conversions between the wire types (`bellwether_api`) and the store's
//! types (`bellwether_kv`). Kept in one place so the mapping of every field
//! can be read side by side.

use bellwether_api::{etcdserverpb as pb, mvccpb};
use bellwether_kv as kv;

/// A stored key-value as sent on the wire.
pub fn key_value(kv: kv::KeyValue) -> mvccpb::KeyValue {
    mvccpb::KeyValue {
        key: kv.key,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        value: kv.value,
        lease: kv.lease,
    }
}

/// A wire range request for the store.
pub fn range_request(r: pb::RangeRequest) -> kv::RangeRequest {
    kv::RangeRequest {
        key: r.key,
        range_end: r.range_end,
        limit: r.limit,
        revision: r.revision,
        sort_order: match r.sort_order {
            1 => kv::SortOrder::Ascend,
            2 => kv::SortOrder::Descend,
            _ => kv::SortOrder::None,
        },
        sort_target: match r.sort_target {
            1 => kv::SortTarget::Version,
            2 => kv::SortTarget::Create,
            3 => kv::SortTarget::Mod,
            4 => kv::SortTarget::Value,
            _ => kv::SortTarget::Key,
        },
        serializable: r.serializable,
        keys_only: r.keys_only,
        count_only: r.count_only,
        min_mod_revision: r.min_mod_revision,
        max_mod_revision: r.max_mod_revision,
        min_create_revision: r.min_create_revision,
        max_create_revision: r.max_create_revision,
    }
}

/// A store range response for the wire (header filled in by the caller).
pub fn range_response(r: kv::RangeResponse) -> pb::RangeResponse {
    // The keys sent are among those counted (filters and the limit only
    // leave keys out), as etcd's clients expect of `count`.
    assert!(
        r.kvs.len() as u64 <= r.count.max(0) as u64,
        "a range returns no more keys than it counts"
    );
    pb::RangeResponse {
        header: None,
        kvs: r.kvs.into_iter().map(key_value).collect(),
        more: r.more,
        count: r.count,
    }
}

/// A wire put for the store.
pub fn put_request(r: pb::PutRequest) -> kv::PutRequest {
    kv::PutRequest {
        key: r.key,
        value: r.value,
        lease: r.lease,
        prev_kv: r.prev_kv,
        ignore_value: r.ignore_value,
        ignore_lease: r.ignore_lease,
    }
}

/// A store put response for the wire.
pub fn put_response(r: kv::PutResponse) -> pb::PutResponse {
    pb::PutResponse {
        header: None,
        prev_kv: r.prev_kv.map(key_value),
    }
}

/// A wire delete for the store.
pub fn delete_request(r: pb::DeleteRangeRequest) -> kv::DeleteRangeRequest {
    kv::DeleteRangeRequest {
        key: r.key,
        range_end: r.range_end,
        prev_kv: r.prev_kv,
    }
}

/// A store delete response for the wire.
pub fn delete_response(r: kv::DeleteRangeResponse) -> pb::DeleteRangeResponse {
    // With prev_kv, one previous state per deleted key; without, none.
    assert!(
        r.prev_kvs.is_empty() || r.prev_kvs.len() as u64 == r.deleted.max(0) as u64,
        "a delete returns the previous state of each key it deleted"
    );
    pb::DeleteRangeResponse {
        header: None,
        deleted: r.deleted,
        prev_kvs: r.prev_kvs.into_iter().map(key_value).collect(),
    }
}

/// A wire compare for the store; `None` for an unknown target or result.
fn compare(c: pb::Compare) -> Option<kv::Compare> {
    use pb::compare::TargetUnion;
    let result = match c.result {
        0 => kv::CompareResult::Equal,
        1 => kv::CompareResult::Greater,
        2 => kv::CompareResult::Less,
        3 => kv::CompareResult::NotEqual,
        _ => return None,
    };
    let target = match (c.target, c.target_union) {
        (0, Some(TargetUnion::Version(v))) => kv::CompareTarget::Version(v),
        (0, None) => kv::CompareTarget::Version(0),
        (1, Some(TargetUnion::CreateRevision(v))) => kv::CompareTarget::Create(v),
        (1, None) => kv::CompareTarget::Create(0),
        (2, Some(TargetUnion::ModRevision(v))) => kv::CompareTarget::Mod(v),
        (2, None) => kv::CompareTarget::Mod(0),
        (3, Some(TargetUnion::Value(v))) => kv::CompareTarget::Value(v),
        (3, None) => kv::CompareTarget::Value(Vec::new()),
        (4, Some(TargetUnion::Lease(v))) => kv::CompareTarget::Lease(v),
        (4, None) => kv::CompareTarget::Lease(0),
        _ => return None,
    };
    Some(kv::Compare {
        key: c.key,
        range_end: c.range_end,
        result,
        target,
    })
}

fn request_op(op: pb::RequestOp) -> Option<kv::RequestOp> {
    use pb::request_op::Request;
    Some(match op.request? {
        Request::RequestRange(r) => kv::RequestOp::Range(range_request(r)),
        Request::RequestPut(r) => kv::RequestOp::Put(put_request(r)),
        Request::RequestDeleteRange(r) => kv::RequestOp::DeleteRange(delete_request(r)),
        Request::RequestTxn(r) => kv::RequestOp::Txn(txn_request(r)?),
    })
}

/// A wire txn for the store; `None` when it holds an unknown compare or an
/// empty operation.
pub fn txn_request(r: pb::TxnRequest) -> Option<kv::TxnRequest> {
    Some(kv::TxnRequest {
        compare: r.compare.into_iter().map(compare).collect::<Option<_>>()?,
        success: r
            .success
            .into_iter()
            .map(request_op)
            .collect::<Option<_>>()?,
        failure: r
            .failure
            .into_iter()
            .map(request_op)
            .collect::<Option<_>>()?,
    })
}

/// The header of a response nested in a txn. etcd fills in only the
/// revision there (the one the operation saw); cluster, member and term stay
/// zero, and a nested txn's header is empty. Clients read a nested put's
/// revision from it, so it must be present.
fn nested_header(revision: i64) -> Option<pb::ResponseHeader> {
    Some(pb::ResponseHeader {
        revision,
        ..pb::ResponseHeader::default()
    })
}

fn response_op(op: kv::ResponseOp) -> pb::ResponseOp {
    use pb::response_op::Response;
    let response = match op {
        kv::ResponseOp::Range(r) => {
            let header = nested_header(r.revision);
            Response::ResponseRange(pb::RangeResponse {
                header,
                ..range_response(r)
            })
        }
        kv::ResponseOp::Put(r) => {
            let header = nested_header(r.revision);
            Response::ResponsePut(pb::PutResponse {
                header,
                ..put_response(r)
            })
        }
        kv::ResponseOp::DeleteRange(r) => {
            let header = nested_header(r.revision);
            Response::ResponseDeleteRange(pb::DeleteRangeResponse {
                header,
                ..delete_response(r)
            })
        }
        kv::ResponseOp::Txn(r) => {
            let header = nested_header(r.revision);
            Response::ResponseTxn(pb::TxnResponse {
                header,
                ..txn_response(r)
            })
        }
    };
    pb::ResponseOp {
        response: Some(response),
    }
}

/// A store txn response for the wire. The outer header is filled in by the
/// caller; the nested responses carry theirs (see [`nested_header`]).
pub fn txn_response(r: kv::TxnResponse) -> pb::TxnResponse {
    pb::TxnResponse {
        header: None,
        succeeded: r.succeeded,
        responses: r.responses.into_iter().map(response_op).collect(),
    }
}

//! Key layout and the small requests the recipes share.
//!
//! An election (or lock) NAME keeps one key per campaigner under the
//! prefix `NAME/`: `NAME/<lease id in hex>`, attached to the campaigner's
//! lease. This is the layout etcd's own election and lock recipes use, so
//! `etcdctl elect -l NAME` observes bellwether-client's elections and the
//! two can contend for the same name. The leader is the key with the
//! lowest create revision; that revision is the leader's fencing token.

use crate::client::Client;
use crate::error::{Error, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::mvccpb;

/// The longest election or lock name, in bytes.
pub const NAME_BYTES_MAX: usize = 1024;

/// The longest campaign value, in bytes (etcd refuses requests over about
/// 1.5 MiB).
pub const VALUE_BYTES_MAX: usize = 1024 * 1024;

/// Refuses an empty or oversized name.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("the name must not be empty".into()));
    }
    if name.len() > NAME_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "the name is {} bytes; at most {NAME_BYTES_MAX} are allowed",
            name.len()
        )));
    }
    Ok(())
}

/// Refuses an oversized value.
pub(crate) fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > VALUE_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "the value is {} bytes; at most {VALUE_BYTES_MAX} are allowed",
            value.len()
        )));
    }
    Ok(())
}

/// `NAME/`.
pub(crate) fn prefix(name: &str) -> Vec<u8> {
    format!("{name}/").into_bytes()
}

/// The campaigner key of `lease_id` under `name`.
pub(crate) fn campaign_key(name: &str, lease_id: i64) -> Vec<u8> {
    format!("{name}/{lease_id:x}").into_bytes()
}

/// The end of the range of every key that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: the range runs to the end of the key space.
    vec![0]
}

/// A compare that holds while `key` was created at `create_revision`.
pub(crate) fn created_at(key: &[u8], create_revision: i64) -> pb::Compare {
    pb::Compare {
        result: pb::compare::CompareResult::Equal as i32,
        target: pb::compare::CompareTarget::Create as i32,
        key: key.to_vec(),
        range_end: Vec::new(),
        target_union: Some(pb::compare::TargetUnion::CreateRevision(create_revision)),
    }
}

/// A put request operation.
pub(crate) fn put_op(key: &[u8], value: &[u8], lease: i64) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            lease,
            ..pb::PutRequest::default()
        })),
    }
}

/// A delete request operation for one key.
pub(crate) fn delete_op(key: &[u8]) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(pb::request_op::Request::RequestDeleteRange(
            pb::DeleteRangeRequest {
                key: key.to_vec(),
                ..pb::DeleteRangeRequest::default()
            },
        )),
    }
}

/// A range operation for one key.
pub(crate) fn get_op(key: &[u8]) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(pb::request_op::Request::RequestRange(pb::RangeRequest {
            key: key.to_vec(),
            ..pb::RangeRequest::default()
        })),
    }
}

/// The first (oldest by create revision) key under `prefix`, optionally
/// only among keys created at or before `created_max`; with `newest`, the
/// newest such key instead. Returns it with the header revision of the read.
pub(crate) async fn first_under(
    client: &Client,
    prefix: &[u8],
    created_max: i64,
    newest: bool,
) -> Result<(Option<mvccpb::KeyValue>, i64)> {
    let order = if newest {
        pb::range_request::SortOrder::Descend
    } else {
        pb::range_request::SortOrder::Ascend
    };
    let request = pb::RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        limit: 1,
        sort_order: order as i32,
        sort_target: pb::range_request::SortTarget::Create as i32,
        max_create_revision: created_max,
        ..pb::RangeRequest::default()
    };
    let response = client.range(request).await?;
    let revision = response.header.map_or(0, |h| h.revision);
    Ok((response.kvs.into_iter().next(), revision))
}

pub(crate) use crate::watch_hub::WatchEnd;

/// Waits for the first event on `key` (a prefix when `range_end` is set)
/// from `start_revision` on: any event, or with `deletes_only` only a
/// delete. Runs on the client's shared watch stream.
pub(crate) async fn wait_event(
    client: &Client,
    key: &[u8],
    range_end: Vec<u8>,
    start_revision: i64,
    deletes_only: bool,
) -> Result<WatchEnd> {
    let filters = if deletes_only {
        vec![pb::watch_create_request::FilterType::Noput as i32]
    } else {
        Vec::new()
    };
    let create = pb::WatchCreateRequest {
        key: key.to_vec(),
        range_end,
        start_revision,
        filters,
        ..pb::WatchCreateRequest::default()
    };
    match client.hub().first_event(create).await {
        WatchEnd::Broken => Err(Error::Malformed("the watch broke; looking again")),
        end => Ok(end),
    }
}

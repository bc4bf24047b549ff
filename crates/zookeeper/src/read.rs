//! ZooKeeper's reads, answered from a member's store.
//!
//! A read is not logged: the member answers it from the state it has
//! applied, as a ZooKeeper server does. The server first makes sure that
//! state is at least as new as anything the session has seen.

use crate::acl::{allowed, perms, AuthId};
use crate::codes::ErrorCode;
use crate::jute::JuteWriter;
use crate::request::Request;
use crate::stat::Acl;
use crate::tree::read_node;
use crate::znode::Znode;
use crate::znode::{children_prefix, deeper_prefix, invalid_path, path_of, split};
use bellwether_kv::{KeyRange, KvStore, RangeRequest};

/// The answer to a read: an error code and, on success, the record.
pub type ReadAnswer = (ErrorCode, Vec<u8>);

/// The names of `path`'s children, in name order, the system nodes among
/// them whether written yet or not.
pub fn children(store: &KvStore, path: &str) -> Vec<String> {
    let mut names = stored_children(store, path);
    for system in Znode::system_children(path) {
        if let Err(at) = names.binary_search_by(|n| n.as_str().cmp(system)) {
            names.insert(at, system.to_string());
        }
    }
    names
}

/// The names of `path`'s children the store holds, in name order.
fn stored_children(store: &KvStore, path: &str) -> Vec<String> {
    let prefix = children_prefix(path);
    let range = KeyRange::prefix(prefix.clone());
    let request = RangeRequest {
        key: range.key,
        range_end: range.range_end,
        keys_only: true,
        ..RangeRequest::default()
    };
    let found = store
        .range(&request)
        .expect("a range at the current revision");
    found
        .kvs
        .iter()
        .filter_map(|kv| {
            let name = kv.key.strip_prefix(prefix.as_slice())?;
            String::from_utf8(name.to_vec()).ok()
        })
        .collect()
}

/// Answers a read request (`Request::is_write` false, not a ping, session
/// or watch request) for a caller with `ids`.
pub fn read(store: &KvStore, request: &Request, session: i64, ids: &[AuthId]) -> ReadAnswer {
    match answer(store, request, session, ids) {
        Ok(record) => (ErrorCode::Ok, record),
        Err(code) => (code, Vec::new()),
    }
}

fn checked(path: &str) -> Result<&str, ErrorCode> {
    match invalid_path(path) {
        Some(_) => Err(ErrorCode::BadArguments),
        None => Ok(path),
    }
}

/// NOAUTH unless `ids` may do one of `perm` on `node`.
fn may(node: &Znode, perm: i32, ids: &[AuthId]) -> Result<(), ErrorCode> {
    if allowed(&node.acl, perm, ids) {
        Ok(())
    } else {
        Err(ErrorCode::NoAuth)
    }
}

fn answer(
    store: &KvStore,
    request: &Request,
    session: i64,
    ids: &[AuthId],
) -> Result<Vec<u8>, ErrorCode> {
    let mut w = JuteWriter::new();
    match request {
        Request::Exists { path, .. } => {
            let node = read_node(store, checked(path)?).ok_or(ErrorCode::NoNode)?;
            node.stat().write(&mut w);
        }
        Request::GetData { path, .. } => {
            let node = read_node(store, checked(path)?).ok_or(ErrorCode::NoNode)?;
            may(&node, perms::READ, ids)?;
            w.buffer_or_null((!node.data_null).then_some(node.data.as_slice()));
            node.stat().write(&mut w);
        }
        Request::GetChildren {
            path, with_stat, ..
        } => {
            let node = read_node(store, checked(path)?).ok_or(ErrorCode::NoNode)?;
            may(&node, perms::READ, ids)?;
            w.strings(&children(store, path));
            if *with_stat {
                node.stat().write(&mut w);
            }
        }
        Request::GetAcl { path } => {
            let node = read_node(store, checked(path)?).ok_or(ErrorCode::NoNode)?;
            may(&node, perms::READ | perms::ADMIN, ids)?;
            // As ZooKeeper: a caller who may read but not administer the
            // node sees digest ids without their password hashes.
            if allowed(&node.acl, perms::ADMIN, ids) {
                Acl::write_list(&node.acl, &mut w);
            } else {
                let redacted: Vec<Acl> = node.acl.iter().map(redacted).collect();
                Acl::write_list(&redacted, &mut w);
            }
            node.stat().write(&mut w);
        }
        Request::Sync { path } => {
            w.string(path);
        }
        Request::GetAllChildrenNumber { path } => {
            let node = read_node(store, checked(path)?).ok_or(ErrorCode::NoNode)?;
            may(&node, perms::READ, ids)?;
            let count = |prefix: Vec<u8>| {
                let range = KeyRange::prefix(prefix);
                let request = RangeRequest {
                    key: range.key,
                    range_end: range.range_end,
                    count_only: true,
                    ..RangeRequest::default()
                };
                store
                    .range(&request)
                    .map(|found| found.count)
                    .unwrap_or_default()
            };
            // The system nodes below `path` that are not stored count too.
            let unstored = crate::znode::SYSTEM_PATHS
                .iter()
                .filter(|p| **p != "/" && **p != path.as_str())
                .filter(|p| path == "/" || p.starts_with(&format!("{path}/")))
                .filter(|p| store.get(&crate::znode::node_key(p)).is_none())
                .count() as i64;
            let all = count(children_prefix(path)) + count(deeper_prefix(path)) + unstored;
            w.int(i32::try_from(all).unwrap_or(i32::MAX));
        }
        Request::GetEphemerals { prefix } => {
            let mut paths: Vec<String> = store
                .lease_keys(session)
                .unwrap_or_default()
                .iter()
                .filter_map(|key| path_of(key))
                .filter(|path| path.starts_with(prefix.as_str()))
                .collect();
            paths.sort();
            w.strings(&paths);
        }
        Request::MultiRead(ops) => {
            for op in ops {
                match answer(store, op, session, ids) {
                    Ok(record) if is_multi_read_op(op) => {
                        w.int(op.op()).bool(false).int(0).raw(&record);
                    }
                    Ok(_) => {
                        let code = ErrorCode::BadArguments.code();
                        w.int(crate::codes::op::ERROR)
                            .bool(false)
                            .int(code)
                            .int(code);
                    }
                    Err(code) => {
                        let code = code.code();
                        w.int(crate::codes::op::ERROR)
                            .bool(false)
                            .int(code)
                            .int(code);
                    }
                }
            }
            w.int(-1).bool(true).int(-1);
        }
        _ => return Err(ErrorCode::BadArguments),
    }
    Ok(w.into_bytes())
}

/// `entry` with a digest id's password hash replaced by `x`.
fn redacted(entry: &Acl) -> Acl {
    let mut entry = entry.clone();
    if entry.scheme == "digest" {
        if let Some((user, _)) = entry.id.split_once(':') {
            entry.id = format!("{user}:x");
        }
    }
    entry
}

fn is_multi_read_op(request: &Request) -> bool {
    matches!(
        request,
        Request::GetData { .. } | Request::GetChildren { .. }
    )
}

/// The parent of `path` (not the root).
pub fn parent(path: &str) -> &str {
    split(path).0
}

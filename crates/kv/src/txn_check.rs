//! Checks on a txn that need no store state: operation counts, nesting
//! depth, empty keys and duplicate writes.
//!
//! The duplicate-key rule is etcd's: within one branch path, a key may be
//! put at most once and may not be both put and deleted, because all writes
//! of a txn share one revision and a key can have only one state per
//! revision. Nested txns count with the branch that contains them; puts in
//! a nested txn's two branches are merged, since either may run.

use crate::{KeyRange, KvError, RequestOp, TxnRequest, TXN_DEPTH_MAX, TXN_OPS_MAX};
use std::collections::BTreeSet;

/// Keys a branch writes: deleted ranges and put keys.
#[derive(Default)]
struct Writes {
    /// Ranges deleted. Deletes may overlap each other.
    deletes: Vec<KeyRange>,
    /// Keys put. Each at most once.
    puts: BTreeSet<Vec<u8>>,
}

/// Checks a txn's shape. Both top-level branches are checked separately:
/// only one of them runs.
pub(crate) fn check_txn(txn: &TxnRequest, depth: usize) -> Result<(), KvError> {
    if depth > TXN_DEPTH_MAX {
        return Err(KvError::TxnTooDeep {
            depth_max: TXN_DEPTH_MAX,
        });
    }
    // etcd bounds the largest of the three lists, compares included.
    let ops = txn
        .compare
        .len()
        .max(txn.success.len())
        .max(txn.failure.len());
    if ops > TXN_OPS_MAX {
        return Err(KvError::TooManyOps);
    }
    if txn.compare.iter().any(|compare| compare.key.is_empty()) {
        return Err(KvError::KeyNotProvided);
    }
    for op in txn.success.iter().chain(&txn.failure) {
        check_op(op, depth)?;
    }
    branch_writes(&txn.success)?;
    branch_writes(&txn.failure)?;
    Ok(())
}

/// Checks one operation's own shape, recursing into nested txns.
fn check_op(op: &RequestOp, depth: usize) -> Result<(), KvError> {
    let key = match op {
        RequestOp::Range(range) => &range.key,
        RequestOp::Put(put) => &put.key,
        RequestOp::DeleteRange(delete) => &delete.key,
        RequestOp::Txn(txn) => return check_txn(txn, depth + 1),
    };
    if key.is_empty() {
        return Err(KvError::KeyNotProvided);
    }
    Ok(())
}

/// Collects a branch's writes, failing on a key written twice.
fn branch_writes(ops: &[RequestOp]) -> Result<Writes, KvError> {
    let mut writes = Writes::default();
    for op in ops {
        match op {
            RequestOp::Range(_) => {}
            RequestOp::Put(put) => {
                if !writes.puts.insert(put.key.clone()) {
                    return Err(KvError::DuplicateKey);
                }
            }
            RequestOp::DeleteRange(delete) => writes.deletes.push(delete.key_range()),
            RequestOp::Txn(txn) => merge_nested(&mut writes, txn)?,
        }
    }
    let put_deleted = writes
        .puts
        .iter()
        .any(|key| writes.deletes.iter().any(|range| range.contains(key)));
    if put_deleted {
        return Err(KvError::DuplicateKey);
    }
    Ok(writes)
}

/// Adds a nested txn's writes to its enclosing branch's.
fn merge_nested(writes: &mut Writes, txn: &TxnRequest) -> Result<(), KvError> {
    let success = branch_writes(&txn.success)?;
    let failure = branch_writes(&txn.failure)?;
    for key in success.puts.iter().chain(&failure.puts) {
        if writes.puts.contains(key) {
            return Err(KvError::DuplicateKey);
        }
    }
    writes.puts.extend(success.puts);
    writes.puts.extend(failure.puts);
    writes.deletes.extend(success.deletes);
    writes.deletes.extend(failure.deletes);
    Ok(())
}

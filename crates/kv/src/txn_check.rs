//! Checks on a txn that need no store state: operation counts, nesting
//! depth, empty keys and duplicate writes.
//!
//! The duplicate-key rule: a txn is refused when two of its writes to one
//! key can run together, because all writes of a txn share one revision
//! and the store keeps one state per key and revision. Two writes can run
//! together unless they lie in opposite branches of one nested txn (only
//! one branch runs); the two top-level branches are checked apart. A put
//! conflicts with another put of its key and with a delete whose range
//! holds it.
//!
//! etcd 3.4 refuses every txn this rule refuses but two shapes, which it
//! accepts (its own check misses them and its store writes the key twice
//! at sub-revisions): a delete whose range ends in `\0` ("to the end of
//! the keyspace") over a put of the same branch, and a nested txn that
//! deletes a key an earlier nested txn of the branch puts. Both are listed
//! in docs/architecture.md's differences.

use crate::{KeyRange, KvError, RequestOp, TxnRequest, TXN_DEPTH_MAX, TXN_OPS_MAX};
use std::collections::BTreeMap;

/// The writes a list of operations may make, each with the index of the
/// operation of the list it belongs to.
#[derive(Default)]
struct Writes {
    /// Put keys, by the operation that puts them.
    puts: BTreeMap<Vec<u8>, usize>,
    /// Deleted ranges, by operation. Deletes may overlap each other.
    deletes: Vec<(KeyRange, usize)>,
}

/// Checks a client's txn: its shape at every depth, then the writes of
/// each top-level branch, nested txns included (only one top-level branch
/// runs).
pub(crate) fn check_request(txn: &TxnRequest) -> Result<(), KvError> {
    check_txn(txn, 1)?;
    branch_writes(&txn.success)?;
    branch_writes(&txn.failure)?;
    Ok(())
}

/// Checks a txn's shape. Both top-level branches are checked separately:
/// only one of them runs.
fn check_txn(txn: &TxnRequest, depth: usize) -> Result<(), KvError> {
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
    Ok(())
}

/// Checks one operation's own shape, recursing into nested txns.
fn check_op(op: &RequestOp, depth: usize) -> Result<(), KvError> {
    let key = match op {
        RequestOp::Range(range) => &range.key,
        RequestOp::Put(put) => {
            // As etcd, on every put of the tree, taken or not, before the
            // duplicate-key rule.
            if let Some(error) = put.shape_error() {
                return Err(error);
            }
            &put.key
        }
        RequestOp::DeleteRange(delete) => &delete.key,
        RequestOp::Txn(txn) => return check_txn(txn, depth + 1),
    };
    if key.is_empty() {
        return Err(KvError::KeyNotProvided);
    }
    Ok(())
}

/// The writes `ops` may make; refuses the list if two writes of one key
/// can run together. The operations of a list all run, so writes of two
/// different operations can meet; a nested txn's two branches cannot, so
/// its writes count as one operation's, after each branch was checked on
/// its own.
fn branch_writes(ops: &[RequestOp]) -> Result<Writes, KvError> {
    let mut writes = Writes::default();
    for (index, op) in ops.iter().enumerate() {
        let (puts, deletes): (Vec<Vec<u8>>, Vec<KeyRange>) = match op {
            RequestOp::Range(_) => continue,
            RequestOp::Put(put) => (vec![put.key.clone()], Vec::new()),
            RequestOp::DeleteRange(delete) => (Vec::new(), vec![delete.key_range()]),
            RequestOp::Txn(txn) => {
                let success = branch_writes(&txn.success)?;
                let failure = branch_writes(&txn.failure)?;
                let mut puts: Vec<Vec<u8>> = success.puts.into_keys().collect();
                puts.extend(failure.puts.into_keys());
                let deletes = success
                    .deletes
                    .into_iter()
                    .chain(failure.deletes)
                    .map(|(range, _)| range)
                    .collect();
                (puts, deletes)
            }
        };
        for key in puts {
            if writes
                .puts
                .insert(key, index)
                .is_some_and(|earlier| earlier != index)
            {
                return Err(KvError::DuplicateKey);
            }
        }
        writes
            .deletes
            .extend(deletes.into_iter().map(|range| (range, index)));
    }
    let put_deleted = writes.puts.iter().any(|(key, put_by)| {
        writes
            .deletes
            .iter()
            .any(|(range, deleted_by)| deleted_by != put_by && range.contains(key))
    });
    if put_deleted {
        return Err(KvError::DuplicateKey);
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeleteRangeRequest, PutRequest};

    fn put(key: &str) -> RequestOp {
        RequestOp::Put(PutRequest::new(key, "v"))
    }

    fn delete(key: &str, end: &str) -> RequestOp {
        RequestOp::DeleteRange(DeleteRangeRequest::new(key, end))
    }

    fn nested(success: Vec<RequestOp>, failure: Vec<RequestOp>) -> RequestOp {
        RequestOp::Txn(TxnRequest {
            success,
            failure,
            ..TxnRequest::default()
        })
    }

    #[test]
    fn writes_in_opposite_branches_of_a_nested_txn_never_meet() {
        // etcd accepts these too: only one of the nested branches runs.
        assert!(branch_writes(&[nested(vec![delete("k", "")], vec![put("k")])]).is_ok());
        assert!(branch_writes(&[
            put("j"),
            nested(vec![delete("k", "")], vec![put("k"), put("l")])
        ])
        .is_ok());
        assert!(branch_writes(&[nested(vec![put("k")], vec![put("k")])]).is_ok());
        assert!(
            branch_writes(&[nested(vec![nested(vec![put("k")], vec![])], vec![put("k")])]).is_ok()
        );
    }

    #[test]
    fn writes_that_can_run_together_are_refused_wherever_they_sit() {
        let refused = |ops: &[RequestOp]| matches!(branch_writes(ops), Err(KvError::DuplicateKey));
        assert!(refused(&[put("k"), put("k")]));
        assert!(refused(&[put("k"), delete("j", "l")]));
        assert!(refused(&[put("k"), nested(vec![put("k")], vec![])]));
        assert!(refused(&[
            nested(vec![put("k")], vec![]),
            nested(vec![], vec![put("k")])
        ]));
        // Two shapes etcd 3.4 accepts (docs/architecture.md): a delete to
        // the end of the keyspace, and a later nested delete of an earlier
        // nested put.
        assert!(refused(&[put("k"), delete("a", "\0")]));
        assert!(refused(&[
            nested(vec![put("k")], vec![]),
            nested(vec![delete("k", "")], vec![])
        ]));
        // Deletes may overlap each other.
        assert!(!refused(&[delete("a", "z"), delete("k", "")]));
    }
}

//! The two answers to "does this txn write a key twice?": etcd 3.4's and
//! bellwether's, each written out here from its definition so that the
//! differential test can tell the documented difference from a bug.
//!
//! bellwether refuses a txn in which two writes of one key (two puts, or a
//! put and a delete whose range holds it) can run together, that is,
//! unless they lie in opposite branches of one nested txn. etcd 3.4
//! refuses the same txns, except that its check reads a range ending in
//! `\0` as empty, and checks a nested txn's puts only against the deletes
//! before it. Its store then writes the key twice, at two sub-revisions
//! of one revision; bellwether's keeps one state per key and revision.
//! The test leaves out the calls the two rules judge differently.

use bellwether_api::etcdserverpb as pb;
use pb::request_op::Request;
use std::collections::BTreeSet;

/// A write and the nested-txn branches that lead to it.
struct Write {
    key: Vec<u8>,
    /// None for a put; the range end for a delete ("" for one key).
    delete_end: Option<Vec<u8>>,
    path: Vec<(usize, bool)>,
}

fn collect(
    ops: &[pb::RequestOp],
    path: &mut Vec<(usize, bool)>,
    next: &mut usize,
    out: &mut Vec<Write>,
) {
    for op in ops {
        match &op.request {
            Some(Request::RequestPut(put)) => out.push(Write {
                key: put.key.clone(),
                delete_end: None,
                path: path.clone(),
            }),
            Some(Request::RequestDeleteRange(delete)) => out.push(Write {
                key: delete.key.clone(),
                delete_end: Some(delete.range_end.clone()),
                path: path.clone(),
            }),
            Some(Request::RequestTxn(txn)) => {
                let id = *next;
                *next += 1;
                for (branch, taken) in [(&txn.success, true), (&txn.failure, false)] {
                    path.push((id, taken));
                    collect(branch, path, next, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
}

/// Whether a delete of `key..end` holds `put`, `\0` meaning no end.
fn holds(key: &[u8], end: &[u8], put: &[u8]) -> bool {
    if end.is_empty() {
        return key == put;
    }
    key <= put && (end == [0] || put < end)
}

fn branch_ours(ops: &[pb::RequestOp]) -> bool {
    let mut writes = Vec::new();
    collect(ops, &mut Vec::new(), &mut 0, &mut writes);
    for (i, a) in writes.iter().enumerate() {
        for b in &writes[i + 1..] {
            let conflict = match (&a.delete_end, &b.delete_end) {
                (None, None) => a.key == b.key,
                (None, Some(end)) => holds(&b.key, end, &a.key),
                (Some(end), None) => holds(&a.key, end, &b.key),
                (Some(_), Some(_)) => false,
            };
            let apart = a
                .path
                .iter()
                .any(|(t, x)| b.path.iter().any(|(u, y)| t == u && x != y));
            if conflict && !apart {
                return false;
            }
        }
    }
    true
}

/// bellwether's rule: accepted when neither top-level branch writes a
/// key twice.
pub fn ours_accept(txn: &pb::TxnRequest) -> bool {
    branch_ours(&txn.success) && branch_ours(&txn.failure)
}

/// A delete's interval as etcd's check sees it: `[key, end)`, a point for
/// an empty end, and nothing for an end at or before the key (`\0`).
fn etcd_hits(key: &[u8], end: &[u8], put: &[u8]) -> bool {
    if end.is_empty() {
        return key == put;
    }
    key <= put && put < end
}

/// A list's puts (a set, as etcd's map) and deletes.
type EtcdWrites = (BTreeSet<Vec<u8>>, Vec<(Vec<u8>, Vec<u8>)>);

/// etcd 3.4's check of one list (its `checkIntervals`), returning the
/// list's puts and deletes, or None for "duplicate key".
fn branch_etcd(ops: &[pb::RequestOp]) -> Option<EtcdWrites> {
    let mut deletes: Vec<(Vec<u8>, Vec<u8>)> = ops
        .iter()
        .filter_map(|op| match &op.request {
            Some(Request::RequestDeleteRange(d)) => Some((d.key.clone(), d.range_end.clone())),
            _ => None,
        })
        .collect();
    let hit = |deletes: &[(Vec<u8>, Vec<u8>)], key: &[u8]| {
        deletes.iter().any(|(k, e)| etcd_hits(k, e, key))
    };
    let mut puts: BTreeSet<Vec<u8>> = BTreeSet::new();
    for op in ops {
        let Some(Request::RequestTxn(txn)) = &op.request else {
            continue;
        };
        let (then_puts, then_deletes) = branch_etcd(&txn.success)?;
        let (else_puts, else_deletes) = branch_etcd(&txn.failure)?;
        for key in &then_puts {
            if puts.contains(key) || hit(&deletes, key) {
                return None;
            }
            puts.insert(key.clone());
        }
        for key in &else_puts {
            if puts.contains(key) && !then_puts.contains(key) {
                return None;
            }
            if hit(&deletes, key) {
                return None;
            }
            puts.insert(key.clone());
        }
        deletes.extend(then_deletes);
        deletes.extend(else_deletes);
    }
    for op in ops {
        let Some(Request::RequestPut(put)) = &op.request else {
            continue;
        };
        if puts.contains(&put.key) || hit(&deletes, &put.key) {
            return None;
        }
        puts.insert(put.key.clone());
    }
    Some((puts, deletes))
}

/// etcd 3.4's rule.
pub fn etcd_accepts(txn: &pb::TxnRequest) -> bool {
    branch_etcd(&txn.success).is_some() && branch_etcd(&txn.failure).is_some()
}

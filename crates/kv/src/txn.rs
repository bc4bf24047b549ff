//! Txns: the request and response of etcd's `KV.Txn`.
//!
//! A txn evaluates all its compares (and those of nested txns) against the
//! state before it, picks a branch, checks every operation on the chosen
//! path, and only then applies them. All its writes share one revision; a
//! txn that writes nothing does not advance the revision.

use crate::{
    Compare, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest,
    RangeResponse,
};

/// One operation inside a txn branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestOp {
    /// A read. It sees the writes made earlier in the same txn.
    Range(RangeRequest),
    /// A put.
    Put(PutRequest),
    /// A delete.
    DeleteRange(DeleteRangeRequest),
    /// A nested txn. Its compares are evaluated with the outer ones, before
    /// any write of the outer txn.
    Txn(TxnRequest),
}

/// The result of one operation, in the same position as its request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseOp {
    /// The read's result.
    Range(RangeResponse),
    /// The put's result.
    Put(PutResponse),
    /// The delete's result.
    DeleteRange(DeleteRangeResponse),
    /// The nested txn's result.
    Txn(TxnResponse),
}

/// A guarded, atomic batch of operations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnRequest {
    /// Guards; the txn succeeds when all hold (an empty list holds).
    pub compare: Vec<Compare>,
    /// Operations run when every compare holds.
    pub success: Vec<RequestOp>,
    /// Operations run otherwise.
    pub failure: Vec<RequestOp>,
}

impl TxnRequest {
    /// True when every operation of both branches is a range (etcd's
    /// rule; a nested txn counts as a write). Such a txn changes nothing
    /// and can be served outside the log.
    pub fn is_read_only(&self) -> bool {
        self.success
            .iter()
            .chain(&self.failure)
            .all(|op| matches!(op, RequestOp::Range(_)))
    }

    /// Bytes the request takes, for the request size bound.
    pub fn size_bytes(&self) -> usize {
        let compares: usize = self.compare.iter().map(Compare::size_bytes).sum();
        let ops = self
            .success
            .iter()
            .chain(&self.failure)
            .map(RequestOp::size_bytes);
        compares + ops.sum::<usize>()
    }
}

impl RequestOp {
    /// Bytes the operation takes, for the request size bound.
    pub fn size_bytes(&self) -> usize {
        match self {
            RequestOp::Range(range) => range.key_range().size_bytes(),
            RequestOp::Put(put) => put.size_bytes(),
            RequestOp::DeleteRange(delete) => delete.key_range().size_bytes(),
            RequestOp::Txn(txn) => txn.size_bytes(),
        }
    }
}

/// The result of a txn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnResponse {
    /// The store's revision after the txn; 0 in a nested txn, whose
    /// header etcd leaves empty.
    pub revision: i64,
    /// True when every compare held and the success branch ran.
    pub succeeded: bool,
    /// One response per operation of the branch that ran.
    pub responses: Vec<ResponseOp>,
}

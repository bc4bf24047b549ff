//! Txns: compare, check, then apply, as one revision.
//!
//! The three phases follow etcd. First every compare on the whole tree is
//! evaluated against the state before the txn, which fixes the branch each
//! (nested) txn takes: the path. Then every operation on the path is checked
//! (read revisions, put options, leases); a failure rejects the txn with
//! nothing applied. Only then are the operations applied, in order, all at
//! the next revision.

use super::write::{check_request_size, PendingWrite};
use super::KvStore;
use crate::txn_check::check_txn;
use crate::{KvError, RequestOp, ResponseOp, TxnRequest, TxnResponse};

/// The branch each txn on the path takes, in the order the txns are met
/// when walking the chosen branches depth first.
type Path = Vec<bool>;

impl KvStore {
    /// Runs a txn atomically. Its writes share the next revision; if it
    /// writes nothing, the revision stays.
    pub fn txn(&mut self, request: &TxnRequest) -> Result<TxnResponse, KvError> {
        check_request_size(request.size_bytes())?;
        check_txn(request, 1)?;
        let mut path = Path::new();
        self.compare_path(request, &mut path);
        let mut cursor = 0;
        self.check_path(request, &path, &mut cursor)?;
        assert_eq!(cursor, path.len(), "check walked a different path");
        let mut pending = self.begin_write();
        let mut cursor = 0;
        let mut response = self.apply_path(request, &path, &mut cursor, &mut pending);
        assert_eq!(cursor, path.len(), "apply walked a different path");
        let revision = self.finish_write(pending);
        set_revision(&mut response, revision);
        Ok(response)
    }

    /// Evaluates the compares of `request` and of the nested txns on the
    /// branch it takes, appending each decision to `path`.
    fn compare_path(&self, request: &TxnRequest, path: &mut Path) {
        let succeeded = request
            .compare
            .iter()
            .all(|compare| compare.holds(&self.live_now(&compare.key_range())));
        path.push(succeeded);
        for op in branch(request, succeeded) {
            if let RequestOp::Txn(nested) = op {
                self.compare_path(nested, path);
            }
        }
    }

    /// Checks every operation on the path against the state before the txn.
    fn check_path(
        &self,
        request: &TxnRequest,
        path: &Path,
        cursor: &mut usize,
    ) -> Result<(), KvError> {
        let succeeded = path[*cursor];
        *cursor += 1;
        for op in branch(request, succeeded) {
            match op {
                // As in etcd, an explicit read revision must exist before
                // the txn; reads at the current revision see its writes.
                RequestOp::Range(range) => self.check_range(range, self.revision)?,
                RequestOp::Put(put) => self.check_put(put)?,
                RequestOp::DeleteRange(_) => {}
                RequestOp::Txn(nested) => self.check_path(nested, path, cursor)?,
            }
        }
        Ok(())
    }

    /// Applies the checked operations on the path. Response revisions are
    /// filled in afterwards.
    fn apply_path(
        &mut self,
        request: &TxnRequest,
        path: &Path,
        cursor: &mut usize,
        pending: &mut PendingWrite,
    ) -> TxnResponse {
        let succeeded = path[*cursor];
        *cursor += 1;
        let mut responses = Vec::new();
        for op in branch(request, succeeded) {
            let response = match op {
                RequestOp::Range(range) => {
                    ResponseOp::Range(self.range_at(range, pending.current_revision()))
                }
                RequestOp::Put(put) => ResponseOp::Put(self.apply_put(put, pending)),
                RequestOp::DeleteRange(delete) => ResponseOp::DeleteRange(self.apply_delete(
                    &delete.key_range(),
                    delete.prev_kv,
                    pending,
                )),
                RequestOp::Txn(nested) => {
                    ResponseOp::Txn(self.apply_path(nested, path, cursor, pending))
                }
            };
            responses.push(response);
        }
        TxnResponse {
            revision: 0,
            succeeded,
            responses,
        }
    }
}

/// The operations of the branch a txn takes.
fn branch(request: &TxnRequest, succeeded: bool) -> &[RequestOp] {
    if succeeded {
        &request.success
    } else {
        &request.failure
    }
}

/// Sets the header revision of a txn response and every response in it to
/// the store's revision after the txn, as etcd does.
fn set_revision(response: &mut TxnResponse, revision: i64) {
    response.revision = revision;
    for op in &mut response.responses {
        match op {
            ResponseOp::Range(range) => range.revision = revision,
            ResponseOp::Put(put) => put.revision = revision,
            ResponseOp::DeleteRange(delete) => delete.revision = revision,
            ResponseOp::Txn(nested) => set_revision(nested, revision),
        }
    }
}

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
use crate::txn_check::check_request;
use crate::{KvError, RequestOp, ResponseOp, TxnRequest, TxnResponse};

/// Which operations a pass of [`KvStore::check_path`] checks.
#[derive(Clone, Copy)]
enum Checked {
    Puts,
    Reads,
}

/// The branch each txn on the path takes, in the order the txns are met
/// when walking the chosen branches depth first.
type Path = Vec<bool>;

impl KvStore {
    /// Runs a txn atomically. Its writes share the next revision; if it
    /// writes nothing, the revision stays.
    pub fn txn(&mut self, request: &TxnRequest) -> Result<TxnResponse, KvError> {
        check_request_size(request.size_bytes())?;
        check_request(request)?;
        let mut path = Path::new();
        self.compare_path(request, &mut path);
        // etcd checks every put on the path first, then every read, so a
        // txn with both kinds of fault fails with the put's error.
        for checked in [Checked::Puts, Checked::Reads] {
            let mut cursor = 0;
            self.check_path(request, &path, &mut cursor, checked)?;
            assert_eq!(cursor, path.len(), "check walked a different path");
        }
        let mut pending = self.begin_write();
        let mut cursor = 0;
        let mut response = self.apply_path(request, &path, &mut cursor, &mut pending);
        assert_eq!(cursor, path.len(), "apply walked a different path");
        response.revision = self.finish_write(pending);
        Ok(response)
    }

    /// Runs a txn that only reads ([`TxnRequest::is_read_only`]). It
    /// changes nothing, so a member may serve it outside the log, as etcd
    /// does; both are asserted.
    pub fn read_txn(&mut self, request: &TxnRequest) -> Result<TxnResponse, KvError> {
        assert!(request.is_read_only(), "read_txn takes only txns that read");
        let revision = self.revision;
        let response = self.txn(request)?;
        assert_eq!(self.revision, revision, "a read-only txn changed the store");
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

    /// Checks the operations of one kind on the path against the state
    /// before the txn.
    fn check_path(
        &self,
        request: &TxnRequest,
        path: &Path,
        cursor: &mut usize,
        checked: Checked,
    ) -> Result<(), KvError> {
        let succeeded = path[*cursor];
        *cursor += 1;
        for op in branch(request, succeeded) {
            match (op, checked) {
                // As in etcd, an explicit read revision must exist before
                // the txn; reads at the current revision see its writes.
                (RequestOp::Range(range), Checked::Reads) => {
                    self.check_range(range, self.revision)?
                }
                (RequestOp::Put(put), Checked::Puts) => self.check_put(put)?,
                (RequestOp::Txn(nested), _) => self.check_path(nested, path, cursor, checked)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Applies the checked operations on the path.
    ///
    /// Each nested response carries the revision etcd gives it: the
    /// txn's revision as it stands when the operation runs. A read or a
    /// delete that changes nothing before the txn's first change sees the
    /// revision before the txn; a put, and anything after a change, sees
    /// the txn's own revision. A nested txn's own revision is 0 (etcd
    /// sends its header empty); only the outermost one is set, by
    /// [`KvStore::txn`].
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
                RequestOp::Put(put) => {
                    let mut response = self.apply_put(put, pending);
                    response.revision = pending.revision;
                    ResponseOp::Put(response)
                }
                RequestOp::DeleteRange(delete) => {
                    let range = delete.key_range();
                    let mut response = self.apply_delete(&range, delete.prev_kv, pending);
                    response.revision = pending.current_revision();
                    ResponseOp::DeleteRange(response)
                }
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

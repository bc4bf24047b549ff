//! What a user may do: the rules etcd checks before a read or a write,
//! over the users, roles and permissions the store keeps.
//!
//! They are checked twice. The member that takes a call checks them for the
//! caller it names (the server's `auth_gate.rs`), and a write's log entry
//! records the auth revision of that check. The state machine checks a
//! write again at apply ([`crate::EtcdMachine`]) while auth is on, on every
//! member at the same entry: a grant or revoke made since the call was
//! taken takes effect at once, wherever the next call lands.

use bellwether_api::etcdserverpb as pb;
use bellwether_kv::{AuthError, KvStore, Permission};

/// One caller's rights against one state of the store.
#[derive(Clone, Copy, Debug)]
pub struct Permissions<'a> {
    /// The users, roles and permissions, and the leases' keys.
    pub store: &'a KvStore,
    /// The user; `None` when the call named none.
    pub user: Option<&'a str>,
    /// Whether auth was on when the caller was named. A caller named while
    /// it was off is still checked if it has been turned on since.
    pub enabled: bool,
}

impl Permissions<'_> {
    /// Whether the caller may do `needed` on `[key, range_end)`.
    pub fn range(&self, key: &[u8], range_end: &[u8], needed: Permission) -> Result<(), AuthError> {
        if !self.enabled && !self.store.auth().is_enabled() {
            return Ok(());
        }
        self.store
            .auth()
            .check_range(self.user, key, range_end, needed)
    }

    /// Whether the caller may make administrative calls.
    pub fn admin(&self) -> Result<(), AuthError> {
        self.store.auth().check_admin(self.user)
    }

    /// What a put needs: write, read when it asks for the previous value,
    /// and, with a lease, write on every key the lease holds already
    /// (etcd's rule: otherwise a user could attach a key to a lease whose
    /// owner could then no longer revoke it).
    pub fn put(&self, put: &pb::PutRequest) -> Result<(), AuthError> {
        self.range(&put.key, &[], Permission::Write)?;
        if put.prev_kv {
            self.range(&put.key, &[], Permission::Read)?;
        }
        if put.lease != 0 && self.store.auth().is_enabled() {
            self.lease_keys(put.lease, Permission::Write)?;
        }
        Ok(())
    }

    /// `needed` on every key attached to `lease` (none for an unknown one).
    pub fn lease_keys(&self, lease: i64, needed: Permission) -> Result<(), AuthError> {
        self.store
            .lease_keys(lease)
            .unwrap_or_default()
            .iter()
            .try_for_each(|key| self.range(key, &[], needed))
    }

    /// What a delete needs: write on the range, and read for `prev_kv`.
    pub fn delete(&self, delete: &pb::DeleteRangeRequest) -> Result<(), AuthError> {
        self.range(&delete.key, &delete.range_end, Permission::Write)?;
        if delete.prev_kv {
            self.range(&delete.key, &delete.range_end, Permission::Read)?;
        }
        Ok(())
    }

    /// What a txn needs: read for every compare, and what each operation
    /// of both branches needs, nested txns included.
    pub fn txn(&self, txn: &pb::TxnRequest) -> Result<(), AuthError> {
        use pb::request_op::Request;
        for compare in &txn.compare {
            self.range(&compare.key, &compare.range_end, Permission::Read)?;
        }
        for op in txn.success.iter().chain(&txn.failure) {
            match &op.request {
                Some(Request::RequestRange(r)) => {
                    self.range(&r.key, &r.range_end, Permission::Read)?
                }
                Some(Request::RequestPut(r)) => self.put(r)?,
                Some(Request::RequestDeleteRange(r)) => self.delete(r)?,
                Some(Request::RequestTxn(r)) => self.txn(r)?,
                None => {}
            }
        }
        Ok(())
    }
}

//! Lease grant, revoke and lookups.
//!
//! Grants and revokes arrive through the log, so they are deterministic.
//! Expiry is decided by the leader's clock outside the store and arrives as
//! a revoke. Keep-alives touch nothing durable: the remaining TTL is the
//! leader's volatile state (see [`Lease`]).

use super::KvStore;
use crate::{KvError, Lease, LEASES_MAX, LEASE_TTL_SECONDS_MAX, LEASE_TTL_SECONDS_MIN};

impl KvStore {
    /// Grants lease `id` for `ttl_seconds`, raised to
    /// [`LEASE_TTL_SECONDS_MIN`]. Returns the TTL granted. Does not advance
    /// the revision: leases are not keys.
    pub fn lease_grant(&mut self, id: i64, ttl_seconds: i64) -> Result<i64, KvError> {
        if id == 0 {
            return Err(KvError::LeaseIdZero);
        }
        if ttl_seconds > LEASE_TTL_SECONDS_MAX {
            return Err(KvError::LeaseTtlTooLarge);
        }
        if self.leases.contains_key(id) {
            return Err(KvError::LeaseExists);
        }
        if self.leases.len() >= LEASES_MAX {
            return Err(KvError::TooManyLeases {
                leases_max: LEASES_MAX,
            });
        }
        let ttl_seconds = ttl_seconds.max(LEASE_TTL_SECONDS_MIN);
        self.leases.insert(id, Lease { ttl_seconds });
        assert!(self.leases.len() <= LEASES_MAX);
        Ok(ttl_seconds)
    }

    /// Revokes lease `id` and deletes all its keys in one revision. Returns
    /// the store's revision after the revoke (unchanged if the lease had no
    /// keys).
    pub fn lease_revoke(&mut self, id: i64) -> Result<i64, KvError> {
        self.leases.remove(id).ok_or(KvError::LeaseNotFound)?;
        let keys = self.lease_keys.remove(&id).unwrap_or_default();
        let mut pending = self.begin_write();
        for key in &keys {
            let kv = self.get(key).cloned().expect("lease lists a deleted key");
            assert_eq!(kv.lease, id, "lease lists a key attached elsewhere");
            self.delete_key(kv, &mut pending);
        }
        assert_eq!(pending.events.len(), keys.len(), "revoke missed a key");
        assert!(
            !self.lease_keys.contains_key(&id),
            "a deleted key detached itself from the revoked lease"
        );
        Ok(self.finish_write(pending))
    }

    /// Confirms lease `id` is alive and returns its granted TTL, which the
    /// leader restarts its countdown from. Changes nothing in the store.
    pub fn lease_keep_alive(&self, id: i64) -> Result<i64, KvError> {
        self.lease(id)
            .map(|lease| lease.ttl_seconds)
            .ok_or(KvError::LeaseNotFound)
    }

    /// Lease `id`, if alive.
    pub fn lease(&self, id: i64) -> Option<&Lease> {
        self.leases.get(id)
    }

    /// The keys attached to lease `id`, in key order.
    pub fn lease_keys(&self, id: i64) -> Result<Vec<Vec<u8>>, KvError> {
        self.lease(id).ok_or(KvError::LeaseNotFound)?;
        Ok(self
            .lease_keys
            .get(&id)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// The ids of all live leases, ascending.
    pub fn leases(&self) -> Vec<i64> {
        self.leases.ids().collect()
    }
}

//! Granting a lease: the one way a lease comes to exist, whether a client
//! asks the Lease service or an election or lock campaigns without naming
//! a lease (etcd's servers then grant a session lease for the caller).
//!
//! A grant is a log command (`Command::LeaseGrant`) with its id already
//! chosen, so every member applies the same lease. When the caller leaves
//! the choice to the server, this member picks an id no other member can
//! pick ([`LeaseIds`]) and tries again, a bounded number of times, if the
//! store already holds it.

use super::backend::{EtcdBackend, NotHere};
use bellwether_api::etcdserverpb as pb;
use bellwether_core::NodeId;
use bellwether_etcd::command::Command;
use bellwether_kv::KvError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Attempts to find an unused id for a grant that asked the server to
/// choose.
const GRANT_ID_ATTEMPTS: usize = 4;

/// Where a member's server-chosen lease ids come from. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LeaseIds {
    member_id: NodeId,
    /// Counts up from the clock at start, so a restarted member does not
    /// reuse the ids it handed out before.
    next: Arc<AtomicU64>,
}

impl LeaseIds {
    /// Ids for member `member_id`, counted from the clock now.
    pub fn new(member_id: NodeId) -> Self {
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_micros() as u64);
        LeaseIds {
            member_id,
            next: Arc::new(AtomicU64::new(start)),
        }
    }

    /// A positive id unique to this member: 15 bits of member id over 48
    /// bits of a counter that starts at the clock.
    pub fn choose(&self) -> i64 {
        let counter = self.next.fetch_add(1, Ordering::Relaxed) & ((1 << 48) - 1);
        let member_bits = self.member_id.0 & 0x7fff;
        let id = ((member_bits << 48) | counter) as i64;
        let id = id.max(1);
        assert!(
            id > 0 && (id as u64) >> 48 == member_bits,
            "a chosen lease id is positive and carries this member's bits"
        );
        id
    }
}

/// Grants `request` through the log; an id of 0 lets this member choose.
/// The member forwards the write to the leader as it forwards any other.
pub async fn grant(
    backend: &EtcdBackend,
    request: pb::LeaseGrantRequest,
) -> Result<pb::LeaseGrantResponse, NotHere> {
    let choose = request.id == 0;
    for _ in 0..GRANT_ID_ATTEMPTS {
        let mut chosen = request;
        if choose {
            chosen.id = backend.lease_ids.choose();
        }
        match backend
            .write::<pb::LeaseGrantResponse>(&Command::LeaseGrant(chosen))
            .await
        {
            // The lessor learnt of the grant when it was applied.
            Ok(response) => return Ok(response),
            Err(NotHere::Fail(status))
                if choose && status.message() == KvError::LeaseExists.to_string() =>
            {
                continue;
            }
            Err(other) => return Err(other),
        }
    }
    Err(NotHere::Fail(super::backend::status_of_kv(
        &KvError::LeaseExists,
    )))
}

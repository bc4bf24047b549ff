//! Granting a lease: the one way a lease comes to exist, whether a client
//! asks the Lease service or an election or lock campaigns without naming
//! a lease (etcd's servers then grant a session lease for the caller).
//!
//! A grant is a log command (`Command::LeaseGrant`) with its id already
//! chosen, so every member applies the same lease. When the caller leaves
//! the choice to the server, this member picks an id no other member can
//! pick ([`super::lease_ids::LeaseIds`]) and tries again, a bounded number of times, if the
//! store already holds it.

use super::backend::EtcdBackend;
use bellwether_api::etcdserverpb as pb;
use bellwether_etcd::command::Command;
use bellwether_kv::KvError;

/// Attempts to find an unused id for a grant that asked the server to
/// choose.
const GRANT_ID_ATTEMPTS: usize = 4;

/// Grants `request` through the log; an id of 0 lets this member choose.
/// The member forwards the write to the leader as it forwards any other.
pub async fn grant(
    backend: &EtcdBackend,
    request: pb::LeaseGrantRequest,
) -> Result<pb::LeaseGrantResponse, tonic::Status> {
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
            Err(status) if choose && status.message() == KvError::LeaseExists.to_string() => {
                continue;
            }
            Err(other) => return Err(other),
        }
    }
    Err(super::backend::status_of_kv(&KvError::LeaseExists))
}

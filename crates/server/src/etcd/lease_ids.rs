//! [`LeaseIds`]: lease ids a member chooses when a client leaves the
//! choice to the server, unique across members and across restarts.

use bellwether_core::NodeId;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

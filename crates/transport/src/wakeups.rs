//! Redial at once when a peer is back: an accepted connection from a peer
//! wakes our dialer for it.
//!
//! A dialer that keeps failing backs off up to a second between tries. A
//! peer that restarts dials us as soon as it is up, so its inbound
//! connection is the earliest sign that our outbound one would work too;
//! without this, a restarted node could be unreachable from its peers for
//! up to the backoff, and an algorithm that routes around silent nodes
//! (Ring skips a successor that does not acknowledge) would skip it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// One wake-up per peer. Peers that join later get theirs on first use
/// (only accepted members are woken, so the map stays as small as the
/// membership).
#[derive(Debug, Default)]
pub struct Wakeups {
    peers: Mutex<BTreeMap<u64, Arc<Notify>>>,
}

impl Wakeups {
    /// Wake-ups for `members`.
    pub fn new(members: &[u64]) -> Wakeups {
        Wakeups {
            peers: Mutex::new(
                members
                    .iter()
                    .map(|id| (*id, Arc::new(Notify::new())))
                    .collect(),
            ),
        }
    }

    fn of(&self, peer: u64) -> Arc<Notify> {
        self.peers
            .lock()
            .expect("wakeups lock")
            .entry(peer)
            .or_default()
            .clone()
    }

    /// `peer` connected to us: its dialer should try now. A wake-up with no
    /// dialer waiting is kept for its next wait, which then ends at once.
    pub fn wake(&self, peer: u64) {
        self.of(peer).notify_one();
    }

    /// Waits for a wake-up for `peer`.
    pub async fn woken(&self, peer: u64) {
        self.of(peer).notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_wake_up_ends_the_next_wait_for_that_peer_only() {
        let wakeups = Wakeups::new(&[1, 2]);
        wakeups.wake(1);
        tokio::time::timeout(Duration::from_secs(1), wakeups.woken(1))
            .await
            .expect("the kept wake-up ends the wait");
        let other = tokio::time::timeout(Duration::from_millis(20), wakeups.woken(2)).await;
        assert!(other.is_err(), "peer 2 was not woken");
    }
}

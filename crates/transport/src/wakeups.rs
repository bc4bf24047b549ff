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
use tokio::sync::Notify;

/// One wake-up per peer.
#[derive(Debug, Default)]
pub struct Wakeups {
    peers: BTreeMap<u64, Notify>,
}

impl Wakeups {
    /// Wake-ups for `members`.
    pub fn new(members: &[u64]) -> Wakeups {
        Wakeups {
            peers: members.iter().map(|id| (*id, Notify::new())).collect(),
        }
    }

    /// `peer` connected to us: its dialer should try now. A wake-up with no
    /// dialer waiting is kept for its next wait, which then ends at once.
    pub fn wake(&self, peer: u64) {
        if let Some(notify) = self.peers.get(&peer) {
            notify.notify_one();
        }
    }

    /// Waits for a wake-up for `peer` (forever for an unknown peer).
    pub async fn woken(&self, peer: u64) {
        match self.peers.get(&peer) {
            Some(notify) => notify.notified().await,
            None => std::future::pending().await,
        }
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
        wakeups.wake(9); // unknown: ignored
    }
}

//! What the ZooKeeper endpoint counts, for the four-letter words and
//! `/metrics`: plain atomics, touched once per packet.

use std::sync::atomic::{AtomicU64, Ordering};

/// The endpoint's counters. Shared by its connections.
#[derive(Debug, Default)]
pub struct ZkStats {
    /// Connections open now.
    pub connections: AtomicU64,
    /// Packets received since start.
    pub received: AtomicU64,
    /// Packets sent since start.
    pub sent: AtomicU64,
    /// Requests being handled now.
    pub outstanding: AtomicU64,
    /// Watches held by this member's connections now.
    pub watches: AtomicU64,
}

impl ZkStats {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes one from `counter`.
    pub fn drop_one(counter: &AtomicU64) {
        counter.fetch_sub(1, Ordering::Relaxed);
    }

    /// `counter`'s value.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

//! The leader's deletion of due container and TTL nodes, as ZooKeeper's
//! container manager does: it looks at the index of such nodes, and logs a
//! deletion of each one due, stamped with its clock. Every member checks
//! again at apply that the node is due at that time, so a node that got a
//! child or a change meanwhile stays.

use crate::etcd::EtcdBackend;
use bellwether_zookeeper::codes::{op, ErrorCode};
use std::time::Duration;

/// How often the leader looks. ZooKeeper's default is a minute; the index
/// makes a look cost only the container and TTL nodes, so it can be often.
pub const REAP_INTERVAL: Duration = Duration::from_secs(1);

/// Most deletions logged per look: the rest wait for the next.
const REAPS_PER_LOOK_MAX: usize = 1_000;

/// Looks this many times between two counts of the tree for `/metrics`.
const LOOKS_PER_COUNT: u32 = 5;

/// Runs until the task is dropped; also counts the tree into `stats`.
pub async fn run(backend: EtcdBackend, stats: std::sync::Arc<super::stats::ZkStats>) {
    let mut tick = tokio::time::interval(REAP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut looks = 0u32;
    loop {
        tick.tick().await;
        looks = looks.wrapping_add(1);
        if looks % LOOKS_PER_COUNT == 1 {
            stats.count_tree(&backend.store());
        }
        if !backend.is_leader() {
            continue;
        }
        let now = super::connection::now_ms();
        let due = bellwether_zookeeper::tree::due_nodes(&backend.store(), now);
        for path in due.into_iter().take(REAPS_PER_LOOK_MAX) {
            match super::log_as_leader(&backend, now, op::DELETE_CONTAINER, &path).await {
                // Refused by an alarm: the rest would be too; the next look
                // tries again (one entry a look, not one a node).
                Ok(error) if error == ErrorCode::SystemError.code() => {
                    tracing::debug!(path, "zookeeper: a due node's deletion was refused");
                    break;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(%error, path, "zookeeper: a due node's deletion was not logged");
                    break;
                }
            }
        }
    }
}

//! The leader's record of the cluster's members in `/zookeeper/config`
//! (see `bellwether_zookeeper::config`), so that ZooKeeper clients which
//! follow the ensemble (Curator's ensemble tracker, zkCli's `config`) see
//! every member's ZooKeeper address, and a member added or removed.
//!
//! Each look, the leader lists the members of Raft's configuration with
//! their peer addresses and learner flags (from its status) and their
//! ZooKeeper addresses, and logs the list when it differs from the node's.
//! A member's ZooKeeper address is, first found: what it published to the
//! member directory (a member that joined later does so as it starts),
//! this member's configuration (`peer_zookeeper`, which `bellwether up`
//! writes for the members it starts), then what the node already lists
//! (so a leader that was never told an address keeps what an earlier one
//! wrote).

use super::reaper::REAP_INTERVAL;
use crate::etcd::EtcdBackend;
use bellwether_core::NodeId;
use bellwether_zookeeper::codes::op;
use bellwether_zookeeper::config::{ensemble_lines, lines_of, Server, CONFIG_PATH};
use bellwether_zookeeper::tree::read_node;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Members' ZooKeeper addresses this member was configured with, its own
/// included.
pub type KnownAddresses = BTreeMap<NodeId, String>;

/// How long the leader waits after the log refused its list (a full disk's
/// alarm stops ZooKeeper's writes) before it logs the list again, so that
/// a refusal costs a log entry this often and not every look.
const REFUSED_PAUSE: Duration = Duration::from_secs(30);

/// Runs until the task is dropped.
pub async fn run(backend: EtcdBackend, known: KnownAddresses) {
    let mut tick = tokio::time::interval(REAP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut paused_until: Option<Instant> = None;
    loop {
        tick.tick().await;
        if !backend.is_leader() || paused_until.is_some_and(|until| Instant::now() < until) {
            continue;
        }
        let stored = read_node(&backend.store(), CONFIG_PATH)
            .map(|node| lines_of(&node.data))
            .unwrap_or_default();
        let lines = ensemble_lines(&servers(&backend, &known, &stored));
        if lines == stored {
            continue;
        }
        let now = super::connection::now_ms();
        match super::log_as_leader(&backend, now, op::RECONFIG, &lines).await {
            Ok(0) => tracing::info!(
                members = lines.lines().count(),
                "zookeeper: /zookeeper/config updated"
            ),
            Ok(error) => {
                tracing::warn!(
                    error,
                    "zookeeper: /zookeeper/config was refused; trying again in {REFUSED_PAUSE:?}"
                );
                paused_until = Some(Instant::now() + REFUSED_PAUSE);
            }
            Err(error) => tracing::debug!(%error, "zookeeper: /zookeeper/config was not updated"),
        }
    }
}

/// The members of Raft's configuration as the node lists them.
fn servers(backend: &EtcdBackend, known: &KnownAddresses, stored: &str) -> Vec<Server> {
    let status = backend.status.borrow().clone();
    let listed = listed_addresses(stored);
    let store = backend.store();
    let address_of = |id: NodeId| {
        store
            .member(id.0)
            .and_then(|record| record.zookeeper_urls.first().cloned())
            .or_else(|| known.get(&id).cloned())
            .or_else(|| listed.get(&id.0).cloned())
    };
    let own = (!status.outside).then(|| Server {
        id: status.id.0,
        peer_address: status.peer_address.clone(),
        observer: status.learner,
        zookeeper_address: address_of(status.id),
    });
    own.into_iter()
        .chain(status.members.iter().map(|m| Server {
            id: m.id.0,
            peer_address: m.peer_address.clone(),
            observer: m.learner,
            zookeeper_address: address_of(m.id),
        }))
        .filter(|s| !s.peer_address.is_empty())
        .collect()
}

/// The ZooKeeper address each line of `lines` names, by member id.
fn listed_addresses(lines: &str) -> BTreeMap<u64, String> {
    lines
        .lines()
        .filter_map(|line| {
            let (server, rest) = line.strip_prefix("server.")?.split_once('=')?;
            let (_, client) = rest.split_once(';')?;
            Some((server.parse().ok()?, client.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_addresses_an_earlier_leader_listed_are_read_back() {
        let lines = "server.1=127.0.0.1:7001:7001:participant;127.0.0.1:7301\n\
                     server.4=127.0.0.1:7004:7004:observer\n";
        let listed = listed_addresses(lines);
        assert_eq!(listed.get(&1).map(String::as_str), Some("127.0.0.1:7301"));
        assert_eq!(listed.get(&4), None, "a line without an address");
        assert_eq!(listed.len(), 1);
    }
}

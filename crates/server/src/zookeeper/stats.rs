//! What the ZooKeeper endpoint counts, for the four-letter words and
//! `/metrics`: prometheus-client's atomics, touched once per packet, and
//! the tree's sizes, counted by the endpoint's background task.

use bellwether_kv::KvStore;
use bellwether_metrics::LatencyHistogram;
use bellwether_zookeeper::overview::{overview, Overview};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// A gauge of a count.
type CountGauge = Gauge<u64, AtomicU64>;

/// The endpoint's figures. Shared by its connections.
#[derive(Debug, Default)]
pub struct ZkStats {
    /// Connections open now.
    pub connections: CountGauge,
    /// Packets received since start.
    pub received: Counter,
    /// Packets sent since start (replies and notifications).
    pub sent: Counter,
    /// Requests being handled now.
    pub outstanding: CountGauge,
    /// Watches held by this member's connections now.
    pub watches: CountGauge,
    /// Sessions open in the store, counted every few seconds.
    pub sessions: CountGauge,
    /// Znodes in the store, the root included, counted every few seconds.
    pub znodes: CountGauge,
    /// Time from a request's arrival to its reply.
    pub latency: LatencyHistogram,
    /// The member's store, for the dashboard's overview; set when the
    /// endpoint starts serving.
    store: Mutex<Option<Arc<Mutex<KvStore>>>>,
}

impl ZkStats {
    /// Names every figure in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        for (name, help, gauge) in [
            (
                "bellwether_zookeeper_connections",
                "ZooKeeper client connections open on this member.",
                &self.connections,
            ),
            (
                "bellwether_zookeeper_outstanding_requests",
                "ZooKeeper requests being handled on this member.",
                &self.outstanding,
            ),
            (
                "bellwether_zookeeper_watches",
                "Watches held by this member's ZooKeeper connections.",
                &self.watches,
            ),
            (
                "bellwether_zookeeper_sessions",
                "ZooKeeper sessions open in the store.",
                &self.sessions,
            ),
            (
                "bellwether_zookeeper_znodes",
                "Znodes in the store, the root included.",
                &self.znodes,
            ),
        ] {
            registry.register(name, help, gauge.clone());
        }
        registry.register(
            "bellwether_zookeeper_packets_received",
            "ZooKeeper packets received by this member.",
            self.received.clone(),
        );
        registry.register(
            "bellwether_zookeeper_packets_sent",
            "ZooKeeper packets sent by this member (replies and notifications).",
            self.sent.clone(),
        );
        registry.register(
            "bellwether_zookeeper_request_latency_seconds",
            "Time from a ZooKeeper request's arrival to its reply on this member.",
            self.latency.clone(),
        );
    }

    /// Gives the overview the store it reads.
    pub fn attach_store(&self, store: Arc<Mutex<KvStore>>) {
        *self.store.lock().expect("stats lock") = Some(store);
    }

    /// The sessions and elections in the store (`GET /zookeeper`); empty
    /// while the endpoint is not served.
    pub fn overview(&self) -> Overview {
        let store = self.store.lock().expect("stats lock").clone();
        store.map_or_else(Overview::default, |store| {
            overview(&store.lock().expect("store lock"))
        })
    }

    /// Counts the store's sessions and znodes.
    pub fn count_tree(&self, store: &bellwether_kv::KvStore) {
        use bellwether_zookeeper::znode::SESSION_PREFIX;
        let count = |prefix: &[u8]| {
            let range = bellwether_kv::KeyRange::prefix(prefix.to_vec());
            let request = bellwether_kv::RangeRequest {
                key: range.key,
                range_end: range.range_end,
                count_only: true,
                ..Default::default()
            };
            store.range(&request).map_or(0, |r| r.count.max(0) as u64)
        };
        self.znodes.set(znode_count(store, count));
        self.sessions.set(count(SESSION_PREFIX));
    }
}

/// The znode count `mntr` and `srvr` report, as ZooKeeper 3.8 counts:
/// every node, the system nodes whether stored yet or not, and the root
/// once more (a fresh 3.8.0 ensemble reports 5 for its root,
/// `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config`: its tree
/// keeps the root under two names). `count` counts the keys under a prefix.
fn znode_count(store: &bellwether_kv::KvStore, count: impl Fn(&[u8]) -> u64) -> u64 {
    use bellwether_zookeeper::znode::{node_key, NODE_PREFIX, SYSTEM_PATHS};
    let unstored = SYSTEM_PATHS
        .iter()
        .filter(|path| store.get(&node_key(path)).is_none())
        .count() as u64;
    count(NODE_PREFIX) + unstored + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_zookeeper::codes::op;
    use bellwether_zookeeper::jute::JuteWriter;
    use bellwether_zookeeper::tree::apply;
    use bellwether_zookeeper::ZkEntry;

    #[test]
    fn znodes_are_counted_as_zookeeper_counts_them_stored_or_not() {
        let stats = ZkStats::default();
        let mut store = bellwether_kv::KvStore::new();
        stats.count_tree(&store);
        assert_eq!(stats.znodes.get(), 5, "a fresh ZooKeeper 3.8.0 says 5");
        // The leader writes /zookeeper/config: one node, stored now.
        let mut w = JuteWriter::new();
        w.string("server.1=127.0.0.1:7001:7001:participant;127.0.0.1:7301\n");
        let entry = ZkEntry {
            session: 0,
            time_ms: 1,
            op: op::RECONFIG,
            body: w.into_bytes(),
            auth: Vec::new(),
        };
        apply(&mut store, &entry);
        stats.count_tree(&store);
        assert_eq!(stats.znodes.get(), 5, "a stored system node counts once");
    }
}

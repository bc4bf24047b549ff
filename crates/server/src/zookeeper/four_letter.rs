//! ZooKeeper's four-letter words: health checks and monitors send four
//! ASCII bytes instead of a packet's length, read the text answer, and
//! the server closes the connection. Those monitors parse the lines, so
//! the names and layout are ZooKeeper's.

use super::stats::ZkStats;
use crate::etcd::EtcdBackend;
use bellwether_core::Role;

/// The words answered.
pub const WORDS: [&[u8; 4]; 6] = [b"ruok", b"isro", b"srvr", b"stat", b"mntr", b"conf"];

/// The version the words report: ZooKeeper's protocol level served, then
/// bellwether's own.
fn version() -> String {
    format!("3.8.0-bellwether-{}", env!("CARGO_PKG_VERSION"))
}

/// The answer to `word`, if it is one of [`WORDS`].
pub fn answer(word: &[u8; 4], backend: &EtcdBackend, stats: &ZkStats) -> Option<String> {
    let (mode, zxid, nodes) = {
        let status = backend.status.borrow();
        let mode = match status.role {
            Role::Leader => "leader",
            _ => "follower",
        };
        let store = backend.store();
        let nodes = count_nodes(&store);
        (mode, store.revision(), nodes)
    };
    let connections = ZkStats::get(&stats.connections);
    let received = ZkStats::get(&stats.received);
    let sent = ZkStats::get(&stats.sent);
    let outstanding = ZkStats::get(&stats.outstanding);
    let watches = ZkStats::get(&stats.watches);
    let server = || {
        format!(
            "Zookeeper version: {}\nLatency min/avg/max: 0/0.0/0\nReceived: {received}\nSent: {sent}\n\
             Connections: {connections}\nOutstanding: {outstanding}\nZxid: {zxid:#x}\nMode: {mode}\n\
             Node count: {nodes}\n",
            version()
        )
    };
    Some(match word {
        b"ruok" => "imok".to_string(),
        b"isro" => "rw".to_string(),
        b"srvr" => server(),
        b"stat" => format!("{}\nClients:\n", server()),
        b"mntr" => format!(
            "zk_version\t{}\nzk_server_state\t{mode}\nzk_znode_count\t{nodes}\n\
             zk_watch_count\t{watches}\nzk_num_alive_connections\t{connections}\n\
             zk_outstanding_requests\t{outstanding}\nzk_packets_received\t{received}\n\
             zk_packets_sent\t{sent}\nzk_zxid\t{zxid:#x}\n",
            version()
        ),
        b"conf" => format!(
            "serverId={}\nminSessionTimeout={}\nmaxSessionTimeout={}\n",
            backend.member_id.0,
            bellwether_zookeeper::tree::SESSION_TIMEOUT_MS_MIN,
            bellwether_zookeeper::tree::SESSION_TIMEOUT_MS_MAX
        ),
        _ => return None,
    })
}

/// Znodes in the store, the root included.
fn count_nodes(store: &bellwether_kv::KvStore) -> i64 {
    let range = bellwether_kv::KeyRange::prefix(bellwether_zookeeper::znode::NODE_PREFIX.to_vec());
    let request = bellwether_kv::RangeRequest {
        key: range.key,
        range_end: range.range_end,
        count_only: true,
        ..Default::default()
    };
    let stored = store.range(&request).map(|r| r.count).unwrap_or(0);
    // The root exists before anything writes its record.
    let root_written = store
        .get(bellwether_zookeeper::znode::NODE_PREFIX)
        .is_some();
    stored + i64::from(!root_written)
}

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
    let mode = match backend.status.borrow().role {
        Role::Leader => "leader",
        _ => "follower",
    };
    let zxid = {
        let store = backend.store();
        stats.count_tree(&store);
        store.revision()
    };
    let nodes = stats.znodes.get();
    let connections = stats.connections.get();
    let received = stats.received.get();
    let sent = stats.sent.get();
    let outstanding = stats.outstanding.get();
    let watches = stats.watches.get();
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

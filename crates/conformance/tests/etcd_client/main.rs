//! The Rust `etcd-client` crate (written against real etcd) driving a
//! 3-node bellwether cluster: its Election, Lock, Lease and Watch clients,
//! each connected to a single member so that requests through followers are
//! forwarded to the leader. One test binary, so the tests share one link
//! and run in parallel, each on its own cluster.

#[path = "../../../cli/tests/common/mod.rs"]
mod common;

mod auth;
mod bad_input;
mod election;
mod lease;
mod lease_new_term;
mod lock;
mod maintenance;
mod txn_headers;
mod watch;
mod write_revision;

use common::Cluster;
use etcd_client::Client;
use std::future::Future;
use std::time::Duration;

/// Generous bound for anything that only waits (a loaded 2-core machine).
const WAIT: Duration = Duration::from_secs(30);

/// How long a blocked call is watched to make sure it stays blocked.
const STAYS_BLOCKED: Duration = Duration::from_secs(1);

/// A running 3-node cluster and its members' etcd API URLs, the leader's
/// first, then the two followers'.
struct Members {
    /// Stops every member on drop.
    _cluster: Cluster,
    /// `http://` URLs: leader, follower, follower.
    urls: Vec<String>,
}

impl Members {
    /// Starts a 3-node cluster named `name` and waits for its leader.
    fn start(name: &str) -> Members {
        let mut cluster = Cluster::start(name, 3, 50, 300);
        let all = cluster.all();
        let (leader, _) = cluster.wait_leader(&all, WAIT);
        let mut order = vec![leader];
        order.extend(all.iter().filter(|i| **i != leader));
        let urls = order
            .iter()
            .map(|i| format!("http://{}", cluster.client(*i)))
            .collect();
        Members {
            _cluster: cluster,
            urls,
        }
    }

    /// A client connected to member `index` of [`Members::urls`] only.
    async fn client(&self, index: usize) -> Client {
        within(Client::connect([&self.urls[index]], None))
            .await
            .expect("etcd-client connects")
    }
}

/// `future`, failing the test if it takes longer than [`WAIT`].
async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .expect("finished within the wait bound")
}

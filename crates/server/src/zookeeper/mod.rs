//! ZooKeeper's client protocol, served by every member beside the etcd API.
//!
//! What is decided lives in `bellwether_zookeeper` (no IO): the records, the
//! znode tree in the kv store and its watches. This module only carries it:
//! it takes connections, logs writes through the member as any etcd write
//! is logged (so a follower's write reaches the leader by the member's one
//! forwarding path), answers reads from the member's store, and renews each
//! session's lease at the leader's lease clock as its client pings.

mod connection;
mod ensemble;
mod four_letter;
mod packets;
mod pipeline;
mod reaper;
pub mod stats;

use crate::etcd::{EtcdBackend, LeaseService};
pub use ensemble::KnownAddresses;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Serves ZooKeeper's protocol on `listener` until `shutdown` completes,
/// with at most `connections_max` connections at once (more are closed
/// as they arrive, and the client tries another member). `known` is the
/// members' ZooKeeper addresses this member was configured with, for
/// `/zookeeper/config`.
pub async fn serve(
    listener: TcpListener,
    backend: EtcdBackend,
    lease: LeaseService,
    connections_max: usize,
    stats: Arc<stats::ZkStats>,
    known: KnownAddresses,
    shutdown: impl std::future::Future<Output = ()>,
) {
    stats.attach_store(backend.store.clone());
    let permits = Arc::new(Semaphore::new(connections_max.max(1)));
    // Stopped when this future ends or is dropped.
    let _reaping = AbortOnDrop(tokio::spawn(reaper::run(backend.clone(), stats.clone())));
    let _recording = AbortOnDrop(tokio::spawn(ensemble::run(backend.clone(), known)));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, say: wait rather than spin.
                tracing::warn!(%error, "zookeeper: cannot accept a connection");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(%peer, connections_max, "zookeeper: too many connections; closing a new one");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let connection = connection::Connection::new(
            backend.clone(),
            lease.clone(),
            stopped.clone(),
            stats.clone(),
        );
        tokio::spawn(async move {
            if let Err(error) = connection.run(stream).await {
                tracing::debug!(%peer, %error, "zookeeper: connection ended");
            }
            drop(permit);
        });
    }
    stop.send_replace(true);
}

/// Logs one of the leader's own entries (no session, no client): `op`
/// with the jute string `text` as its body, stamped `time_ms`. Only as the
/// leader (`propose_here`): a deposed one must not have its successor
/// apply what it decided. Returns the applied answer's error code
/// (ZooKeeper's; `i32::MIN` for an answer that does not decode).
async fn log_as_leader(
    backend: &EtcdBackend,
    time_ms: i64,
    op: i32,
    text: &str,
) -> Result<i32, bellwether_member::ClientError> {
    let mut body = bellwether_zookeeper::jute::JuteWriter::new();
    body.string(text);
    let entry = bellwether_zookeeper::ZkEntry {
        session: 0,
        time_ms,
        op,
        body: body.into_bytes(),
        auth: Vec::new(),
    };
    let command = bellwether_etcd::command::Command::ZooKeeper(entry);
    let answer = backend.client.propose_here(command.encode()).await?;
    Ok(bellwether_zookeeper::entry::read_answer(&answer).map_or(i32::MIN, |(_, error, _)| error))
}

/// A task that ends with its owner.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

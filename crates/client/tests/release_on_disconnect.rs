//! Release on disconnect, a bellwether extension: a session that opts in
//! has its lease shortened to the grace when its keep-alive stream ends,
//! so a crashed holder's election moves on within the grace instead of the
//! TTL. Against a real etcd the request is ignored and the TTL applies.

#[path = "../../cli/tests/common/mod.rs"]
mod common;

use bellwether_client::{Client, Election, Session, SessionOptions};
use common::etcd_server::EtcdServer;
use common::Cluster;
use std::time::Duration;
use tokio::time::timeout;

/// A bound for anything that only waits; far below the holders' TTL, so
/// a takeover within it cannot come from the TTL.
const WAIT: Duration = Duration::from_secs(30);

/// The holders' TTL: twice [`WAIT`].
const TTL: Duration = Duration::from_secs(60);

/// A holder that opted in leads; a contender waits. Returns the holder's
/// session, its key and the contender's campaign.
async fn holder_and_contender(
    client: &Client,
    name: &str,
) -> (
    Session,
    bellwether_client::Leadership,
    Session,
    bellwether_client::Leadership,
) {
    let released = SessionOptions {
        release_on_disconnect: Some(Duration::from_millis(300)),
        ..SessionOptions::with_ttl(TTL)
    };
    let holder = Session::new(client, released).await.unwrap();
    let leadership = Election::new(&holder, name)
        .unwrap()
        .campaign("holder")
        .await
        .unwrap();
    // Kept, not dropped: dropping a leadership withdraws its key.
    let contender_session = Session::new(client, SessionOptions::with_ttl(TTL))
        .await
        .unwrap();
    let contender = Election::new(&contender_session, name)
        .unwrap()
        .start_campaign("contender")
        .await
        .unwrap();
    assert!(
        timeout(Duration::from_millis(500), contender.wait_leader())
            .await
            .is_err(),
        "the contender must wait while the holder is connected"
    );
    (holder, leadership, contender_session, contender)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_holder_is_released_within_the_grace_on_bellwether() {
    let mut cluster = Cluster::start("client-release", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    // Through a follower too: the relay to the leader carries the request.
    for member in all.clone() {
        let client = Client::connect([cluster.client(member).to_string()]).unwrap();
        let name = format!("released-{member}");
        let (holder, _held, _contender_session, contender) =
            holder_and_contender(&client, &name).await;
        // The holder's keep-alive stream ends, as when its process dies.
        drop(holder);
        timeout(WAIT, contender.wait_leader())
            .await
            .expect("released well before the TTL")
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_ignores_release_on_disconnect_and_keeps_the_ttl() {
    let etcd = EtcdServer::start("client-release-etcd");
    let client = Client::connect([etcd.client.to_string()]).unwrap();
    let (holder, held, _contender_session, contender) =
        holder_and_contender(&client, "released").await;
    let key = held.key().to_vec();
    drop(holder);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        client.get(key).await.unwrap().is_some(),
        "etcd kept the lease for its TTL"
    );
    assert!(!contender.is_leader());
}

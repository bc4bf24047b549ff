//! Sessions and leaderships across failures of the cluster itself (real
//! bellwether member processes): a failover of the cluster's own leader
//! member, members restarted one by one (etcd #5571: sessions did not
//! survive reconnection), and a campaign made while the whole cluster
//! restarts (etcd #11007: a campaign could succeed while another held the
//! election).

#[path = "../../cli/tests/common/mod.rs"]
mod common;

use bellwether_client::pb;
use bellwether_client::{Client, Election, Session, SessionOptions, SessionState};
use common::Cluster;
use std::time::Duration;
use tokio::task::block_in_place;
use tokio::time::timeout;

/// A bound for anything that only waits.
const WAIT: Duration = Duration::from_secs(30);

/// A 3-member cluster with an agreed leader, and a client of all members.
fn start(name: &str) -> (Cluster, Client) {
    let mut cluster = Cluster::start(name, 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    let endpoints: Vec<String> = all.iter().map(|i| cluster.client(*i).to_string()).collect();
    let client = Client::connect(&endpoints).expect("client");
    (cluster, client)
}

/// A put operation on `key`.
fn put(key: &str) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
            key: key.as_bytes().to_vec(),
            value: b"v".to_vec(),
            ..pb::PutRequest::default()
        })),
    }
}

/// Keeps `session`'s state history from now on.
fn record(session: &Session) -> tokio::task::JoinHandle<Vec<SessionState>> {
    let mut state = session.state();
    tokio::spawn(async move {
        let mut seen = vec![*state.borrow()];
        while state.changed().await.is_ok() {
            seen.push(*state.borrow());
            if *state.borrow() == SessionState::Lost {
                break;
            }
        }
        seen
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_and_its_leadership_survive_a_failover_of_the_cluster_leader() {
    let (mut cluster, client) = start("client-failover");
    let options = SessionOptions::with_ttl(Duration::from_secs(6));
    let session = Session::new(&client, options).await.unwrap();
    let history = record(&session);
    let leadership = Election::new(&session, "survivor")
        .unwrap()
        .campaign("a")
        .await
        .unwrap();
    let all = cluster.all();
    let (leader, _) = block_in_place(|| cluster.wait_leader(&all, WAIT));
    block_in_place(|| cluster.kill(leader));
    let rest: Vec<usize> = all.iter().copied().filter(|i| *i != leader).collect();
    block_in_place(|| cluster.wait_leader(&rest, WAIT));
    // Longer than the TTL: keep-alives must have reached the new leader.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(!session.is_lost(), "the session was lost in a failover");
    assert!(
        leadership.is_leader(),
        "the leadership was lost in a failover"
    );
    assert!(leadership
        .guarded(vec![put("survivor-data")])
        .await
        .unwrap());
    drop(session);
    let seen = history.await.unwrap();
    assert_eq!(seen.last(), Some(&SessionState::Lost), "{seen:?}");
    assert!(
        !seen[..seen.len() - 1].contains(&SessionState::Lost),
        "lost before the end: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_survives_every_member_restarting_in_turn() {
    let (mut cluster, client) = start("client-restarts");
    let options = SessionOptions::with_ttl(Duration::from_secs(6));
    let session = Session::new(&client, options).await.unwrap();
    let leadership = Election::new(&session, "restarts")
        .unwrap()
        .campaign("a")
        .await
        .unwrap();
    for member in cluster.all() {
        block_in_place(|| {
            cluster.kill(member);
            std::thread::sleep(Duration::from_millis(500));
            cluster.spawn(member);
            let all = cluster.all();
            cluster.wait_leader(&all, WAIT);
        });
        assert!(!session.is_lost(), "lost after restarting member {member}");
    }
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(!session.is_lost());
    assert!(leadership.is_leader());
    assert!(leadership
        .guarded(vec![put("restarts-data")])
        .await
        .unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_during_a_cluster_restart_waits_for_the_holder() {
    let (mut cluster, client) = start("client-campaign-restart");
    let holder_session = Session::new(&client, SessionOptions::with_ttl(Duration::from_secs(10)))
        .await
        .unwrap();
    let holder = Election::new(&holder_session, "restart-race")
        .unwrap()
        .campaign("holder")
        .await
        .unwrap();
    // Every member goes down, then comes back.
    block_in_place(|| {
        for member in cluster.all() {
            cluster.kill(member);
        }
        for member in cluster.all() {
            cluster.spawn(member);
        }
    });
    let contender_client = client.clone();
    let contender = tokio::spawn(async move {
        let session = Session::new(
            &contender_client,
            SessionOptions::with_ttl(Duration::from_secs(10)),
        )
        .await?;
        let leadership = Election::new(&session, "restart-race")?
            .start_campaign("contender")
            .await?;
        Ok::<_, bellwether_client::Error>((session, leadership))
    });
    let all = cluster.all();
    block_in_place(|| cluster.wait_leader(&all, WAIT));
    let (_session, contender) = timeout(WAIT, contender).await.unwrap().unwrap().unwrap();
    assert!(
        timeout(Duration::from_secs(2), contender.wait_leader())
            .await
            .is_err(),
        "the contender led while the holder held the election"
    );
    assert!(holder.is_leader());
    holder.resign().await.unwrap();
    timeout(WAIT, contender.wait_leader())
        .await
        .unwrap()
        .unwrap();
}

/// etcd #5571 on a real etcd: a session and its leadership survive the
/// server restarting (a single member, so the client must wait it out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_survives_an_etcd_restart() {
    let mut etcd = common::etcd_server::EtcdServer::start("client-etcd-restart");
    let client = Client::connect([etcd.client.to_string()]).unwrap();
    let session = Session::new(&client, SessionOptions::with_ttl(Duration::from_secs(10)))
        .await
        .unwrap();
    let leadership = Election::new(&session, "etcd-restart")
        .unwrap()
        .campaign("a")
        .await
        .unwrap();
    block_in_place(|| etcd.restart());
    // Past a few keep-alive intervals, on the restarted server.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(!session.is_lost(), "the session was lost in a restart");
    assert!(leadership.is_leader());
    assert!(leadership
        .guarded(vec![put("etcd-restart-data")])
        .await
        .unwrap());
}

/// etcd #11007 on a real etcd: a campaign made while the server restarts
/// waits for the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_during_an_etcd_restart_waits_for_the_holder() {
    let mut etcd = common::etcd_server::EtcdServer::start("client-etcd-campaign-restart");
    let client = Client::connect([etcd.client.to_string()]).unwrap();
    let holder_session = Session::new(&client, SessionOptions::with_ttl(Duration::from_secs(10)))
        .await
        .unwrap();
    let holder = Election::new(&holder_session, "etcd-restart-race")
        .unwrap()
        .campaign("holder")
        .await
        .unwrap();
    let contender_client = client.clone();
    let contender = tokio::spawn(async move {
        let session = Session::new(
            &contender_client,
            SessionOptions::with_ttl(Duration::from_secs(10)),
        )
        .await?;
        let leadership = Election::new(&session, "etcd-restart-race")?
            .start_campaign("contender")
            .await?;
        Ok::<_, bellwether_client::Error>((session, leadership))
    });
    block_in_place(|| etcd.restart());
    let (_session, contender) = timeout(WAIT, contender).await.unwrap().unwrap().unwrap();
    assert!(
        timeout(Duration::from_secs(2), contender.wait_leader())
            .await
            .is_err(),
        "the contender led while the holder held the election"
    );
    assert!(holder.is_leader());
    holder.resign().await.unwrap();
    timeout(WAIT, contender.wait_leader())
        .await
        .unwrap()
        .unwrap();
}

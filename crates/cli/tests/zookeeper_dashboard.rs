//! The dashboard's ZooKeeper view (`GET /zookeeper`, shown on `/`): the
//! sessions in the store and the elections run with ZooKeeper's recipe,
//! whose holder is the lowest ephemeral-sequential child. Three sessions
//! of a third-party Rust client (the `zookeeper-client` crate) contend on
//! /election through one member; every member must show the same holder,
//! and the next contender once the holder's session closes.

mod common;

use common::zookeeper::{spawn_with_zookeeper, wait_accepting, zookeeper_address};
use common::{get, Cluster};
use serde_json::Value;
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// Longest wait for every member to show what the test expects.
const SHOWN_WITHIN: Duration = Duration::from_secs(15);

/// Polls member i's `/zookeeper` until `wanted` holds of it.
fn wait_view(cluster: &Cluster, i: usize, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + SHOWN_WITHIN;
    loop {
        let body = get(cluster.http(i), "/zookeeper").unwrap_or_default();
        let view: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if wanted(&view) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "n{i}'s /zookeeper never showed {what}; last: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn election<'a>(view: &'a Value, parent: &str) -> Option<&'a Value> {
    view["elections"]
        .as_array()?
        .iter()
        .find(|e| e["parent"] == parent)
}

#[test]
fn the_dashboard_shows_zookeeper_sessions_and_each_elections_holder() {
    let mut cluster = Cluster::stopped("zookeeper-dashboard", 3, 50, 300);
    for i in cluster.all() {
        spawn_with_zookeeper(&mut cluster, i);
    }
    cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    let address = zookeeper_address(&cluster, 1);
    wait_accepting(&address, Duration::from_secs(15));
    // Its own thread, so that the sessions keep pinging between the
    // test's steps.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let contenders: Vec<(zk::Client, String)> = runtime.block_on(async {
        let mut contenders = Vec::new();
        for _ in 0..3 {
            let client = zk::Client::connector()
                .with_session_timeout(Duration::from_secs(6))
                .connect(&address)
                .await
                .expect("a session on n1");
            contenders.push(client);
        }
        let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        contenders[0]
            .create("/election", b"", &open)
            .await
            .expect("/election");
        let ephemeral = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let mut named = Vec::new();
        for client in contenders {
            let (_, sequence) = client
                .create("/election/n-", b"", &ephemeral)
                .await
                .expect("a contender's node");
            let session = format!("{:#x}", client.session().id().0);
            named.push((client, format!("n-{sequence}")));
            println!("contender {} in session {session}", named.last().unwrap().1);
        }
        named
    });
    let session_of = |client: &zk::Client| format!("{:#x}", client.session().id().0);
    let first = (contenders[0].1.clone(), session_of(&contenders[0].0));
    for i in cluster.all() {
        let view = wait_view(&cluster, i, "the first contender holding", |view| {
            election(view, "/election").is_some_and(|e| {
                e["holder"] == first.0.as_str()
                    && e["holder_session"] == first.1.as_str()
                    && e["contenders"] == 3
            })
        });
        assert!(view["sessions_total"].as_u64() >= Some(3), "{view}");
        let sessions = view["sessions"].as_array().unwrap();
        for (client, _) in &contenders {
            let id = session_of(client);
            let shown = sessions.iter().find(|s| s["id"] == id.as_str());
            assert_eq!(
                shown.map(|s| s["ephemerals"].clone()),
                Some(Value::from(1)),
                "n{i} shows session {id} with its one ephemeral node: {view}"
            );
        }
    }
    // The holder leaves: the next lowest leads, on every member.
    let mut contenders = contenders.into_iter();
    let (holder, _) = contenders.next().unwrap();
    runtime.block_on(async move { drop(holder) });
    let rest: Vec<(zk::Client, String)> = contenders.collect();
    let next = (rest[0].1.clone(), session_of(&rest[0].0));
    for i in cluster.all() {
        wait_view(&cluster, i, "the second contender holding", |view| {
            election(view, "/election").is_some_and(|e| {
                e["holder"] == next.0.as_str()
                    && e["holder_session"] == next.1.as_str()
                    && e["contenders"] == 2
            })
        });
    }
    let page = get(cluster.http(1), "/").unwrap();
    assert!(
        page.contains("zookeeper-election-rows"),
        "the dashboard has the ZooKeeper section"
    );
    runtime.block_on(async move { drop(rest) });
}

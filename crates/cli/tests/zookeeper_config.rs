//! `/zookeeper/config` follows the cluster's members: it lists each one
//! with its ZooKeeper address as ZooKeeper 3.5+ lists its servers (what
//! Curator's ensemble tracker and zkCli's `config` read), a member that
//! joins later with the address it published, and not one that was
//! removed; its watch fires on each change. (zookeeper_zkcli.rs compares
//! the node's lines with a real ZooKeeper's.)
//!
//! Needs etcdctl (for `member remove`; scripts/test.sh installs it).

mod common;

use common::zookeeper::{spawn_with_zookeeper, wait_accepting, zookeeper_address};
use common::{bellwether_binary, Cluster};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// How long the leader may take to log a change of members in the node
/// (it looks every second).
const CHANGE_TIME_MAX: Duration = Duration::from_secs(20);

/// A member started by the test, killed when the test ends.
struct Joiner(Child);

impl Drop for Joiner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The line the node should hold for member `i`.
fn line(cluster: &Cluster, i: usize, zookeeper: &str) -> String {
    let port = cluster.peer_port;
    format!(
        "server.{i}={}:{port}:{port}:participant;{zookeeper}",
        cluster.ip(i)
    )
}

/// The node's data and stat.
async fn config(client: &zk::Client) -> (String, zk::Stat) {
    let (data, stat) = client.get_data("/zookeeper/config").await.unwrap();
    (String::from_utf8(data).unwrap(), stat)
}

/// Reads the node until its server lines are `lines`.
async fn wait_for_lines(client: &zk::Client, lines: &[String]) -> (String, zk::Stat) {
    let deadline = Instant::now() + CHANGE_TIME_MAX;
    loop {
        let (data, stat) = config(client).await;
        let servers: Vec<&str> = data.lines().filter(|l| l.starts_with("server.")).collect();
        if servers == lines {
            return (data, stat);
        }
        assert!(
            Instant::now() < deadline,
            "after {CHANGE_TIME_MAX:?} /zookeeper/config holds\n{data}\nnot\n{}",
            lines.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The stat ZooKeeper gives the node, and a version line naming its mzxid.
fn assert_as_zookeeper_stamps_it(data: &str, stat: &zk::Stat) {
    assert_eq!((stat.version, stat.aversion), (-1, -1), "{stat:?}");
    assert_eq!((stat.czxid, stat.ephemeral_owner), (0, 0), "{stat:?}");
    assert_eq!(stat.data_length as usize, data.len());
    let version = data.lines().last().unwrap();
    assert_eq!(version, format!("version={:x}", stat.mzxid), "{data}");
}

#[test]
fn the_config_node_lists_the_members_and_follows_a_join_and_a_removal() {
    common::etcdctl::require();
    let mut cluster = Cluster::stopped("zookeeper-config", 3, 50, 300);
    for i in cluster.all() {
        spawn_with_zookeeper(&mut cluster, i);
    }
    cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    let address = |i| zookeeper_address(&cluster, i);
    wait_accepting(&address(1), Duration::from_secs(15));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime
        .block_on(zk::Client::connect(&address(1)))
        .expect("a session on n1");

    // The members the cluster started with, each with its address.
    let first: Vec<String> = (1..=3).map(|i| line(&cluster, i, &address(i))).collect();
    let (data, stat) = runtime.block_on(wait_for_lines(&client, &first));
    assert_as_zookeeper_stamps_it(&data, &stat);

    // n4 joins on a machine of its own, and publishes its address.
    let (_, _, watcher) = runtime
        .block_on(client.get_and_watch_data("/zookeeper/config"))
        .unwrap();
    let ip4 = cluster.ip(4);
    let client4 = format!("127.0.0.1:{}", cluster.http_base + 54);
    let log = std::fs::File::create(cluster.dir.join("n4.log")).unwrap();
    let _joiner = Joiner(
        Command::new(bellwether_binary())
            .args(["node", "--join", &cluster.client_endpoints()])
            .args(["--cluster", &cluster.cluster_name])
            .args(["--peer-listen", &format!("{ip4}:{}", cluster.peer_port)])
            .args(["--client-listen", &client4])
            .args([
                "--http-listen",
                &format!("127.0.0.1:{}", cluster.http_base + 4),
            ])
            .args(["--zookeeper-listen", &address(4)])
            .arg("--data-dir")
            .arg(cluster.dir.join("n4"))
            .args(["--heartbeat-ms", "50", "--election-ms", "300"])
            .env("BELLWETHER_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the bellwether binary runs"),
    );
    let event = runtime
        .block_on(async { tokio::time::timeout(CHANGE_TIME_MAX, watcher.changed()).await })
        .expect("the node's watch fires when n4 is added");
    assert_eq!(event.event_type, zk::EventType::NodeDataChanged);
    assert_eq!(event.path, "/zookeeper/config");
    let mut four = first.clone();
    four.push(line(&cluster, 4, &address(4)));
    let (data, stat) = runtime.block_on(wait_for_lines(&client, &four));
    assert_as_zookeeper_stamps_it(&data, &stat);

    // n3 is removed: its line goes, and the version moves on.
    let endpoints = format!("{},{}", cluster.client(1), cluster.client(2));
    let (ok, out) = common::etcdctl::run(&endpoints, &["member", "remove", "3"], None);
    assert!(ok, "{out}");
    let without_three: Vec<String> = [1, 2, 4]
        .into_iter()
        .map(|i| line(&cluster, i, &address(i)))
        .collect();
    let (data, later) = runtime.block_on(wait_for_lines(&client, &without_three));
    assert_as_zookeeper_stamps_it(&data, &later);
    assert!(later.mzxid > stat.mzxid);
    drop(client);
}

//! What the ZooKeeper tests share: members started with their ZooKeeper
//! port, and the waits and paths those tests need.

use super::Cluster;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The repository's root (the cli crate is crates/cli).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

pub fn read_all_in_thread(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = from.read_to_string(&mut text);
        text
    })
}

/// Member i's ZooKeeper address: past the etcd API ports (`http_base + 50
/// + i`), below the real ZooKeeper's and etcd's (`http_base + 90…`).
pub fn zookeeper_address(cluster: &Cluster, i: usize) -> String {
    format!("127.0.0.1:{}", cluster.http_base + 60 + i as u16)
}

/// [`Cluster::spawn`] with `--zookeeper-listen` added for member i.
pub fn spawn_with_zookeeper(cluster: &mut Cluster, i: usize) {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(cluster.dir.join(format!("n{i}.log")))
        .unwrap();
    let child = cluster
        .command(i, &cluster.cluster_name.clone())
        .args(["--zookeeper-listen", &zookeeper_address(cluster, i)])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("the bellwether binary runs");
    cluster.children[i - 1] = Some(child);
}

/// Waits until `address` accepts TCP connections.
pub fn wait_accepting(address: &str, timeout: Duration) {
    let address: std::net::SocketAddr = address.parse().unwrap();
    let deadline = Instant::now() + timeout;
    while std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nothing accepts ZooKeeper clients on {address} after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

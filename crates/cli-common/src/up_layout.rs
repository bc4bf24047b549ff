//! Where `bellwether up`'s cluster lives: member i's ports (peers on
//! `base + i`, HTTP on `base + 100 + i`, the etcd API on `base + 200 + i`,
//! ZooKeeper's protocol on `base + 300 + i`),
//! its files in the cluster's directory, and a poll of the members'
//! status. Shared by `up`, `up add` and `status`, so none of them imports
//! another.

use crate::http_get;
use bellwether_server::NodeStatus;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// Most members `up` runs (ports base+1..base+64 and so on).
pub const MEMBERS_MAX: usize = 64;

/// The file naming the running `up` process.
pub const PID_FILE: &str = "up.pid";

/// Member `i`'s peer address.
pub fn peer_address(base: u16, i: usize) -> String {
    format!("127.0.0.1:{}", base as usize + i)
}

/// Member `i`'s HTTP address.
pub fn http_address(base: u16, i: usize) -> String {
    format!("127.0.0.1:{}", base as usize + 100 + i)
}

/// Member `i`'s etcd API address.
pub fn client_address(base: u16, i: usize) -> String {
    format!("127.0.0.1:{}", base as usize + 200 + i)
}

/// Member `i`'s ZooKeeper address.
pub fn zookeeper_address(base: u16, i: usize) -> String {
    format!("127.0.0.1:{}", base as usize + 300 + i)
}

/// Every one of `nodes` members' ZooKeeper addresses, as `node
/// --peer-zookeeper` takes them (`1=ADDR,2=ADDR,...`), so that the leader
/// lists them all in `/zookeeper/config`.
pub fn peer_zookeeper(base: u16, nodes: usize) -> String {
    (1..=nodes)
        .map(|i| format!("{i}={}", zookeeper_address(base, i)))
        .collect::<Vec<_>>()
        .join(",")
}

/// The members' HTTP addresses for a base port.
pub fn http_addresses(base: u16, nodes: usize) -> Vec<SocketAddr> {
    (1..=nodes)
        .map(|i| http_address(base, i).parse().expect("valid"))
        .collect()
}

/// How many members the cluster in `dir` has configs for (`n1.toml`,
/// `n2.toml`, … without gaps).
pub fn existing_members(dir: &Path) -> usize {
    (1..=MEMBERS_MAX)
        .take_while(|i| dir.join(format!("n{i}.toml")).exists())
        .count()
}

/// The base port of the cluster in `dir`: `up` gives member i the peer
/// port base+i, so base is `n1.toml`'s peer port minus 1.
pub fn recorded_base_port(dir: &Path) -> anyhow::Result<u16> {
    use anyhow::Context;
    let path = dir.join("n1.toml");
    let first = bellwether_server::config::ConfigLayer::from_file(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let listen = first
        .peer_listen
        .as_deref()
        .with_context(|| format!("{} names no peer_listen", path.display()))?;
    let address: SocketAddr = listen.parse().with_context(|| {
        format!(
            "{}: peer_listen {listen:?} is not host:port",
            path.display()
        )
    })?;
    address
        .port()
        .checked_sub(1)
        .with_context(|| format!("{}: peer_listen has port 0", path.display()))
}

/// Reads every member's status (down ones are `None`).
pub fn poll(addresses: &[SocketAddr]) -> Vec<Option<NodeStatus>> {
    addresses
        .iter()
        .map(|a| {
            http_get::get(*a, "/status", Duration::from_millis(300))
                .ok()
                .and_then(|body| serde_json::from_str(&body).ok())
        })
        .collect()
}

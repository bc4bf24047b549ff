//! A group of `bellwether peer` processes for tests: node i listens for
//! peers on its own loopback IP (127.0.<net>.<i>), so that nftables rules
//! can cut one node off, and serves /status on 127.0.0.1. Everything
//! started here is killed on drop.

use super::{bellwether_binary, get, net_for};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Peer port on every node's IP.
const PEER_PORT: u16 = 7500;

/// A running group.
pub struct PeerGroup {
    /// Data and logs.
    pub dir: PathBuf,
    /// Network number: node i is 127.0.<net>.<i>.
    pub net: u8,
    algorithm: String,
    extra: Vec<String>,
    nodes: usize,
    children: Vec<Option<Child>>,
}

impl PeerGroup {
    /// Starts `nodes` peers running `algorithm` (e.g. "bully"), with
    /// `extra` flags for every node.
    pub fn start(name: &str, algorithm: &str, nodes: usize, extra: &[&str]) -> PeerGroup {
        let net = net_for(name);
        let dir = std::env::temp_dir().join(format!("bw-peer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut group = PeerGroup {
            dir,
            net,
            algorithm: algorithm.into(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            nodes,
            children: (0..nodes).map(|_| None).collect(),
        };
        for i in 1..=nodes {
            group.spawn(i);
        }
        group
    }

    /// Node i's peer IP.
    pub fn ip(&self, i: usize) -> String {
        format!("127.0.{}.{}", self.net, i)
    }

    fn http(&self, i: usize) -> std::net::SocketAddr {
        // Below the ephemeral range, apart from test clusters' ports.
        let port = 10_000 + self.net as u16 * 100 + 50 + i as u16;
        format!("127.0.0.1:{port}").parse().unwrap()
    }

    /// Starts node i (again).
    pub fn spawn(&mut self, i: usize) {
        let peers: Vec<String> = (1..=self.nodes)
            .map(|j| format!("{j}={}:{PEER_PORT}", self.ip(j)))
            .collect();
        let https: Vec<String> = (1..=self.nodes)
            .map(|j| format!("{j}={}", self.http(j)))
            .collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("n{i}.log")))
            .unwrap();
        let child = Command::new(bellwether_binary())
            .arg("peer")
            .args(["--algorithm", &self.algorithm])
            .args(["--id", &i.to_string(), "--peers", &peers.join(",")])
            .arg("--data-dir")
            .arg(self.dir.join(format!("n{i}")))
            .args(["--http", &self.http(i).to_string()])
            .args(["--group-http", &https.join(",")])
            .args(&self.extra)
            .env("BELLWETHER_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the bellwether binary runs");
        self.children[i - 1] = Some(child);
    }

    /// Starts node i (again) with `extra` in place of the group's flags.
    pub fn spawn_with(&mut self, i: usize, extra: &[&str]) {
        let shared = std::mem::replace(
            &mut self.extra,
            extra.iter().map(|s| s.to_string()).collect(),
        );
        self.spawn(i);
        self.extra = shared;
    }

    /// SIGKILLs node i and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i - 1].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Node i's view, if it answers.
    pub fn status(&self, i: usize) -> Option<Value> {
        let body = get(self.http(i), "/status").ok()?;
        serde_json::from_str(&body).ok()
    }

    /// GETs `path` from node i's HTTP server.
    pub fn http_get(&self, i: usize, path: &str) -> String {
        get(self.http(i), path).unwrap_or_default()
    }

    /// Node i's metrics text.
    pub fn metrics(&self, i: usize) -> String {
        get(self.http(i), "/metrics").unwrap_or_default()
    }

    /// The nodes among `among` that claim to lead right now.
    pub fn claimed_leaders(&self, among: &[usize]) -> Vec<(usize, u64)> {
        among
            .iter()
            .filter_map(|i| self.status(*i).map(|s| (*i, s)))
            .filter(|(_, s)| s["is_leader"] == true)
            .map(|(i, s)| (i, s["token"].as_u64().unwrap()))
            .collect()
    }

    /// (leader, token) when every node of `among` answers and names the
    /// same leader, which itself claims to lead.
    pub fn agreed(&self, among: &[usize]) -> Option<(usize, u64)> {
        let statuses: Vec<(usize, Value)> = among
            .iter()
            .filter_map(|i| self.status(*i).map(|s| (*i, s)))
            .collect();
        if statuses.len() != among.len() {
            return None;
        }
        let leader = statuses[0].1["leader"].as_u64()? as usize;
        let same = statuses
            .iter()
            .all(|(_, s)| s["leader"].as_u64() == Some(leader as u64));
        let (_, own) = statuses.iter().find(|(i, _)| *i == leader)?;
        (same && own["is_leader"] == true).then(|| (leader, own["token"].as_u64().unwrap()))
    }

    /// Waits until `among` agree on a leader.
    pub fn wait_agreed(&self, among: &[usize], timeout: Duration) -> (usize, u64) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(found) = self.agreed(among) {
                return found;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "no agreed leader among {among:?} within {timeout:?}; logs in {}",
            self.dir.display()
        );
    }

    /// All node numbers.
    pub fn all(&self) -> Vec<usize> {
        (1..=self.nodes).collect()
    }
}

impl Drop for PeerGroup {
    fn drop(&mut self) {
        for i in 1..=self.nodes {
            self.kill(i);
        }
        // The logs stay when the test failed.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

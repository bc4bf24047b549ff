//! A real 3.4 etcd cluster of several members (Debian's `etcd-server`), the
//! yardstick for tests that run one client scenario on bellwether and on
//! etcd under the same faults (crates/cli/tests/patroni.rs kills the Raft
//! leader under Patroni on both).
//!
//! Member i listens for clients and peers on its own loopback IP,
//! 127.0.<net>.<i>, like a bellwether [`super::Cluster`]'s members, on
//! ports of its own past the ones such a cluster of the same network
//! number uses (clients on `10_000 + net × 100 + 60 + i`, peers on
//! `+ 70 + i`), so parallel tests never meet and a client's connection
//! names the member by its port alone. Leadership is read from each
//! member's JSON gateway (`POST /v3/maintenance/status`: the member's id
//! and the leader it knows). Every member is killed on drop; a missing
//! `etcd` binary fails the test (scripts/test.sh installs etcd-server).

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the members get to elect a leader and answer healthy.
const START_WAIT: Duration = Duration::from_secs(30);
/// Longest one status request may take.
const STATUS_TIMEOUT: Duration = Duration::from_millis(800);

/// A running etcd cluster.
pub struct EtcdCluster {
    /// Data directories and logs (`m<i>/`, `m<i>.log`).
    pub dir: PathBuf,
    /// Third octet of the members' IPs.
    pub net: u8,
    /// Number of members.
    pub members: usize,
    /// Member i's client port is `client_port_base + i`.
    client_port_base: u16,
    /// Member i's peer port is `peer_port_base + i`.
    peer_port_base: u16,
    /// Running members (None once killed).
    children: Vec<Option<Child>>,
}

impl EtcdCluster {
    /// Starts `members` etcd members for the test `name`, with etcd's
    /// `--heartbeat-interval` and `--election-timeout`, and waits until
    /// every one answers healthy.
    pub fn start(name: &str, members: usize, heartbeat_ms: u64, election_ms: u64) -> EtcdCluster {
        assert!((1..=9).contains(&members), "1 to 9 members");
        let net = super::net_for(name);
        let base = 10_000 + net as u16 * 100;
        let dir = std::env::temp_dir().join(format!("bw-etcds-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut cluster = EtcdCluster {
            dir,
            net,
            members,
            client_port_base: base + 60,
            peer_port_base: base + 70,
            children: (0..members).map(|_| None).collect(),
        };
        let token = format!("{name}-{}", std::process::id());
        for i in 1..=members {
            let child = cluster.spawn(i, &token, heartbeat_ms, election_ms);
            cluster.children[i - 1] = Some(child);
        }
        cluster.wait_healthy();
        cluster
    }

    /// Member i's IP.
    pub fn ip(&self, i: usize) -> String {
        format!("127.0.{}.{}", self.net, i)
    }

    /// Member i's client address.
    pub fn client(&self, i: usize) -> SocketAddr {
        format!("{}:{}", self.ip(i), self.client_port_base + i as u16)
            .parse()
            .unwrap()
    }

    /// Every member's client address, as `host:port`.
    pub fn client_addresses(&self) -> Vec<String> {
        (1..=self.members)
            .map(|i| self.client(i).to_string())
            .collect()
    }

    /// The members not killed.
    pub fn running(&self) -> Vec<usize> {
        (1..=self.members)
            .filter(|i| self.children[i - 1].is_some())
            .collect()
    }

    /// Member i's peer URL.
    fn peer_url(&self, i: usize) -> String {
        format!("http://{}:{}", self.ip(i), self.peer_port_base + i as u16)
    }

    /// Member i's log.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("m{i}.log"))).unwrap_or_default()
    }

    /// The member that `among` all name as leader, once they agree and it
    /// is one of them.
    pub fn wait_leader(&self, among: &[usize], timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(leader) = self.agreed_leader(among) {
                return leader;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "etcd members {among:?} agreed on no leader within {timeout:?}; logs in {}",
            self.dir.display()
        );
    }

    /// Member i's id, as its gateway reports it.
    pub fn member_id(&self, i: usize) -> u64 {
        let (id, _) = self
            .status(i)
            .unwrap_or_else(|| panic!("etcd member {i} does not answer its status"));
        id.parse().expect("a member id is a decimal number")
    }

    /// SIGKILLs member i and reaps it.
    pub fn kill(&mut self, i: usize) {
        let mut child = self.children[i - 1].take().expect("member i runs");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The leader every member of `among` reports, mapped to its member
    /// number, if they all answer and agree.
    fn agreed_leader(&self, among: &[usize]) -> Option<usize> {
        let mut ids = Vec::new();
        let mut leaders = Vec::new();
        for &i in among {
            let (id, leader) = self.status(i)?;
            ids.push((i, id));
            leaders.push(leader);
        }
        leaders.dedup();
        if leaders.len() != 1 {
            return None;
        }
        ids.iter()
            .find(|(_, id)| *id == leaders[0])
            .map(|(i, _)| *i)
    }

    /// Member i's (own id, leader id) from its gateway, as etcd's decimal
    /// strings.
    fn status(&self, i: usize) -> Option<(String, String)> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(STATUS_TIMEOUT))
            .proxy(None)
            .build()
            .into();
        let body = agent
            .post(&format!("http://{}/v3/maintenance/status", self.client(i)))
            .header("content-type", "application/json")
            .send("{}")
            .ok()?
            .body_mut()
            .read_to_string()
            .ok()?;
        let status: serde_json::Value = serde_json::from_str(&body).ok()?;
        let id = status["header"]["member_id"].as_str()?.to_string();
        let leader = status["leader"].as_str()?.to_string();
        Some((id, leader))
    }

    /// Waits until every member answers `/health` healthy.
    fn wait_healthy(&self) {
        let deadline = Instant::now() + START_WAIT;
        let healthy = |i: usize| {
            let address = self.client(i);
            TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
                && super::get(address, "/health")
                    .unwrap_or_default()
                    .contains("\"health\":\"true\"")
        };
        while Instant::now() < deadline {
            if (1..=self.members).all(healthy) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "etcd did not become healthy in {START_WAIT:?}; member 1's log:\n{}",
            self.log(1)
        );
    }

    /// Starts member i of a new cluster.
    fn spawn(&self, i: usize, token: &str, heartbeat_ms: u64, election_ms: u64) -> Child {
        let peers: Vec<String> = (1..=self.members)
            .map(|j| format!("m{j}={}", self.peer_url(j)))
            .collect();
        let client = format!("http://{}", self.client(i));
        let peer = self.peer_url(i);
        let log = std::fs::File::create(self.dir.join(format!("m{i}.log"))).unwrap();
        Command::new("etcd")
            .args(["--name", &format!("m{i}")])
            .arg("--data-dir")
            .arg(self.dir.join(format!("m{i}")))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &peers.join(",")])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", token])
            .args(["--heartbeat-interval", &heartbeat_ms.to_string()])
            .args(["--election-timeout", &election_ms.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start etcd ({error}): install Debian's etcd-server \
                     (scripts/test.sh does)"
                )
            })
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for child in self.children.iter_mut().filter_map(Option::take) {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

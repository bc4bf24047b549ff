//! A real cluster of `bellwether node` processes for tests: each node on
//! its own loopback IP (127.0.<net>.<i>) so that firewall rules can cut one
//! node off, HTTP on 127.0.0.1. Everything started here is stopped on drop.

#![allow(dead_code)]

pub mod etcd_cluster;
pub mod etcd_server;
pub mod etcdctl;
pub mod nft;
pub mod peer_group;
pub mod zookeeper;

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `bellwether` executable under test. Inside the cli crate cargo names
/// it (`CARGO_BIN_EXE_bellwether`); other crates' tests (crates/conformance)
/// take `BELLWETHER_BIN` or the binary cargo built next to the test
/// executable (`target/<profile>/bellwether`: `cargo test --workspace` builds
/// it for the cli crate's tests before running any test).
pub fn bellwether_binary() -> PathBuf {
    if let Some(path) = option_env!("CARGO_BIN_EXE_bellwether") {
        return PathBuf::from(path);
    }
    if let Some(path) = std::env::var_os("BELLWETHER_BIN") {
        return PathBuf::from(path);
    }
    // target/<profile>/deps/<test executable> -> target/<profile>/bellwether
    let test_executable = std::env::current_exe().expect("the test executable's path");
    let profile_dir = test_executable
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lies in target/<profile>/deps");
    let binary = profile_dir.join(format!("bellwether{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is missing: build it first (cargo build --release -p bellwether, or run \
         the whole workspace's tests), or set BELLWETHER_BIN",
        binary.display()
    );
    binary
}

/// `bellwether ARGS...` against `endpoints`, logging warnings only.
pub fn bellwether(endpoints: &str, args: &[&str]) -> Command {
    let mut command = Command::new(bellwether_binary());
    command
        .args(args)
        .env("BELLWETHER_ENDPOINTS", endpoints)
        .env("BELLWETHER_LOG", "warn");
    command
}

/// A running test cluster.
pub struct Cluster {
    /// Temporary directory for data and logs.
    pub dir: PathBuf,
    /// Size.
    pub nodes: usize,
    /// Third octet of the nodes' loopback IPs.
    pub net: u8,
    /// First HTTP port; node i uses http_base + i.
    pub http_base: u16,
    /// Peer port (same on every node's own IP).
    pub peer_port: u16,
    /// Heartbeat and election settings.
    pub heartbeat_ms: u64,
    /// Minimum election timeout.
    pub election_ms: u64,
    /// Running members (None when stopped).
    pub children: Vec<Option<Child>>,
    /// Every (term → leaders) seen by any poll, to check Election Safety.
    pub leaders_seen: BTreeMap<u64, std::collections::BTreeSet<u64>>,
    /// The cluster name every node is given.
    pub cluster_name: String,
    /// Extra flags for every node.
    pub node_flags: Vec<String>,
}

/// A distinct network number per test name, so parallel tests never share
/// addresses or ports.
pub fn net_for(name: &str) -> u8 {
    let hash = name
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
    20 + (hash % 200) as u8
}

impl Cluster {
    /// Starts `nodes` members and waits for nothing.
    pub fn start(name: &str, nodes: usize, heartbeat_ms: u64, election_ms: u64) -> Cluster {
        Cluster::start_with_flags(name, nodes, heartbeat_ms, election_ms, &[])
    }

    /// [`Cluster::start`], with `flags` added to every node's command line.
    pub fn start_with_flags(
        name: &str,
        nodes: usize,
        heartbeat_ms: u64,
        election_ms: u64,
        flags: &[&str],
    ) -> Cluster {
        let net = net_for(name);
        let dir = std::env::temp_dir().join(format!("bw-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut cluster = Cluster {
            dir,
            nodes,
            net,
            // Below the kernel's ephemeral range (32768 and up): a member's
            // listener on 127.0.0.1 must never find its port taken as the
            // source port of some other test's connection.
            http_base: 10_000 + net as u16 * 100,
            peer_port: 7000,
            heartbeat_ms,
            election_ms,
            children: (0..nodes).map(|_| None).collect(),
            leaders_seen: BTreeMap::new(),
            cluster_name: "test".into(),
            node_flags: flags.iter().map(|f| f.to_string()).collect(),
        };
        for i in 1..=nodes {
            cluster.spawn(i);
        }
        cluster
    }

    /// [`Cluster::start_with_flags`] with no member started yet: for tests
    /// that prepare the data directories first (`spawn` each member).
    pub fn stopped(name: &str, nodes: usize, heartbeat_ms: u64, election_ms: u64) -> Cluster {
        let mut cluster = Cluster::start_with_flags(name, 0, heartbeat_ms, election_ms, &[]);
        cluster.nodes = nodes;
        cluster.children = (0..nodes).map(|_| None).collect();
        cluster
    }

    /// Node i's peer IP.
    pub fn ip(&self, i: usize) -> String {
        format!("127.0.{}.{}", self.net, i)
    }

    /// Node i's HTTP address.
    pub fn http(&self, i: usize) -> SocketAddr {
        format!("127.0.0.1:{}", self.http_base + i as u16)
            .parse()
            .unwrap()
    }

    /// Node i's etcd API address.
    pub fn client(&self, i: usize) -> SocketAddr {
        format!("127.0.0.1:{}", self.http_base + 50 + i as u16)
            .parse()
            .unwrap()
    }

    /// Every member's etcd API address, comma-separated (for etcdctl).
    pub fn client_endpoints(&self) -> String {
        (1..=self.nodes)
            .map(|i| self.client(i).to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node i's data directory.
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("n{i}"))
    }

    /// The node command line for member i.
    pub fn command(&self, i: usize, cluster_name: &str) -> Command {
        let peers: Vec<String> = (1..=self.nodes)
            .map(|j| format!("{j}={}:{}", self.ip(j), self.peer_port))
            .collect();
        let https: Vec<String> = (1..=self.nodes)
            .map(|j| format!("{j}={}", self.http(j)))
            .collect();
        let clients: Vec<String> = (1..=self.nodes)
            .map(|j| format!("{j}={}", self.client(j)))
            .collect();
        let mut command = Command::new(bellwether_binary());
        command
            .arg("node")
            .args(["--id", &i.to_string(), "--cluster", cluster_name])
            .args(["--peers", &peers.join(","), "--peer-http", &https.join(",")])
            .args(["--http-listen", &self.http(i).to_string()])
            .args([
                "--client-listen",
                &self.client(i).to_string(),
                "--peer-client",
                &clients.join(","),
            ])
            .arg("--data-dir")
            .arg(self.data_dir(i))
            .args([
                "--heartbeat-ms",
                &self.heartbeat_ms.to_string(),
                "--election-ms",
                &self.election_ms.to_string(),
            ])
            .args(&self.node_flags)
            .env("BELLWETHER_LOG", "info");
        command
    }

    /// `bellwether snapshot restore FILE` with member i's node flags;
    /// returns (success, stdout and stderr).
    pub fn restore(&self, i: usize, file: &Path) -> (bool, String) {
        let node = self.command(i, &self.cluster_name.clone());
        let flags: Vec<_> = node.get_args().skip(1).map(|a| a.to_owned()).collect();
        let output = Command::new(bellwether_binary())
            .args(["snapshot", "restore"])
            .arg(file)
            .args(flags)
            .output()
            .expect("bellwether runs");
        let text = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), text)
    }

    /// Starts member i (again).
    pub fn spawn(&mut self, i: usize) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("n{i}.log")))
            .unwrap();
        let child = self
            .command(i, &self.cluster_name.clone())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the bellwether binary runs");
        self.children[i - 1] = Some(child);
    }

    /// Sends `signal` (a number) to member i.
    pub fn signal(&self, i: usize, signal: i32) {
        let pid = self.children[i - 1].as_ref().expect("running").id();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGKILLs member i and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i - 1].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits for member i to exit; returns its exit status.
    pub fn wait_exit(&mut self, i: usize, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(child) = self.children[i - 1].as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.children[i - 1] = None;
                    return Some(status);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Member i's `/status`, if it answers.
    pub fn status(&mut self, i: usize) -> Option<Value> {
        let body = get(self.http(i), "/status").ok()?;
        let status: Value = serde_json::from_str(&body).ok()?;
        if status["role"] == "leader" {
            let term = status["term"].as_u64().unwrap();
            self.leaders_seen
                .entry(term)
                .or_default()
                .insert(status["id"].as_u64().unwrap());
        }
        Some(status)
    }

    /// Polls everyone; returns (leader, term) if exactly one running member
    /// leads in the highest term and every running member follows it.
    pub fn agreed_leader(&mut self, among: &[usize]) -> Option<(usize, u64)> {
        let statuses: Vec<(usize, Value)> = among
            .iter()
            .filter_map(|i| self.status(*i).map(|s| (*i, s)))
            .collect();
        if statuses.len() != among.len() {
            return None;
        }
        let leader = statuses[0].1["leader"].as_u64()? as usize;
        let term = statuses.iter().find(|(i, _)| *i == leader)?.1["term"].as_u64()?;
        let leads = statuses
            .iter()
            .any(|(i, s)| *i == leader && s["role"] == "leader" && s["committed_in_term"] == true);
        let all = statuses
            .iter()
            .all(|(_, s)| s["leader"].as_u64() == Some(leader as u64));
        (leads && all).then_some((leader, term))
    }

    /// Waits until `among` agree on a leader that committed in its term.
    pub fn wait_leader(&mut self, among: &[usize], timeout: Duration) -> (usize, u64) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(found) = self.agreed_leader(among) {
                return found;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "no agreed leader among {among:?} within {timeout:?}; logs in {}",
            self.dir.display()
        );
    }

    /// All member numbers.
    pub fn all(&self) -> Vec<usize> {
        (1..=self.nodes).collect()
    }

    /// Fails if any term ever showed two leaders.
    pub fn assert_one_leader_per_term(&self) {
        for (term, leaders) in &self.leaders_seen {
            assert!(leaders.len() <= 1, "term {term} had leaders {leaders:?}");
        }
    }

    /// Reads a node's log file.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("n{i}.log"))).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 1..=self.nodes {
            if let Some(mut child) = self.children[i - 1].take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// GET through ureq: the body of any answer (a 503 from `/ready` too).
pub fn get(address: SocketAddr, path: &str) -> Result<String, ureq::Error> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(800)))
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    agent
        .get(&format!("http://{address}{path}"))
        .call()?
        .body_mut()
        .read_to_string()
}

/// Bytes of every file under `dir`, to prove nothing was modified.
pub fn snapshot_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    out
}

/// Whether process `pid` has an established TCP connection to local port
/// `port` (IPv4), read from /proc: the process's socket inodes matched
/// against /proc/net/tcp. False where /proc cannot be read.
pub fn has_connection_to(pid: u32, port: u16) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let inodes: std::collections::BTreeSet<String> = fds
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().to_string();
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table.lines().skip(1).any(|line| {
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() > 9
            && fields[3] == "01"
            && fields[2]
                .rsplit_once(':')
                .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok())
                == Some(port)
            && inodes.contains(fields[9])
    })
}

//! What the ZooKeeper tests share: members started with their ZooKeeper
//! port, a real ZooKeeper ensemble to compare them with, and the waits,
//! paths and diffs those tests need.

use super::Cluster;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a real ensemble gets to elect a leader that all follow.
const ZOOKEEPER_START: Duration = Duration::from_secs(120);

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
        .args(["--peer-zookeeper", &peer_zookeeper(cluster)])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("the bellwether binary runs");
    cluster.children[i - 1] = Some(child);
}

/// Every member's ZooKeeper address, as `--peer-zookeeper` takes them.
fn peer_zookeeper(cluster: &Cluster) -> String {
    cluster
        .all()
        .into_iter()
        .map(|i| format!("{i}={}", zookeeper_address(cluster, i)))
        .collect::<Vec<_>>()
        .join(",")
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

/// A real 3-server ZooKeeper ensemble started by
/// tests/zookeeper/run_real_zookeeper.sh as the leader of its own process
/// group (the servers' JVMs are in it too); the group is killed on stop
/// or drop.
pub struct RealZooKeeper {
    /// The servers' configurations, data and logs.
    dir: PathBuf,
    /// The script, leading the group its JVMs are in.
    script: ProcessGroup,
    /// Every server, in the order of their ids.
    servers: Vec<RealServer>,
}

/// One server of a [`RealZooKeeper`] as the script reported it ready.
pub struct RealServer {
    /// `127.0.NET.(100+i):2181`.
    pub address: String,
    /// `leader` or `follower`.
    pub mode: String,
    /// The JVM's pid, to see it gone.
    pub java: u32,
}

impl RealZooKeeper {
    /// Starts the ensemble on loopback IPs 127.0.<net>.101-103, the net
    /// derived from `name` like a test cluster's (whose members are
    /// 127.0.<net>.1-3), and waits until one server leads and the others
    /// follow.
    pub fn start(name: &str) -> RealZooKeeper {
        let net = super::net_for(name);
        let dir = std::env::temp_dir().join(format!("bw-zookeeper-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let script = workspace().join("tests/zookeeper/run_real_zookeeper.sh");
        let mut group = ProcessGroup::spawn(
            Command::new("bash")
                .arg(&script)
                .arg(&dir)
                .arg(net.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .unwrap_or_else(|error| panic!("cannot run bash {}: {error}", script.display()));
        let child = group.child();
        let (lines, ready) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let stderr = read_all_in_thread(child.stderr.take().unwrap());
        let mut zookeeper = RealZooKeeper {
            dir,
            script: group,
            servers: Vec::new(),
        };
        let deadline = Instant::now() + ZOOKEEPER_START;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match ready.recv_timeout(left) {
                Ok(line) if line == "zookeeper ready" => break,
                Ok(line) if line.starts_with("zookeeper server ") => {
                    zookeeper.servers.push(RealServer::parse(&line));
                }
                _ => {
                    zookeeper.script.kill();
                    panic!(
                        "the real ZooKeeper ensemble on 127.0.{net}.101-103 did not start: {}",
                        stderr.join().unwrap_or_default()
                    );
                }
            }
        }
        let leaders = zookeeper.with_mode("leader").count();
        let followers = zookeeper.with_mode("follower").count();
        assert_eq!(
            (zookeeper.servers.len(), leaders, followers),
            (3, 1, 2),
            "three servers, one leading"
        );
        zookeeper
    }

    /// The servers in `mode`.
    pub fn with_mode<'a>(&'a self, mode: &'a str) -> impl Iterator<Item = &'a RealServer> + 'a {
        self.servers
            .iter()
            .filter(move |server| server.mode == mode)
    }

    /// A follower's client address: the transcript's clients connect to a
    /// follower, as they do in bellwether's cluster.
    pub fn follower(&self) -> &str {
        &self
            .with_mode("follower")
            .next()
            .expect("two follow")
            .address
    }

    /// The leader's client address.
    pub fn leader(&self) -> &str {
        &self.with_mode("leader").next().expect("one leads").address
    }

    /// Kills the process group, then fails if a JVM is still alive.
    pub fn stop(mut self) {
        self.script.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        for server in &self.servers {
            while alive(server.java) {
                assert!(
                    Instant::now() < deadline,
                    "the JVM of real ZooKeeper's server {} (pid {}) outlived its process \
                     group's SIGKILL",
                    server.address,
                    server.java
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl RealServer {
    /// Reads `zookeeper server I ADDRESS MODE pid PID`.
    fn parse(line: &str) -> RealServer {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["zookeeper", "server", _, address, mode, "pid", pid] => RealServer {
                address: address.to_string(),
                mode: mode.to_string(),
                java: pid.parse().expect("a pid"),
            },
            _ => panic!("not a server line of run_real_zookeeper.sh: {line}"),
        }
    }
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) STATE ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

impl Drop for RealZooKeeper {
    fn drop(&mut self) {
        self.script.kill();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A process started as the leader of a new process group, with what it
/// starts (a script's JVMs); the whole group is killed by
/// [`ProcessGroup::kill`] or on drop.
pub struct ProcessGroup(Option<Child>);

impl ProcessGroup {
    /// Spawns `command` as the leader of a new group.
    pub fn spawn(command: &mut Command) -> std::io::Result<ProcessGroup> {
        let child = command.process_group(0).spawn()?;
        Ok(ProcessGroup(Some(child)))
    }

    /// The leader, until the group is killed.
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("the group was killed")
    }

    /// SIGKILL to every process of the group, then the leader reaped. The
    /// signal goes through bash's `kill` (crates/conformance shares these
    /// helpers and has no crate that sends signals); the leader gets
    /// SIGKILL on its own as well, in case bash cannot run.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = Command::new("bash")
                .args(["-c", "kill -KILL -- \"-$1\" 2>/dev/null", "kill"])
                .arg(child.id().to_string())
                .stdin(Stdio::null())
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Fails with a unified-style diff unless the transcripts are equal.
pub fn assert_same_transcript(left_name: &str, left: &str, right_name: &str, right: &str) {
    if left == right {
        return;
    }
    let a: Vec<&str> = left.lines().collect();
    let b: Vec<&str> = right.lines().collect();
    panic!(
        "the transcripts differ\n--- {left_name}\n+++ {right_name}\n{}",
        unified_diff(&a, &b, 3)
    );
}

/// Lines of `a` and `b` as a diff: an LCS table, then hunks of changes
/// with `context` unchanged lines around them.
pub fn unified_diff(a: &[&str], b: &[&str], context: usize) -> String {
    let (n, m) = (a.len(), b.len());
    let mut common = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] = if a[i] == b[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    // (mark, line in a, line in b, text), in order.
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', i, j, a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || common[i + 1][j] >= common[i][j + 1]) {
            ops.push(('-', i, j, a[i]));
            i += 1;
        } else {
            ops.push(('+', i, j, b[j]));
            j += 1;
        }
    }
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k].0 != ' ').collect();
    let shown = |k: usize| {
        changed
            .iter()
            .any(|&c| k + context >= c && k <= c + context)
    };
    let mut out = String::new();
    let mut in_hunk = false;
    for (k, (mark, i, j, text)) in ops.iter().enumerate() {
        if !shown(k) {
            in_hunk = false;
            continue;
        }
        if !in_hunk {
            out.push_str(&format!("@@ -{} +{} @@\n", i + 1, j + 1));
            in_hunk = true;
        }
        out.push_str(&format!("{mark}{text}\n"));
    }
    out
}

//! A real Apache ZooKeeper ensemble as the yardstick of `bellwether bench
//! zookeeper --compare-zookeeper`, the way [`crate::etcd_cluster`] is etcd
//! for `bench kv`: three `QuorumPeerMain` JVMs of Debian's `zookeeper`
//! package (3.8), each with its own `zoo.cfg` and `myid`, server i on its
//! own loopback IP `127.0.<net>.<i>` with ZooKeeper's usual ports (clients
//! 2181, quorum 2888, election 3888).
//!
//! The settings are the package's example configuration (`tickTime=2000`,
//! `initLimit=10`, `syncLimit=5`) and ZooKeeper's defaults otherwise, so
//! the transaction log is fsynced before a write is acknowledged
//! (`forceSync` stays on); only the admin HTTP server is turned off. The
//! JVM runs with its own defaults, as the package's `zkServer.sh` starts
//! it (no heap flags).
//!
//! Readiness is read with the four-letter word `srvr`, which ZooKeeper 3.8
//! answers by default: the ensemble is ready when every server reports
//! `Mode: leader` or `Mode: follower` and exactly one leads. Each server is
//! a [`Member`], killed when dropped.

use crate::member_process::Member;
use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// ZooKeeper's client port, on each server's own IP.
pub const CLIENT_PORT: u16 = 2181;
/// The followers' port to the leader.
const QUORUM_PORT: u16 = 2888;
/// The leader election port.
const ELECTION_PORT: u16 = 3888;
/// The package's jar; its manifest names the other jars it needs.
const JAR: &str = "/usr/share/java/zookeeper.jar";
/// The server's entry point for an ensemble.
const MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
/// Longest wait for a fresh ensemble to elect a leader that all follow
/// (JVM start-up included).
const READY_TIME_MAX: Duration = Duration::from_secs(90);
/// Pause between two readiness polls.
const READY_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Longest wait for one `srvr` answer.
const SRVR_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest `apt-get update` or `apt-get install`.
const APT_TIME_MAX: Duration = Duration::from_secs(600);

/// Where the servers live.
#[derive(Clone, Debug)]
pub struct EnsembleLayout {
    /// Holds `s<i>/` (data and `myid`), `s<i>.cfg` and `s<i>.log`.
    pub dir: PathBuf,
    /// Third octet of the servers' IPs.
    pub net: u8,
    /// Number of servers.
    pub servers: usize,
}

impl EnsembleLayout {
    fn ip(&self, i: usize) -> Ipv4Addr {
        assert!(
            (1..=self.servers).contains(&i),
            "server {i} of {}",
            self.servers
        );
        Ipv4Addr::new(127, 0, self.net, i as u8)
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("s{i}"))
    }

    fn config_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("s{i}.cfg"))
    }

    /// Server i's `zoo.cfg`. Each server's client address is on its
    /// `server.` line (ZooKeeper 3.5's form), so that `/zookeeper/config`
    /// lists it, as bellwether's does.
    fn config(&self, i: usize) -> String {
        let mut config = format!(
            "tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={}\nadmin.enableServer=false\n",
            self.data_dir(i).display(),
        );
        for j in 1..=self.servers {
            let ip = self.ip(j);
            config.push_str(&format!(
                "server.{j}={ip}:{QUORUM_PORT}:{ELECTION_PORT};{ip}:{CLIENT_PORT}\n"
            ));
        }
        config
    }
}

/// What `srvr` says about one server.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ServerState {
    /// The first line's version, e.g. `3.8.0`.
    version: String,
    /// `leader`, `follower`, `standalone`, ...
    mode: String,
}

/// A running ensemble.
pub struct ZookeeperEnsemble {
    layout: EnsembleLayout,
    /// Server i is `servers[i - 1]`.
    servers: Vec<Member>,
}

/// Installs Debian's `zookeeper` (which brings a JRE) with apt-get when
/// `java` or the jar is missing; the apt-get log goes to `log_dir`.
pub fn ensure_installed(log_dir: &Path) -> Result<()> {
    if installed() {
        return Ok(());
    }
    let log = log_dir.join("apt-get.log");
    for args in [&["update"][..], &["install", "-y", "zookeeper"][..]] {
        let mut command = Command::new("apt-get");
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        let mut apt = Member::spawn(command, log.clone()).context(
            "ZooKeeper is missing and apt-get cannot run; install ZooKeeper 3.8 (Debian: zookeeper)",
        )?;
        let status = apt.wait_exit(APT_TIME_MAX)?;
        if !status.success() {
            bail!(
                "apt-get {} failed ({status}); read {}",
                args.join(" "),
                log.display()
            );
        }
    }
    if !installed() {
        bail!(
            "ZooKeeper is still missing after apt-get install; read {}",
            log.display()
        );
    }
    Ok(())
}

fn installed() -> bool {
    Path::new(JAR).is_file()
        && Command::new("java")
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success())
}

impl ZookeeperEnsemble {
    /// Writes every server's configuration and `myid`, and starts them;
    /// waits for nothing.
    pub fn start(layout: EnsembleLayout) -> Result<ZookeeperEnsemble> {
        assert!((1..=9).contains(&layout.servers), "1 to 9 servers");
        let mut ensemble = ZookeeperEnsemble {
            layout,
            servers: Vec::new(),
        };
        for i in 1..=ensemble.layout.servers {
            let layout = &ensemble.layout;
            let data = layout.data_dir(i);
            std::fs::create_dir_all(&data)
                .with_context(|| format!("cannot create {}", data.display()))?;
            std::fs::write(data.join("myid"), format!("{i}\n"))?;
            std::fs::write(layout.config_path(i), layout.config(i))?;
            let mut command = Command::new("java");
            command
                .arg("-cp")
                .arg(JAR)
                .arg(MAIN_CLASS)
                .arg(layout.config_path(i))
                .current_dir(&layout.dir);
            let server = Member::spawn(command, layout.dir.join(format!("s{i}.log")))?;
            ensemble.servers.push(server);
        }
        Ok(ensemble)
    }

    /// Every server's process.
    pub fn servers(&self) -> &[Member] {
        &self.servers
    }

    /// Every server's process, to check that it still runs.
    pub fn servers_mut(&mut self) -> &mut [Member] {
        &mut self.servers
    }

    /// The client addresses (host:port) of every server.
    pub fn client_endpoints(&self) -> Vec<String> {
        (1..=self.layout.servers)
            .map(|i| format!("{}:{CLIENT_PORT}", self.layout.ip(i)))
            .collect()
    }

    /// The server whose `srvr` says `Mode: leader`, asking each once.
    pub fn leader(&self) -> Option<usize> {
        (1..=self.layout.servers).find(|&i| {
            srvr(SocketAddr::from((self.layout.ip(i), CLIENT_PORT)))
                .is_some_and(|state| state.mode == "leader")
        })
    }

    /// Waits until every server serves, one as leader and the others as
    /// followers; returns the leader's number and the servers' version.
    pub fn wait_ready(&mut self, interrupted: &AtomicBool) -> Result<(usize, String)> {
        let deadline = Instant::now() + READY_TIME_MAX;
        loop {
            let states: Option<Vec<ServerState>> = (1..=self.layout.servers)
                .map(|i| srvr(SocketAddr::from((self.layout.ip(i), CLIENT_PORT))))
                .collect();
            if let Some(found) = states.as_deref().and_then(leader_of) {
                return Ok(found);
            }
            if interrupted.load(Ordering::SeqCst) {
                bail!("interrupted while waiting for ZooKeeper's leader");
            }
            for server in &mut self.servers {
                server.check_running()?;
            }
            if Instant::now() >= deadline {
                let logs: Vec<String> = self
                    .servers
                    .iter()
                    .map(|s| s.log_path().display().to_string())
                    .collect();
                bail!(
                    "the ZooKeeper servers did not elect a leader within {READY_TIME_MAX:?}; read {}",
                    logs.join(", ")
                );
            }
            std::thread::sleep(READY_POLL_INTERVAL);
        }
    }
}

/// The leader (1-based) and version when exactly one server leads and the
/// others follow.
fn leader_of(states: &[ServerState]) -> Option<(usize, String)> {
    let leaders: Vec<usize> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| s.mode == "leader")
        .map(|(i, _)| i + 1)
        .collect();
    let others_follow = states
        .iter()
        .all(|s| s.mode == "leader" || s.mode == "follower");
    match leaders[..] {
        [leader] if others_follow => Some((leader, states[0].version.clone())),
        _ => None,
    }
}

/// Asks `address` `srvr`; `None` when it does not answer in time or does
/// not serve yet.
fn srvr(address: SocketAddr) -> Option<ServerState> {
    let mut stream = TcpStream::connect_timeout(&address, SRVR_TIMEOUT).ok()?;
    stream.set_read_timeout(Some(SRVR_TIMEOUT)).ok()?;
    stream.set_write_timeout(Some(SRVR_TIMEOUT)).ok()?;
    stream.write_all(b"srvr").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    parse_srvr(&answer)
}

/// Reads a `srvr` answer: its version line and its mode.
fn parse_srvr(answer: &str) -> Option<ServerState> {
    let value = |name: &str| {
        answer
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let version_line = value("Zookeeper version:")?;
    // "3.8.0-11+deb12u2-..., built on ...": the release before any suffix.
    let version = version_line
        .split([',', '-', ' '])
        .next()
        .unwrap_or_default()
        .to_string();
    Some(ServerState {
        version,
        mode: value("Mode:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_names_every_server_and_keeps_fsync_and_the_defaults() {
        let layout = EnsembleLayout {
            dir: PathBuf::from("/tmp/zk"),
            net: 209,
            servers: 3,
        };
        let config = layout.config(2);
        assert!(config.contains("dataDir=/tmp/zk/s2\n"), "{config}");
        assert!(config.contains("tickTime=2000\n"));
        assert!(config.contains("admin.enableServer=false\n"));
        assert!(config.contains("server.2=127.0.209.2:2888:3888;127.0.209.2:2181\n"));
        assert!(config.contains("server.3=127.0.209.3:2888:3888;127.0.209.3:2181\n"));
        assert!(!config.contains("forceSync"), "fsync stays on");
    }

    #[test]
    fn srvr_answers_give_the_version_and_mode() {
        let answer = "Zookeeper version: 3.8.0-11+deb12u2-1, built on 2024-06-16 UTC\n\
                      Latency min/avg/max: 0/0.0/0\nReceived: 1\nSent: 0\nConnections: 1\n\
                      Outstanding: 0\nZxid: 0x100000000\nMode: follower\nNode count: 5\n";
        let state = parse_srvr(answer).unwrap();
        assert_eq!(state.version, "3.8.0");
        assert_eq!(state.mode, "follower");
        let not_serving = "This ZooKeeper instance is not currently serving requests\n";
        assert_eq!(parse_srvr(not_serving), None);
    }

    #[test]
    fn ready_needs_exactly_one_leader_and_only_followers_besides() {
        let state = |mode: &str| ServerState {
            version: "3.8.0".into(),
            mode: mode.into(),
        };
        let ready = [state("follower"), state("leader"), state("follower")];
        assert_eq!(leader_of(&ready), Some((2, "3.8.0".into())));
        assert_eq!(leader_of(&[state("follower"), state("follower")]), None);
        assert_eq!(leader_of(&[state("leader"), state("leader")]), None);
        assert_eq!(leader_of(&[state("leader"), state("standalone")]), None);
    }
}

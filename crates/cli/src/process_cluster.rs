//! The processes `bellwether bench failover` starts, and the bellwether side
//! of it: [`Member`] is one supervised child process (killed on drop, so a
//! failed or panicking benchmark leaves nothing running), and
//! [`ProcessCluster`] is a cluster of `bellwether node` processes, each with
//! its peer listener on its own loopback IP `127.0.<net>.<i>` so that
//! firewall rules on that IP cut exactly that member off. The peer transport
//! binds outbound connections to the same IP (see
//! `bellwether_transport`), so `ip saddr`/`ip daddr` rules catch
//! both directions.

use crate::contender::{Contender, Leadership};
use crate::http_get;
use crate::signals::{send_signal, SIGTERM};
use anyhow::{bail, Context, Result};
use bellwether_core::Role;
use bellwether_server::NodeStatus;
use std::fs::OpenOptions;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for one `/status` answer while polling. Short, so that a
/// survivor that hangs does not stall the poll of the others for long.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(100);
/// Largest cluster the benchmark starts: one loopback IP per member, and
/// enough for any realistic failover measurement.
pub const MEMBERS_MAX: usize = 9;
/// How often a bounded wait for a process to exit looks again.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// One child process of the benchmark. It runs in its own process group,
/// so a Ctrl-C at the terminal reaches only the benchmark, which then stops
/// every member itself (and removes its firewall rules).
pub struct Member {
    /// The running process; `None` once it has been reaped.
    child: Option<Child>,
    /// Where its stdout and stderr go (appended to across restarts); named
    /// in every error about this member.
    log_path: PathBuf,
    /// The log's length when the current process started: what it wrote
    /// begins there.
    log_start: u64,
}

impl Member {
    /// Starts `command` with stdout and stderr appended to `log_path`.
    pub fn spawn(command: Command, log_path: PathBuf) -> Result<Member> {
        let mut member = Member {
            child: None,
            log_path,
            log_start: 0,
        };
        member.respawn(command)?;
        Ok(member)
    }

    /// Starts `command` again in place of the reaped process.
    pub fn respawn(&mut self, mut command: Command) -> Result<()> {
        assert!(
            self.child.is_none(),
            "a member is started only when its previous process is reaped"
        );
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .with_context(|| format!("cannot open {}", self.log_path.display()))?;
        self.log_start = log.metadata().map_or(0, |m| m.len());
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {:?}", command.get_program()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Process id while the process has not been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The member's log file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// What the current (or last) process wrote to the log.
    pub fn log_of_this_start(&self) -> String {
        let log = std::fs::read(&self.log_path).unwrap_or_default();
        let start = (self.log_start as usize).min(log.len());
        String::from_utf8_lossy(&log[start..]).into_owned()
    }

    /// Sends SIGKILL (directly, no helper process: this is the crash
    /// scenario's fault and its timing matters). The caller reaps later.
    pub fn kill(&mut self) -> Result<()> {
        let child = self
            .child
            .as_mut()
            .context("kill: the member is not running")?;
        child
            .kill()
            .with_context(|| format!("cannot SIGKILL pid {}", child.id()))
    }

    /// Sends SIGTERM with the `kill` command (the crate has no unsafe code,
    /// hence no `libc::kill`).
    pub fn terminate(&self) -> Result<()> {
        let pid = self.pid().context("terminate: the member is not running")?;
        send_signal(pid, SIGTERM).with_context(|| format!("cannot SIGTERM pid {pid}"))
    }

    /// Waits until the process exits and reaps it; fails after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Result<ExitStatus> {
        let child = self
            .child
            .as_mut()
            .context("wait_exit: the member is not running")?;
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                return Ok(status);
            }
            if Instant::now() >= deadline {
                bail!(
                    "pid {} did not exit within {limit:?}; read {}",
                    child.id(),
                    self.log_path.display()
                );
            }
            std::thread::sleep(EXIT_POLL_INTERVAL);
        }
    }

    /// Fails if the process has exited on its own.
    pub fn check_running(&mut self) -> Result<()> {
        let child = self.child.as_mut().context("the member is not running")?;
        if let Some(status) = child.try_wait()? {
            self.child = None;
            bail!(
                "a member exited unexpectedly ({status}); read {}",
                self.log_path.display()
            );
        }
        Ok(())
    }

    /// Resident set size in KiB (`VmRSS` of `/proc/<pid>/status`), if the
    /// process runs.
    pub fn resident_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Where the members of a [`ProcessCluster`] live and how they are tuned.
#[derive(Clone, Debug)]
pub struct ClusterLayout {
    /// Holds `n<i>/` (data) and `n<i>.log` for each member.
    pub dir: PathBuf,
    /// Third octet of the members' peer IPs.
    pub net: u8,
    /// Member i listens for peers on `127.0.<net>.<i>:base_port+i` and
    /// serves HTTP on `127.0.0.1:base_port+100+i`.
    pub base_port: u16,
    /// Number of members.
    pub nodes: usize,
    /// Heartbeat interval in ms.
    pub heartbeat_ms: u64,
    /// Minimum election timeout in ms.
    pub election_ms: u64,
}

impl ClusterLayout {
    /// Member i's peer IP.
    pub fn peer_ip(&self, i: usize) -> Ipv4Addr {
        assert!(
            (1..=self.nodes).contains(&i),
            "member {i} of {}",
            self.nodes
        );
        Ipv4Addr::new(127, 0, self.net, i as u8)
    }

    fn peer_address(&self, i: usize) -> String {
        format!("{}:{}", self.peer_ip(i), self.base_port as usize + i)
    }

    fn http_address(&self, i: usize) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], (self.base_port as usize + 100 + i) as u16))
    }

    /// Member i's etcd API address: `127.0.0.1:base_port+200+i`.
    fn client_address(&self, i: usize) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], (self.base_port as usize + 200 + i) as u16))
    }
}

/// A cluster of `bellwether node` child processes of this executable.
pub struct ProcessCluster {
    /// Addresses, directories and timing.
    layout: ClusterLayout,
    /// Member i is `members[i - 1]`.
    members: Vec<Member>,
    /// Added to every member's command line.
    extra_args: Vec<String>,
}

impl ProcessCluster {
    /// Starts every member; waits for nothing.
    pub fn start(layout: ClusterLayout) -> Result<ProcessCluster> {
        ProcessCluster::start_with_args(layout, Vec::new())
    }

    /// [`ProcessCluster::start`], with `extra_args` on every member's
    /// command line (TLS files, say).
    pub fn start_with_args(
        layout: ClusterLayout,
        extra_args: Vec<String>,
    ) -> Result<ProcessCluster> {
        assert!((1..=MEMBERS_MAX).contains(&layout.nodes));
        assert!(layout.base_port as usize + 200 + layout.nodes <= u16::MAX as usize);
        std::fs::create_dir_all(&layout.dir)
            .with_context(|| format!("cannot create {}", layout.dir.display()))?;
        let mut cluster = ProcessCluster {
            layout,
            members: Vec::new(),
            extra_args,
        };
        for i in 1..=cluster.layout.nodes {
            let member = Member::spawn(
                cluster.command(i)?,
                cluster.layout.dir.join(format!("n{i}.log")),
            )?;
            cluster.members.push(member);
        }
        Ok(cluster)
    }

    /// The `bellwether node` command line of member i.
    fn command(&self, i: usize) -> Result<Command> {
        let layout = &self.layout;
        let peers: Vec<String> = (1..=layout.nodes)
            .map(|j| format!("{j}={}", layout.peer_address(j)))
            .collect();
        let https: Vec<String> = (1..=layout.nodes)
            .map(|j| format!("{j}={}", layout.http_address(j)))
            .collect();
        let clients: Vec<String> = (1..=layout.nodes)
            .map(|j| format!("{j}={}", layout.client_address(j)))
            .collect();
        let mut command = Command::new(
            std::env::current_exe().context("cannot find this executable to start nodes")?,
        );
        command
            .args([
                "node",
                "--id",
                &i.to_string(),
                "--cluster",
                "bench-failover",
            ])
            .args(["--peers", &peers.join(","), "--peer-http", &https.join(",")])
            .args(["--http-listen", &layout.http_address(i).to_string()])
            .args(["--client-listen", &layout.client_address(i).to_string()])
            .args(["--peer-client", &clients.join(",")])
            .arg("--data-dir")
            .arg(layout.dir.join(format!("n{i}")))
            .args(["--heartbeat-ms", &layout.heartbeat_ms.to_string()])
            .args(["--election-ms", &layout.election_ms.to_string()])
            .args(&self.extra_args)
            .env("BELLWETHER_LOG", "info");
        Ok(command)
    }

    /// A member that says it leads, if one answers in time (under load the
    /// members' commit indexes rarely match, so this does not wait for
    /// [`Contender::agreed_leader`]'s full agreement).
    pub fn claimed_leader(&self) -> Option<usize> {
        (1..=self.layout.nodes).find(|i| self.status(*i).is_some_and(|s| s.role == Role::Leader))
    }

    /// Member i's `/status`, if it answers in time.
    fn status(&self, i: usize) -> Option<NodeStatus> {
        let body = http_get::get(self.layout.http_address(i), "/status", POLL_TIMEOUT).ok()?;
        serde_json::from_str(&body).ok()
    }
}

impl Contender for ProcessCluster {
    fn system(&self) -> String {
        format!("bellwether {}", env!("CARGO_PKG_VERSION"))
    }

    fn members(&self) -> &[Member] {
        &self.members
    }

    fn members_mut(&mut self) -> &mut [Member] {
        &mut self.members
    }

    fn peer_ip(&self, i: usize) -> Ipv4Addr {
        self.layout.peer_ip(i)
    }

    /// Every member answers, follows the same leader in the same term and
    /// has its commit index; the leader has committed in its term.
    fn agreed_leader(&mut self) -> Option<Leadership> {
        let statuses: Vec<NodeStatus> = (1..=self.layout.nodes)
            .map(|i| self.status(i))
            .collect::<Option<_>>()?;
        let leader = statuses
            .iter()
            .find(|s| s.role == Role::Leader && s.committed_in_term)?;
        let agreed = statuses.iter().all(|s| {
            s.leader == Some(leader.id) && s.term == leader.term && s.commit == leader.commit
        });
        let member = usize::try_from(leader.id.0).ok()?;
        (agreed && (1..=self.layout.nodes).contains(&member)).then_some(Leadership {
            member,
            term: leader.term,
            commit: leader.commit,
        })
    }

    /// A survivor that is leader in a term above the old one and has
    /// committed in it (`committed_in_term`: at least its own no-op).
    fn new_leader(&mut self, survivors: &[usize], old: &Leadership) -> Option<usize> {
        survivors.iter().copied().find(|i| {
            self.status(*i)
                .is_some_and(|s| s.role == Role::Leader && s.committed_in_term && s.term > old.term)
        })
    }

    fn client_endpoints(&self) -> Vec<String> {
        (1..=self.layout.nodes)
            .map(|i| self.layout.client_address(i).to_string())
            .collect()
    }

    fn restart(&mut self, i: usize) -> Result<()> {
        let command = self.command(i)?;
        self.members[i - 1].respawn(command)
    }
}

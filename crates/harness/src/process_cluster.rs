//! The bellwether side of the benchmarks: [`ProcessCluster`] is a cluster
//! of `bellwether node` processes ([`Member`]s), each with
//! its peer listener on its own loopback IP `127.0.<net>.<i>` so that
//! firewall rules on that IP cut exactly that member off. The peer transport
//! binds outbound connections to the same IP (see
//! `bellwether_transport`), so `ip saddr`/`ip daddr` rules catch
//! both directions.

use crate::contender::{Contender, Leadership};
use crate::member_process::Member;
use anyhow::{Context, Result};
use bellwether_cli_common::http_get;
use bellwether_core::Role;
use bellwether_server::NodeStatus;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Longest wait for one `/status` answer while polling. Short, so that a
/// survivor that hangs does not stall the poll of the others for long.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(100);
/// Largest cluster the benchmark starts: one loopback IP per member, and
/// enough for any realistic failover measurement.
pub const MEMBERS_MAX: usize = 9;
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

    /// Member i's peer listening address.
    pub fn peer_address(&self, i: usize) -> String {
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
    /// Added to one member's command line: member i's are
    /// `member_args[i - 1]` (empty when none were given).
    member_args: Vec<Vec<String>>,
    /// Where the others dial member i: `peer_dial[i - 1]`, its own peer
    /// address unless a relay stands in front of it.
    peer_dial: Vec<String>,
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
        ProcessCluster::start_with_member_args(layout, extra_args, |_| Vec::new())
    }

    /// [`ProcessCluster::start_with_args`], with `member_args(i)` on member
    /// i's command line alone (an address of its own, say).
    pub fn start_with_member_args(
        layout: ClusterLayout,
        extra_args: Vec<String>,
        member_args: impl Fn(usize) -> Vec<String>,
    ) -> Result<ProcessCluster> {
        let member_args = (1..=layout.nodes).map(member_args).collect();
        let peer_dial = (1..=layout.nodes).map(|i| layout.peer_address(i)).collect();
        ProcessCluster::spawn_all(ProcessCluster {
            layout,
            members: Vec::new(),
            extra_args,
            member_args,
            peer_dial,
        })
    }

    /// [`ProcessCluster::start_with_args`], where the others reach member
    /// i at `dial(i)` (a relay that forwards to its own peer address)
    /// instead of at its peer address.
    pub fn start_behind_relays(
        layout: ClusterLayout,
        extra_args: Vec<String>,
        dial: impl Fn(usize) -> SocketAddr,
    ) -> Result<ProcessCluster> {
        let peer_dial = (1..=layout.nodes).map(|i| dial(i).to_string()).collect();
        ProcessCluster::spawn_all(ProcessCluster {
            member_args: vec![Vec::new(); layout.nodes],
            layout,
            members: Vec::new(),
            extra_args,
            peer_dial,
        })
    }

    fn spawn_all(mut cluster: ProcessCluster) -> Result<ProcessCluster> {
        assert!((1..=MEMBERS_MAX).contains(&cluster.layout.nodes));
        assert!(
            cluster.layout.base_port as usize + 200 + cluster.layout.nodes <= u16::MAX as usize
        );
        std::fs::create_dir_all(&cluster.layout.dir)
            .with_context(|| format!("cannot create {}", cluster.layout.dir.display()))?;
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
            .map(|j| format!("{j}={}", self.peer_dial[j - 1]))
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
            .arg(self.data_dir(i))
            .args(["--heartbeat-ms", &layout.heartbeat_ms.to_string()])
            .args(["--election-ms", &layout.election_ms.to_string()])
            .args(&self.extra_args)
            .args(&self.member_args[i - 1]);
        if self.peer_dial[i - 1] != layout.peer_address(i) {
            // A relay stands where the others dial this member.
            command.args(["--peer-listen", &layout.peer_address(i)]);
        }
        command.env("BELLWETHER_LOG", "info");
        Ok(command)
    }

    /// A member that says it leads, if one answers in time (under load the
    /// members' commit indexes rarely match, so this does not wait for
    /// [`Contender::agreed_leader`]'s full agreement).
    pub fn claimed_leader(&self) -> Option<usize> {
        (1..=self.layout.nodes).find(|i| self.status(*i).is_some_and(|s| s.role == Role::Leader))
    }

    /// Member i's data directory.
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.layout.dir.join(format!("n{i}"))
    }

    /// Whether member i is repairing a log that lost data (its `/status`
    /// says so); `None` when it does not answer in time.
    pub fn repairing(&self, i: usize) -> Option<bool> {
        self.status(i).map(|s| s.repairing)
    }

    /// Member i's `/status`, if it answers in time.
    pub fn status(&self, i: usize) -> Option<NodeStatus> {
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

//! A real etcd cluster as the yardstick of `bellwether bench failover
//! --compare-etcd`: one `etcd` process per member (Debian's `etcd-server`,
//! 3.4), each listening for clients on `127.0.<net>.<i>:2379` and for peers
//! on `127.0.<net>.<i>:2380`, with the same heartbeat and election timeout
//! as the bellwether cluster.
//!
//! Leadership is read from each member's gRPC-gateway JSON endpoint,
//! `POST /v3/maintenance/status` (etcd 3.4 serves it under `/v3/` and the
//! deprecated `/v3beta/`; the first that answers is used). It reports the
//! member's id (`header.member_id`), the leader it knows (`leader`), its
//! term (`raftTerm`) and its commit index (`raftIndex`).
//!
//! Unlike bellwether's transport, etcd does not bind its outbound peer
//! connections to its own IP: they leave from 127.0.0.1, so rules on the
//! leader's IP alone would still let the connections *it* dialed carry
//! traffic. When the benchmark runs as root, each member therefore runs
//! under its own unprivileged uid and the partition also drops every packet
//! of the leader's sockets (`meta skuid`).

use crate::contender::{Contender, Leadership};
use crate::member_process::Member;
use crate::process_cluster::{MEMBERS_MAX, POLL_TIMEOUT};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// etcd's default client port, on each member's own IP.
const CLIENT_PORT: u16 = 2379;
/// etcd's default peer port, on each member's own IP.
const PEER_PORT: u16 = 2380;
/// With TLS, the plain-HTTP client port each member also listens on, on
/// its own IP, for the status polls.
const PLAIN_CLIENT_PORT: u16 = 2382;
/// Gateway prefixes tried, in order.
const GATEWAY_PREFIXES: [&str; 2] = ["/v3", "/v3beta"];
/// Member i runs as uid `UID_BASE + net * 10 + i` when we are root: below
/// 65534 (nobody) for every net, and distinct per cluster and member.
const UID_BASE: u32 = 61_000;
/// Longest `apt-get update` or `apt-get install`.
const APT_TIME_MAX: Duration = Duration::from_secs(600);

/// Where the members live and how they are tuned.
#[derive(Clone, Debug)]
pub struct EtcdLayout {
    /// Holds `m<i>/` (data, owned by the member's uid) and `m<i>.log`.
    pub dir: PathBuf,
    /// Third octet of the members' IPs.
    pub net: u8,
    /// Number of members.
    pub nodes: usize,
    /// `--heartbeat-interval`, ms.
    pub heartbeat_ms: u64,
    /// `--election-timeout`, ms.
    pub election_ms: u64,
}

impl EtcdLayout {
    fn ip(&self, i: usize) -> Ipv4Addr {
        assert!(
            (1..=self.nodes).contains(&i),
            "member {i} of {}",
            self.nodes
        );
        Ipv4Addr::new(127, 0, self.net, i as u8)
    }
}

/// What one member reports about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EtcdStatus {
    /// `header.member_id`.
    member_id: u64,
    /// `leader`; 0 when it knows none.
    leader: u64,
    /// `raftTerm`.
    term: u64,
    /// `raftIndex`: the member's commit index.
    index: u64,
}

/// A running etcd cluster.
pub struct EtcdCluster {
    /// Addresses, directories and timing.
    layout: EtcdLayout,
    /// `etcd --version`, e.g. `3.4.23`.
    version: String,
    /// Fresh per cluster, so these members never join another cluster.
    token: String,
    /// Uid of member 1 (member i has `+ i - 1`), when members run
    /// unprivileged so the partition can match their sockets.
    uid_first: Option<u32>,
    /// Gateway prefix that answered (`/v3` on 3.4), once known.
    gateway: Option<&'static str>,
    /// etcd member id → member number, learned from the answers.
    numbers: BTreeMap<u64, usize>,
    /// Member i is `members[i - 1]`.
    members: Vec<Member>,
    /// TLS on the client and peer ports, if set.
    tls: Option<EtcdTls>,
    /// Flags every member gets besides the cluster's own.
    extra_args: Vec<String>,
}

/// The PEM files of a TLS etcd cluster: one certificate every member
/// serves clients with and one it uses with peers (each names every
/// member's IP), each with the CA that signs the other side's: clients'
/// and peers' CAs differ, so no client certificate passes as a member.
#[derive(Clone, Debug)]
pub struct EtcdTls {
    /// The members' client-port certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// The CA of client certificates.
    pub ca: PathBuf,
    /// The members' peer certificate.
    pub peer_cert: PathBuf,
    /// Its key.
    pub peer_key: PathBuf,
    /// The CA of peer certificates.
    pub peer_ca: PathBuf,
}

/// The installed etcd's version; installs Debian's `etcd-server` and
/// `etcd-client` with apt-get when `etcd` is missing (logs in `log_dir`).
pub fn ensure_installed(log_dir: &Path) -> Result<String> {
    if let Some(version) = installed_version() {
        return Ok(version);
    }
    let log = log_dir.join("apt-get.log");
    for args in [
        &["update"][..],
        &["install", "-y", "etcd-server", "etcd-client"][..],
    ] {
        let mut command = Command::new("apt-get");
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        let mut apt = Member::spawn(command, log.clone()).context(
            "etcd is missing and apt-get cannot run; install etcd 3.4 (Debian: etcd-server)",
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
    installed_version().with_context(|| {
        format!(
            "etcd is still missing after apt-get install; read {}",
            log.display()
        )
    })
}

fn installed_version() -> Option<String> {
    let output = Command::new("etcd").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().find(|l| l.starts_with("etcd Version:"))?;
    Some(line.trim_start_matches("etcd Version:").trim().to_string())
}

/// The effective uid of this process, from `/proc/self/status`.
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

impl EtcdCluster {
    /// Starts every member of a new cluster; waits for nothing.
    pub fn start(layout: EtcdLayout, version: String) -> Result<EtcdCluster> {
        EtcdCluster::start_with_tls(layout, version, None)
    }

    /// [`EtcdCluster::start`], every member also given `extra_args`.
    pub fn start_with_args(
        layout: EtcdLayout,
        version: String,
        extra_args: Vec<String>,
    ) -> Result<EtcdCluster> {
        EtcdCluster::start_full(layout, version, None, extra_args)
    }

    /// [`EtcdCluster::start`], with TLS and client certificates required
    /// on the client and peer ports when `tls` is set. Status polls then
    /// go to a second, plain client port.
    pub fn start_with_tls(
        layout: EtcdLayout,
        version: String,
        tls: Option<EtcdTls>,
    ) -> Result<EtcdCluster> {
        EtcdCluster::start_full(layout, version, tls, Vec::new())
    }

    /// Starts the members with TLS if `tls` is set and `extra_args` on
    /// each.
    fn start_full(
        layout: EtcdLayout,
        version: String,
        tls: Option<EtcdTls>,
        extra_args: Vec<String>,
    ) -> Result<EtcdCluster> {
        assert!((1..=MEMBERS_MAX).contains(&layout.nodes));
        std::fs::create_dir_all(&layout.dir)
            .with_context(|| format!("cannot create {}", layout.dir.display()))?;
        let unique = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let uid_first =
            (effective_uid() == Some(0)).then(|| UID_BASE + u32::from(layout.net) * 10 + 1);
        let mut cluster = EtcdCluster {
            token: format!("bwbench-{}-{unique}", std::process::id()),
            layout,
            version,
            uid_first,
            gateway: None,
            numbers: BTreeMap::new(),
            members: Vec::new(),
            tls,
            extra_args,
        };
        for i in 1..=cluster.layout.nodes {
            let data = cluster.data_dir(i);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&data)
                .with_context(|| format!("cannot create {}", data.display()))?;
            if let Some(uid) = cluster.uid(i) {
                std::os::unix::fs::chown(&data, Some(uid), Some(uid))
                    .with_context(|| format!("cannot chown {}", data.display()))?;
            }
            let member = Member::spawn(
                cluster.command(i),
                cluster.layout.dir.join(format!("m{i}.log")),
            )?;
            cluster.members.push(member);
        }
        Ok(cluster)
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.layout.dir.join(format!("m{i}"))
    }

    fn uid(&self, i: usize) -> Option<u32> {
        self.uid_first.map(|first| first + i as u32 - 1)
    }

    /// The `etcd` command line of member i (the same on restart: with a
    /// data directory present, etcd ignores the `--initial-*` flags).
    fn command(&self, i: usize) -> Command {
        let layout = &self.layout;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let cluster: Vec<String> = (1..=layout.nodes)
            .map(|j| format!("m{j}={scheme}://{}:{PEER_PORT}", layout.ip(j)))
            .collect();
        let client = format!("{scheme}://{}:{CLIENT_PORT}", layout.ip(i));
        let peer = format!("{scheme}://{}:{PEER_PORT}", layout.ip(i));
        let listen = match &self.tls {
            None => client.clone(),
            Some(_) => format!("{client},http://{}:{PLAIN_CLIENT_PORT}", layout.ip(i)),
        };
        let mut command = Command::new("etcd");
        command
            .args(["--name", &format!("m{i}")])
            .arg("--data-dir")
            .arg(self.data_dir(i))
            .args([
                "--listen-client-urls",
                &listen,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &cluster.join(",")])
            .args([
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                &self.token,
            ])
            .args(["--heartbeat-interval", &layout.heartbeat_ms.to_string()])
            .args(["--election-timeout", &layout.election_ms.to_string()])
            .args(&self.extra_args)
            .current_dir(&layout.dir);
        if let Some(tls) = &self.tls {
            for (flag, path) in [
                ("--cert-file", &tls.cert),
                ("--key-file", &tls.key),
                ("--trusted-ca-file", &tls.ca),
                ("--peer-cert-file", &tls.peer_cert),
                ("--peer-key-file", &tls.peer_key),
                ("--peer-trusted-ca-file", &tls.peer_ca),
            ] {
                command.arg(flag).arg(path);
            }
            command.args(["--client-cert-auth", "--peer-client-cert-auth"]);
        }
        if let Some(uid) = self.uid(i) {
            command.uid(uid).gid(uid);
        }
        command
    }

    /// Member i's status, if it answers in time. Learns the gateway prefix
    /// and the member's id on the way.
    fn status(&mut self, i: usize) -> Option<EtcdStatus> {
        let port = if self.tls.is_some() {
            PLAIN_CLIENT_PORT
        } else {
            CLIENT_PORT
        };
        let address = SocketAddr::from((self.layout.ip(i), port));
        let known = self.gateway;
        let prefixes: &[&'static str] = if known.is_some() {
            known.as_slice()
        } else {
            &GATEWAY_PREFIXES
        };
        for prefix in prefixes.iter().copied() {
            let Some(status) = bellwether_cli_common::http_get::post_json(
                address,
                &format!("{prefix}/maintenance/status"),
                "{}",
                POLL_TIMEOUT,
            )
            .ok()
            .and_then(|b| parse_status(&b)) else {
                continue;
            };
            self.gateway = Some(prefix);
            self.numbers.insert(status.member_id, i);
            return Some(status);
        }
        None
    }
}

impl Contender for EtcdCluster {
    fn client_endpoints(&self) -> Vec<String> {
        (1..=self.layout.nodes)
            .map(|i| format!("{}:{CLIENT_PORT}", self.layout.ip(i)))
            .collect()
    }

    fn system(&self) -> String {
        format!("etcd {}", self.version)
    }

    fn members(&self) -> &[Member] {
        &self.members
    }

    fn members_mut(&mut self) -> &mut [Member] {
        &mut self.members
    }

    fn peer_ip(&self, i: usize) -> Ipv4Addr {
        self.layout.ip(i)
    }

    fn socket_uid(&self, i: usize) -> Option<u32> {
        self.uid(i)
    }

    /// Every member answers, knows the same leader, and has the same term
    /// and commit index (so a restarted member has caught up).
    fn agreed_leader(&mut self) -> Option<Leadership> {
        let statuses: Vec<EtcdStatus> = (1..=self.layout.nodes)
            .map(|i| self.status(i))
            .collect::<Option<_>>()?;
        let first = statuses[0];
        let agreed = statuses
            .iter()
            .all(|s| s.leader == first.leader && s.term == first.term && s.index == first.index);
        let member = *self.numbers.get(&first.leader)?;
        (agreed && first.leader != 0).then_some(Leadership {
            member,
            term: first.term,
            commit: first.index,
        })
    }

    /// A survivor that names itself leader in a term above the old one and
    /// whose commit index passed the old one: etcd's leader appends an
    /// empty entry in its new term, and a leader commits only entries of
    /// its own term, so the index moving on means it committed in the term.
    fn new_leader(&mut self, survivors: &[usize], old: &Leadership) -> Option<usize> {
        survivors.iter().copied().find(|i| {
            self.status(*i).is_some_and(|s| {
                s.leader == s.member_id && s.term > old.term && s.index > old.commit
            })
        })
    }

    fn restart(&mut self, i: usize) -> Result<()> {
        let command = self.command(i);
        self.members[i - 1].respawn(command)
    }
}

/// Reads a status answer; etcd encodes 64-bit numbers as JSON strings.
fn parse_status(body: &str) -> Option<EtcdStatus> {
    let value: Value = serde_json::from_str(body).ok()?;
    let number = |v: &Value| {
        v.as_str()
            .and_then(|s| s.parse().ok())
            .or_else(|| v.as_u64())
    };
    let header = &value["header"];
    Some(EtcdStatus {
        member_id: number(&header["member_id"]).or_else(|| number(&header["memberId"]))?,
        // Zero values are left out of the JSON.
        leader: number(&value["leader"]).unwrap_or(0),
        term: number(&value["raftTerm"]).or_else(|| number(&value["raft_term"]))?,
        index: number(&value["raftIndex"])
            .or_else(|| number(&value["raft_index"]))
            .unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_etcd_3_4_status_answer() {
        let body = r#"{"header":{"cluster_id":"14513444767672244936","member_id":"2958454246651384218","revision":"1","raft_term":"2"},"version":"3.4.23","dbSize":"32768","leader":"2958454246651384218","raftIndex":"8","raftTerm":"2","raftAppliedIndex":"8","dbSizeInUse":"16384"}"#;
        let status = parse_status(body).unwrap();
        assert_eq!(
            status,
            EtcdStatus {
                member_id: 2958454246651384218,
                leader: 2958454246651384218,
                term: 2,
                index: 8
            }
        );
    }

    #[test]
    fn a_member_without_a_leader_reports_leader_zero() {
        let body = r#"{"header":{"member_id":"7"},"raftTerm":"3"}"#;
        assert_eq!(parse_status(body).unwrap().leader, 0);
    }
}

//! What a cluster under test offers to the procedures that drive it (the
//! failover and KV benchmarks, `up`): its member processes, where to cut
//! them off, and a poll for the leader they agree on. Implemented by
//! [`crate::process_cluster::ProcessCluster`] (bellwether) and
//! [`crate::etcd_cluster::EtcdCluster`] (a real etcd), so that the two are
//! measured by the same code. This module imports from no benchmark.

use crate::member_process::Member;
use anyhow::Result;
use std::net::Ipv4Addr;

/// A leader every member agrees on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leadership {
    /// Member number (1-based).
    pub member: usize,
    /// Its term.
    pub term: u64,
    /// Its commit index.
    pub commit: u64,
}

/// What the failover procedure needs from a cluster under test. Members are
/// numbered from 1; member i is `members()[i - 1]`.
pub trait Contender {
    /// Name and version, for the report.
    fn system(&self) -> String;
    /// Every member's process.
    fn members(&self) -> &[Member];
    /// Every member's process, to signal, reap and restart.
    fn members_mut(&mut self) -> &mut [Member];
    /// Member i's peer IP: what the partition rules match.
    fn peer_ip(&self, i: usize) -> Ipv4Addr;
    /// Uid of member i's sockets when it runs under its own uid, so the
    /// partition also drops packets leaving from other addresses.
    fn socket_uid(&self, _i: usize) -> Option<u32> {
        None
    }
    /// One poll of every member: the leader they all follow, if they agree
    /// and have its commit index.
    fn agreed_leader(&mut self) -> Option<Leadership>;
    /// One poll of `survivors`: the first that leads, in a term above
    /// `old.term`, with a commit in that term.
    fn new_leader(&mut self, survivors: &[usize], old: &Leadership) -> Option<usize>;
    /// Starts member i again on its data; its previous process was reaped.
    fn restart(&mut self, i: usize) -> Result<()>;
    /// The etcd v3 API endpoints (host:port) of every member.
    fn client_endpoints(&self) -> Vec<String>;
}

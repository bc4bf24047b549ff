//! Who this node's members are and where they listen, as membership
//! changes at run time.
//!
//! Two sources, combined: the configuration the node started with (the
//! `peers`, `peer_client` and `peer_http` lists, which name the members the
//! cluster was created with) and the replicated member directory
//! (`bellwether_kv::member`), which records every member added later and
//! every update of an address. The directory wins where both know a
//! member. Raft's configuration, in the core, says which of them vote.
//!
//! The leader also steps Raft's configuration toward the directory, one
//! change at a time ([`Roster::next_change`]): a member recorded as a
//! learner or voter is added as a learner; a voter-to-be is promoted once
//! the core says it has caught up; a removed one is removed.

use bellwether_core::raft::{ClusterConfig, MembershipChange, RaftNode};
use bellwether_core::NodeId;
use bellwether_kv::{MemberIntent, MemberRecord};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The members' addresses and the directory, as this node knows them.
#[derive(Clone, Debug, Default)]
pub struct Roster {
    peers: BTreeMap<NodeId, SocketAddr>,
    clients: BTreeMap<NodeId, SocketAddr>,
    http: BTreeMap<NodeId, SocketAddr>,
    /// The directory's records by member id (a record keeps the id as a
    /// plain number, as the replicated state machine stores it).
    directory: BTreeMap<NodeId, MemberRecord>,
    /// The machine's directory version last read.
    pub directory_version: u64,
}

/// `http://IP:port` (or `IP:port`) as an address; `None` otherwise. Host
/// names are refused rather than resolved: a lookup would block the event
/// loop that reads addresses, and could fail once and leave a member
/// unreachable.
pub fn url_address(url: &str) -> Option<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    rest.trim_end_matches('/').parse().ok()
}

impl Roster {
    /// A roster of the configured members.
    pub fn new(
        peers: &BTreeMap<NodeId, SocketAddr>,
        clients: &BTreeMap<NodeId, SocketAddr>,
        http: &BTreeMap<NodeId, SocketAddr>,
    ) -> Roster {
        Roster {
            peers: peers.clone(),
            clients: clients.clone(),
            http: http.clone(),
            directory: BTreeMap::new(),
            directory_version: 0,
        }
    }

    /// Replaces the directory.
    pub fn set_directory(&mut self, records: Vec<MemberRecord>, version: u64) {
        self.directory = records.into_iter().map(|r| (NodeId(r.id), r)).collect();
        self.directory_version = version;
    }

    /// Where `id` takes peer connections.
    pub fn peer_address(&self, id: NodeId) -> Option<SocketAddr> {
        self.directory
            .get(&id)
            .and_then(|r| r.peer_urls.iter().find_map(|u| url_address(u)))
            .or_else(|| self.peers.get(&id).copied())
    }

    /// Where `id` serves the etcd API.
    pub fn client_address(&self, id: NodeId) -> Option<SocketAddr> {
        self.directory
            .get(&id)
            .and_then(|r| r.client_urls.iter().find_map(|u| url_address(u)))
            .or_else(|| self.clients.get(&id).copied())
    }

    /// Where `id` serves HTTP, if configured.
    pub fn http_address(&self, id: NodeId) -> Option<SocketAddr> {
        self.http.get(&id).copied()
    }

    /// True once `id` was removed for good.
    pub fn is_removed(&self, id: NodeId) -> bool {
        self.directory
            .get(&id)
            .is_some_and(|r| r.intent == MemberIntent::Removed)
    }

    /// Every member the directory records as removed for good.
    pub fn removed(&self) -> Vec<NodeId> {
        self.directory
            .iter()
            .filter(|(_, r)| r.intent == MemberIntent::Removed)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The ids whose peer connections this node accepts: every member of
    /// Raft's configuration (one being removed still votes until the
    /// removal is in the log) and every member recorded but not yet added
    /// (a joining member dials before the leader adds it).
    pub fn accepted(&self, cluster: &ClusterConfig) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = cluster
            .members()
            .chain(
                self.directory
                    .iter()
                    .filter(|(_, r)| r.intent != MemberIntent::Removed)
                    .map(|(id, _)| *id),
            )
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The next step a leader takes toward the directory, if any: removals
    /// first (they shrink what must be replicated), then additions, then
    /// promotions. The core refuses a step while the previous one is not
    /// committed or while a learner is behind; the caller retries later.
    pub fn next_change(&self, raft: &RaftNode) -> Option<MembershipChange> {
        let cluster = raft.cluster();
        let in_cluster = |id: NodeId| cluster.members().any(|m| m == id);
        // Every record's id and intent, in id order.
        let records = || self.directory.iter().map(|(id, r)| (*id, r.intent));
        // Never the last voter (the core refuses it, and retrying it first
        // on every tick would hold every other change back).
        let removable = |id: NodeId| {
            in_cluster(id) && !(cluster.voters.len() == 1 && cluster.voters.contains(&id))
        };
        if let Some((id, _)) =
            records().find(|(id, intent)| *intent == MemberIntent::Removed && removable(*id))
        {
            // The core keeps a voter in every configuration, so one other
            // than `id` remains.
            assert!(
                in_cluster(id) && cluster.voters.iter().any(|voter| *voter != id),
                "a removal names a member and never the last voter"
            );
            return Some(MembershipChange::Remove(id));
        }
        if let Some((id, _)) =
            records().find(|(id, intent)| *intent != MemberIntent::Removed && !in_cluster(*id))
        {
            return Some(MembershipChange::AddLearner(id));
        }
        let promotion = records()
            .find(|(id, intent)| *intent == MemberIntent::Voter && cluster.learners.contains(id))
            .map(|(id, _)| id);
        assert!(
            promotion.is_none_or(|id| !cluster.voters.contains(&id)),
            "only a learner is promoted"
        );
        promotion.map(MembershipChange::PromoteLearner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u64, url: &str, intent: MemberIntent) -> MemberRecord {
        MemberRecord {
            name: String::new(),
            id,
            peer_urls: vec![url.into()],
            client_urls: vec![],
            zookeeper_urls: vec![],
            intent,
        }
    }

    #[test]
    fn the_directory_overrides_the_configuration_and_removed_members_are_refused() {
        let peers: BTreeMap<NodeId, SocketAddr> = [
            (NodeId(1), "127.0.0.1:7001".parse().unwrap()),
            (NodeId(2), "127.0.0.1:7002".parse().unwrap()),
        ]
        .into();
        let mut roster = Roster::new(&peers, &BTreeMap::new(), &BTreeMap::new());
        roster.set_directory(
            vec![
                record(2, "http://127.0.0.1:7102", MemberIntent::Removed),
                record(3, "http://127.0.0.1:7003", MemberIntent::Learner),
                record(1, "http://127.0.0.1:7101/", MemberIntent::Voter),
            ],
            5,
        );
        assert_eq!(
            roster.peer_address(NodeId(1)),
            Some("127.0.0.1:7101".parse().unwrap())
        );
        assert_eq!(
            roster.peer_address(NodeId(3)),
            Some("127.0.0.1:7003".parse().unwrap())
        );
        let cluster = ClusterConfig::voters([NodeId(1), NodeId(2)]);
        // n2 is being removed but still votes: still accepted.
        assert_eq!(
            roster.accepted(&cluster),
            vec![NodeId(1), NodeId(2), NodeId(3)]
        );
        assert_eq!(
            roster.accepted(&ClusterConfig::voters([NodeId(1)])),
            vec![NodeId(1), NodeId(3)]
        );
        assert_eq!(url_address("not a url"), None);
        assert_eq!(url_address("http://localhost:2380"), None);
    }
}

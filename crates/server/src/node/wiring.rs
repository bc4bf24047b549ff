//! The peer connections, set up again whenever Raft's configuration or
//! the member directory changes.

use super::Node;
use bellwether_core::NodeId;
use bellwether_member::Roster;
use bellwether_transport as transport;
use std::collections::BTreeMap;

impl Node {
    /// Sets the peer connections up again when Raft's configuration or the
    /// member directory changed: a dialer for every member with a known
    /// address (restarted if the address changed), none for members that
    /// left, and the transport told whom to accept.
    pub(super) fn rewire(&mut self) {
        self.member.refresh_roster();
        let version = self.member.roster().directory_version;
        let unchanged = self
            .wired
            .as_ref()
            .is_some_and(|(wired, v)| wired == self.member.raft().cluster() && *v == version);
        let Some((identity, events_tx)) = &self.transport else {
            return;
        };
        if unchanged {
            return;
        }
        let cluster = self.member.raft().cluster().clone();
        let me = self.config.id;
        let was_member = self
            .wired
            .as_ref()
            .is_some_and(|(wired, _)| wired.members().any(|m| m == me));
        if was_member && !cluster.members().any(|m| m == me) {
            tracing::warn!(
                "this member was removed from the cluster: it takes no part any more; stop it"
            );
        }
        let roster: &Roster = self.member.roster();
        identity.members.set(numbers(roster.accepted(&cluster)));
        identity.members.set_removed(numbers(roster.removed()));
        let wanted: BTreeMap<NodeId, std::net::SocketAddr> = cluster
            .members()
            .filter(|member| *member != me)
            .filter_map(|member| Some((member, roster.peer_address(member)?)))
            .collect();
        self.wired = Some((cluster, version));
        let dialed = &self.dialed;
        self.outbound
            .retain(|id, _| wanted.contains_key(id) && wanted.get(id) == dialed.get(id));
        self.dialed.retain(|id, _| self.outbound.contains_key(id));
        for (id, address) in wanted {
            if self.outbound.contains_key(&id) {
                continue;
            }
            tracing::info!(peer = id.0, %address, "connecting to member");
            let queue = transport::spawn_outbound(
                identity.clone(),
                id.0,
                address,
                events_tx.clone(),
                self.metrics.clone(),
            );
            self.outbound.insert(id, queue);
            self.dialed.insert(id, address);
        }
    }
}

/// Member ids as the transport takes them: plain numbers.
pub(super) fn numbers(ids: impl IntoIterator<Item = NodeId>) -> Vec<u64> {
    ids.into_iter().map(|id| id.0).collect()
}

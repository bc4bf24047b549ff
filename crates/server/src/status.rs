//! What a node reports about itself: the snapshot behind `/status`,
//! `bellwether status` and the dashboard.

use bellwether_core::{NodeId, Role};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most leadership changes a node remembers for the dashboard's timeline.
pub const LEADERSHIP_HISTORY_MAX: usize = 256;

/// One change of leader as seen by this node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeadershipChange {
    /// Wall-clock time of the observation, in ms since the Unix epoch.
    pub at_unix_ms: u64,
    /// Term of the new leader (or the term in which the leader was lost).
    pub term: u64,
    /// The new leader, or `None` when the node stopped knowing one
    /// (`null` in JSON).
    #[serde(default, with = "crate::id_serde::option")]
    pub leader: Option<NodeId>,
}

/// Another member, as this node knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// Member id.
    #[serde(with = "crate::id_serde::one")]
    pub id: NodeId,
    /// Its peer address.
    pub peer_address: String,
    /// Its HTTP address (metrics, status, dashboard), if configured.
    pub http_address: Option<String>,
    /// Its etcd API address, if known.
    #[serde(default)]
    pub client_address: Option<String>,
    /// True while it only learns the log (no vote).
    #[serde(default)]
    pub learner: bool,
    /// Leader only: highest log index known to match.
    pub match_index: Option<u64>,
    /// Leader only: entries it is behind the leader's last index.
    pub lag: Option<u64>,
}

/// The etcd server version this member answers as, in etcd's plain
/// `X.Y.Z` form: etcd clients parse each part as a number (Patroni reads
/// `/version` and waits forever on anything else), so bellwether's own
/// name and version never go here.
pub const ETCD_VERSION: &str = "3.4.0";

/// bellwether's own version, reported where no etcd client looks: the
/// `bellwether` key of `/version`, `/status` and `bellwether --version`.
pub const BELLWETHER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A node's report about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// This node.
    #[serde(with = "crate::id_serde::one")]
    pub id: NodeId,
    /// Cluster name.
    pub cluster: String,
    /// The bellwether version this member runs.
    #[serde(default)]
    pub version: String,
    /// Address peers connect to.
    pub peer_address: String,
    /// Address of the HTTP endpoint.
    pub http_address: String,
    /// Its role; in JSON `follower`, `pre-candidate`, `candidate` or
    /// `leader`.
    #[serde(serialize_with = "role_as_text", deserialize_with = "role_from_text")]
    pub role: Role,
    /// Current term.
    pub term: u64,
    /// Leader it follows (itself when leading); `null` in JSON when none
    /// is known.
    #[serde(default, with = "crate::id_serde::option")]
    pub leader: Option<NodeId>,
    /// Commit index.
    pub commit: u64,
    /// Applied index.
    pub applied: u64,
    /// Last log index.
    pub last_index: u64,
    /// True when the commit index is in the current term: the leader of
    /// this term has committed (its no-op at least).
    pub committed_in_term: bool,
    /// Milliseconds since the process started.
    pub uptime_ms: u64,
    /// Milliseconds this node has led without interruption (0 otherwise).
    pub leader_uptime_ms: u64,
    /// True while this node only learns the log (no vote).
    #[serde(default)]
    pub learner: bool,
    /// True while this member repairs a log that lost entries it had
    /// acknowledged: it neither campaigns nor votes for a candidate behind
    /// what it had (`bellwether_core::raft::Repair`).
    #[serde(default)]
    pub repairing: bool,
    /// The adaptive detector's view of the leader's silence, when it is
    /// on (`bellwether_core::adaptive_detector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detector: Option<DetectorStatus>,
    /// True while this node is not in the cluster's configuration (it was
    /// removed, or has not been added yet).
    #[serde(default)]
    pub outside: bool,
    /// The other members of the cluster's configuration.
    pub members: Vec<MemberStatus>,
    /// Recent leadership changes seen here, oldest first.
    pub leadership: Vec<LeadershipChange>,
}

/// Writes a role as its name.
fn role_as_text<S: Serializer>(role: &Role, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(role.as_str())
}

/// Reads a role from its name, refusing any other text.
fn role_from_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Role, D::Error> {
    let name = String::deserialize(deserializer)?;
    Role::parse(&name).ok_or_else(|| serde::de::Error::custom(format!("{name:?} is not a role")))
}

impl NodeStatus {
    /// Ready: a leader is known and this node has applied everything it
    /// knows to be committed.
    pub fn is_ready(&self) -> bool {
        self.leader.is_some() && self.applied >= self.commit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leadership_change_is_written_with_a_plain_number_or_null() {
        let changes = [
            LeadershipChange {
                at_unix_ms: 5,
                term: 2,
                leader: Some(NodeId(3)),
            },
            LeadershipChange {
                at_unix_ms: 6,
                term: 3,
                leader: None,
            },
        ];
        let json = serde_json::to_string(&changes).unwrap();
        assert_eq!(
            json,
            r#"[{"at_unix_ms":5,"term":2,"leader":3},{"at_unix_ms":6,"term":3,"leader":null}]"#
        );
        assert_eq!(
            serde_json::from_str::<Vec<LeadershipChange>>(&json).unwrap(),
            changes
        );
        let without_leader: LeadershipChange =
            serde_json::from_str(r#"{"at_unix_ms":6,"term":3}"#).unwrap();
        assert_eq!(without_leader, changes[1]);
    }
}

/// What a member's adaptive detector has learned of its leader's messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetectorStatus {
    /// The silence, in ms, after which this member suspects its leader now
    /// (between the floor and the election timeout).
    pub threshold_ms: u64,
    /// The mean gap between the leader's messages, in ms, over the window.
    pub mean_gap_ms: u64,
    /// Gaps in the window.
    pub samples: usize,
    /// Times this member suspected its leader since it started.
    pub suspicions: u64,
    /// The longest gap between the leader's messages since this member
    /// started, in ms (tick-grained): how long a stall of the leader, the
    /// network or this member kept it from hearing its leader.
    #[serde(default)]
    pub longest_gap_ms: u64,
}

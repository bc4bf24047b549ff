//! The member directory: what the cluster has been told about its members
//! through etcd's `Cluster` service (MemberAdd, MemberUpdate, MemberPromote,
//! MemberRemove), kept as replicated state beside the keys.
//!
//! Raft's configuration (which ids vote, which only learn) lives in the
//! consensus core and changes one step at a time; it knows ids, not
//! addresses. The directory holds the rest: each added member's peer and
//! client URLs, and what the operator asked it to become. The leader steps
//! Raft's configuration toward the directory (add as a learner, promote
//! once caught up, remove), one committed change at a time, so a request
//! survives a change of leader: whoever leads next reads the same
//! directory. Members the cluster was started with have no record until an
//! operator updates or removes one.

/// What the operator asked a member to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberIntent {
    /// Receives the log, never votes (etcd's learner).
    Learner,
    /// Votes; a new one first catches up as a learner.
    Voter,
    /// Gone for good: its id is never used again.
    Removed,
}

impl MemberIntent {
    /// The byte a snapshot stores.
    pub(crate) fn number(self) -> u8 {
        match self {
            MemberIntent::Learner => 1,
            MemberIntent::Voter => 2,
            MemberIntent::Removed => 3,
        }
    }

    /// The intent a snapshot byte stands for.
    pub(crate) fn from_number(number: u8) -> Option<MemberIntent> {
        match number {
            1 => Some(MemberIntent::Learner),
            2 => Some(MemberIntent::Voter),
            3 => Some(MemberIntent::Removed),
            _ => None,
        }
    }
}

/// One member's record.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemberRecord {
    /// The member id.
    pub id: u64,
    /// Where its peers reach it (`http://host:port`).
    pub peer_urls: Vec<String>,
    /// Where clients reach it; empty until the member publishes them.
    pub client_urls: Vec<String>,
    /// The name it published (`bellwether node --name`); empty until it
    /// does, and for members of snapshots written before names were kept.
    pub name: String,
    /// Where it serves ZooKeeper's protocol (`host:port`); empty until it
    /// publishes it, and for members of snapshots written before these
    /// were kept.
    pub zookeeper_urls: Vec<String>,
    /// What it should be.
    pub intent: MemberIntent,
}

/// Why a directory change was refused. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemberError {
    /// The id names no member (or one removed already).
    #[error("etcdserver: member not found")]
    NotFound,
    /// The id was removed; removed ids never come back.
    #[error("etcdserver: ID removed")]
    Removed,
    /// Another member already listens on one of these peer URLs.
    #[error("etcdserver: Peer URLs already exists")]
    PeerUrlExists,
    /// Promotion of a member that is not a learner.
    #[error("etcdserver: can only promote a learner member")]
    NotLearner,
    /// The directory holds [`MEMBER_RECORDS_MAX`] records already.
    #[error("etcdserver: too many members")]
    TooMany,
    /// A request with no peer URL.
    #[error("etcdserver: member has no peer URLs")]
    NoPeerUrls,
}

/// Most records a directory holds (removed ones included): far more than
/// any cluster's members over its life, and a bound on a snapshot's size.
pub const MEMBER_RECORDS_MAX: usize = 4_096;

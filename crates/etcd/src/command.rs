//! Client writes as Raft log entries: a tag byte, then the protobuf of
//! etcd's request. The log therefore holds exactly what a client sent, in
//! etcd's own format.

use bellwether_api::etcdserverpb as pb;
use bellwether_zookeeper::codes::op as zk_op;
use bellwether_zookeeper::{ZkBatch, ZkEntry};
use prost::Message;

const PUT: u8 = 1;
const DELETE_RANGE: u8 = 2;
const TXN: u8 = 3;
const COMPACT: u8 = 4;
const LEASE_GRANT: u8 = 5;
const LEASE_REVOKE: u8 = 6;
const ALARM: u8 = 7;
const MEMBER_ADD: u8 = 8;
const MEMBER_UPDATE: u8 = 9;
const MEMBER_PROMOTE: u8 = 10;
const MEMBER_REMOVE: u8 = 11;
const AUTH: u8 = 12;
/// Wraps a client's write with the auth revision its permissions were
/// checked at and the user it was checked for: `[CHECKED, revision as 8
/// bytes little-endian, user length as 2, user, command...]`.
const CHECKED: u8 = 13;
/// A ZooKeeper request (`bellwether_zookeeper::ZkEntry`): the znode tree
/// lives in the same store and log as the etcd keyspace.
const ZOOKEEPER: u8 = 14;
/// Writes of one ZooKeeper session, applied in order, each on its own
/// (`bellwether_zookeeper::ZkBatch`).
const ZOOKEEPER_BATCH: u8 = 15;

// `decode_entry` tells a checked entry by its first byte, and `decode` a
// command by its tag: the tags are distinct and none is `CHECKED`.
const _: () = assert!(
    PUT > 0
        && PUT < DELETE_RANGE
        && DELETE_RANGE < TXN
        && TXN < COMPACT
        && COMPACT < LEASE_GRANT
        && LEASE_GRANT < LEASE_REVOKE
        && LEASE_REVOKE < ALARM
        && ALARM < MEMBER_ADD
        && MEMBER_ADD < MEMBER_UPDATE
        && MEMBER_UPDATE < MEMBER_PROMOTE
        && MEMBER_PROMOTE < MEMBER_REMOVE
        && MEMBER_REMOVE < AUTH
        && AUTH < CHECKED
        && CHECKED < ZOOKEEPER
        && ZOOKEEPER < ZOOKEEPER_BATCH,
    "command tags are distinct and none is CHECKED"
);

/// How a client's write was checked (see [`crate::permissions`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The auth revision of the check.
    pub auth_revision: u64,
    /// The caller; empty for none.
    pub user: String,
}

/// What an [`AuthChange`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum AuthOp {
    /// `Auth/AuthEnable`, with the token secret.
    Enable = 0,
    /// `Auth/AuthDisable`.
    Disable = 1,
    /// `Auth/UserAdd`, with the password hash.
    UserAdd = 2,
    /// `Auth/UserDelete`.
    UserDelete = 3,
    /// `Auth/UserChangePassword`, with the new hash.
    UserChangePassword = 4,
    /// `Auth/UserGrantRole`.
    UserGrantRole = 5,
    /// `Auth/UserRevokeRole`.
    UserRevokeRole = 6,
    /// `Auth/RoleAdd`.
    RoleAdd = 7,
    /// `Auth/RoleDelete`.
    RoleDelete = 8,
    /// `Auth/RoleGrantPermission`.
    RoleGrantPermission = 9,
    /// `Auth/RoleRevokePermission`.
    RoleRevokePermission = 10,
}

/// A change to users, roles or permissions (`bellwether_kv::AuthState`),
/// as the log holds it: passwords only as hashes, made by the member that
/// took the request (`credentials.rs`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthChange {
    /// What to do.
    #[prost(enumeration = "AuthOp", tag = "1")]
    pub op: i32,
    /// The user (user ops) or the role (role ops).
    #[prost(string, tag = "2")]
    pub name: String,
    /// The role granted to or revoked from a user.
    #[prost(string, tag = "3")]
    pub role: String,
    /// A password hash (add, change password; empty: no password).
    #[prost(bytes = "vec", tag = "4")]
    pub password_hash: Vec<u8>,
    /// A permission's kind (etcd's numbers).
    #[prost(int32, tag = "5")]
    pub perm_kind: i32,
    /// A permission's key.
    #[prost(bytes = "vec", tag = "6")]
    pub key: Vec<u8>,
    /// A permission's range end.
    #[prost(bytes = "vec", tag = "7")]
    pub range_end: Vec<u8>,
    /// The token secret (enable).
    #[prost(bytes = "vec", tag = "8")]
    pub secret: Vec<u8>,
}

/// A change to the member directory (`bellwether_kv::member`), as the log
/// holds it. The `Cluster` service fills in what the store cannot know by
/// itself, so that every member applies it alike: the lowest id a new
/// member may get and the peer URLs of the members the cluster started with.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemberChange {
    /// The member (for an add: the lowest id it may get).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// New peer URLs (none: keep).
    #[prost(string, repeated, tag = "2")]
    pub peer_urls: Vec<String>,
    /// New client URLs (none: keep).
    #[prost(string, repeated, tag = "3")]
    pub client_urls: Vec<String>,
    /// Add: as a learner. Update of a member without a record: it is one.
    #[prost(bool, tag = "4")]
    pub learner: bool,
    /// Add: peer URLs of members without a record, which it may not reuse.
    #[prost(string, repeated, tag = "5")]
    pub taken_peer_urls: Vec<String>,
    /// Remove: the cluster's configuration has this member.
    #[prost(bool, tag = "6")]
    pub known: bool,
    /// Update: the name the member publishes (empty: keep).
    #[prost(string, tag = "7")]
    pub name: String,
    /// Update: where the member serves ZooKeeper's protocol, `host:port`
    /// (none: keep).
    #[prost(string, repeated, tag = "8")]
    pub zookeeper_urls: Vec<String>,
}

/// What a lease grant counts for against the storage quota (etcd counts
/// leases too, so that a full store cannot be filled further with them).
const LEASE_GRANT_COST_BYTES: u64 = 64;

/// etcd's answer to a write that would take space while the NOSPACE alarm
/// is raised, or that would cross the storage quota.
pub const NO_SPACE: &str = "etcdserver: mvcc: database space exceeded";

/// etcd's answer to a write while the CORRUPT alarm is raised.
pub const CORRUPT: &str = "etcdserver: corrupt cluster";

/// A write to replicate.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// `KV/Put`.
    Put(pb::PutRequest),
    /// `KV/DeleteRange`.
    DeleteRange(pb::DeleteRangeRequest),
    /// `KV/Txn`.
    Txn(pb::TxnRequest),
    /// `KV/Compact`.
    Compact(pb::CompactionRequest),
    /// `Lease/LeaseGrant`, with the id already chosen (never 0).
    LeaseGrant(pb::LeaseGrantRequest),
    /// `Lease/LeaseRevoke`, from a client or from the leader's expiry.
    LeaseRevoke(pb::LeaseRevokeRequest),
    /// `Maintenance/Alarm`: get, raise or clear alarms.
    Alarm(pb::AlarmRequest),
    /// `Cluster/MemberAdd`.
    MemberAdd(MemberChange),
    /// `Cluster/MemberUpdate`, and a member publishing its client URLs.
    MemberUpdate(MemberChange),
    /// `Cluster/MemberPromote`.
    MemberPromote(MemberChange),
    /// `Cluster/MemberRemove`.
    MemberRemove(MemberChange),
    /// An `Auth` service change.
    Auth(AuthChange),
    /// A ZooKeeper write or session change.
    ZooKeeper(ZkEntry),
    /// ZooKeeper writes of one session, in the order it sent them.
    ZooKeeperBatch(ZkBatch),
}

impl Command {
    /// The log entry bytes.
    pub fn encode(&self) -> Vec<u8> {
        let (tag, body) = match self {
            Command::Put(r) => (PUT, r.encode_to_vec()),
            Command::DeleteRange(r) => (DELETE_RANGE, r.encode_to_vec()),
            Command::Txn(r) => (TXN, r.encode_to_vec()),
            Command::Compact(r) => (COMPACT, r.encode_to_vec()),
            Command::LeaseGrant(r) => (LEASE_GRANT, r.encode_to_vec()),
            Command::LeaseRevoke(r) => (LEASE_REVOKE, r.encode_to_vec()),
            Command::Alarm(r) => (ALARM, r.encode_to_vec()),
            Command::MemberAdd(r) => (MEMBER_ADD, r.encode_to_vec()),
            Command::MemberUpdate(r) => (MEMBER_UPDATE, r.encode_to_vec()),
            Command::MemberPromote(r) => (MEMBER_PROMOTE, r.encode_to_vec()),
            Command::MemberRemove(r) => (MEMBER_REMOVE, r.encode_to_vec()),
            Command::Auth(r) => (AUTH, r.encode_to_vec()),
            Command::ZooKeeper(r) => (ZOOKEEPER, r.encode_to_vec()),
            Command::ZooKeeperBatch(r) => (ZOOKEEPER_BATCH, r.encode_to_vec()),
        };
        let mut out = Vec::with_capacity(1 + body.len());
        out.push(tag);
        out.extend_from_slice(&body);
        out
    }

    /// Parses log entry bytes; `None` for bytes no client of ours wrote.
    pub fn decode(bytes: &[u8]) -> Option<Command> {
        let (tag, body) = bytes.split_first()?;
        Some(match *tag {
            PUT => Command::Put(pb::PutRequest::decode(body).ok()?),
            DELETE_RANGE => Command::DeleteRange(pb::DeleteRangeRequest::decode(body).ok()?),
            TXN => Command::Txn(pb::TxnRequest::decode(body).ok()?),
            COMPACT => Command::Compact(pb::CompactionRequest::decode(body).ok()?),
            LEASE_GRANT => Command::LeaseGrant(pb::LeaseGrantRequest::decode(body).ok()?),
            LEASE_REVOKE => Command::LeaseRevoke(pb::LeaseRevokeRequest::decode(body).ok()?),
            ALARM => Command::Alarm(pb::AlarmRequest::decode(body).ok()?),
            MEMBER_ADD => Command::MemberAdd(MemberChange::decode(body).ok()?),
            MEMBER_UPDATE => Command::MemberUpdate(MemberChange::decode(body).ok()?),
            MEMBER_PROMOTE => Command::MemberPromote(MemberChange::decode(body).ok()?),
            MEMBER_REMOVE => Command::MemberRemove(MemberChange::decode(body).ok()?),
            AUTH => Command::Auth(AuthChange::decode(body).ok()?),
            ZOOKEEPER => Command::ZooKeeper(ZkEntry::decode(body).ok()?),
            ZOOKEEPER_BATCH => Command::ZooKeeperBatch(ZkBatch::decode(body).ok()?),
            _ => return None,
        })
    }

    /// What [`encode_checked`](Self::encode_checked) adds to the command
    /// (not counted against the request size limit): `user` plus this.
    pub const CHECKED_ENVELOPE_BYTES: usize = 11;

    /// The log entry bytes of a client's write whose permissions were
    /// checked for `user` at `auth_revision`: if auth has changed by the
    /// time it is applied, it is checked again there (see `machine.rs`).
    pub fn encode_checked(&self, checked: &Checked) -> Vec<u8> {
        let inner = self.encode();
        let user = checked.user.as_bytes();
        let user_len = u16::try_from(user.len()).expect("user names are bounded");
        let mut out = Vec::with_capacity(Self::CHECKED_ENVELOPE_BYTES + user.len() + inner.len());
        out.push(CHECKED);
        out.extend_from_slice(&checked.auth_revision.to_le_bytes());
        out.extend_from_slice(&user_len.to_le_bytes());
        out.extend_from_slice(user);
        out.extend_from_slice(&inner);
        // `EtcdBackend::write_as` leaves exactly this envelope out of the
        // request size limit.
        assert_eq!(
            out.len(),
            Self::CHECKED_ENVELOPE_BYTES + user.len() + inner.len(),
            "the envelope adds CHECKED_ENVELOPE_BYTES and the user"
        );
        out
    }

    /// Parses any log entry: the command, and how it was checked if it came
    /// from a client (`None`: the member's own).
    pub fn decode_entry(bytes: &[u8]) -> Option<(Option<Checked>, Command)> {
        let Some((&CHECKED, rest)) = bytes.split_first() else {
            return Some((None, Command::decode(bytes)?));
        };
        let revision = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
        let user_len = u16::from_le_bytes(rest.get(8..10)?.try_into().ok()?) as usize;
        let user = std::str::from_utf8(rest.get(10..10 + user_len)?).ok()?;
        let checked = Checked {
            auth_revision: revision,
            user: user.to_string(),
        };
        Some((Some(checked), Command::decode(rest.get(10 + user_len..)?)?))
    }

    /// True for the client writes every member refuses while the CORRUPT
    /// alarm is raised: everything but lease revokes (the leader's expiry
    /// must still end leases) and alarm requests (so it can be cleared).
    pub fn refused_when_corrupt(&self) -> bool {
        let ends_session = matches!(self, Command::ZooKeeper(e) if e.op == zk_op::CLOSE_SESSION);
        !matches!(self, Command::LeaseRevoke(_) | Command::Alarm(_)) && !ends_session
    }

    /// A batch's entries, each as the command it would be alone.
    pub fn zookeeper_entries(batch: &ZkBatch) -> impl Iterator<Item = Command> + '_ {
        batch.entries.iter().cloned().map(Command::ZooKeeper)
    }

    /// The bytes this write would add to the store, as the storage quota
    /// counts them (see [`bellwether_kv::KvStore::size_bytes`]): a put's
    /// key, value and per-revision overhead, the costlier branch of a txn,
    /// a lease grant's share. Writes that only delete, compact or revoke
    /// cost nothing, so they still pass while the store is full, and free
    /// space.
    pub fn space_cost(&self) -> u64 {
        match self {
            Command::Put(r) => put_cost(r),
            Command::Txn(r) => txn_cost(r),
            Command::LeaseGrant(_) => LEASE_GRANT_COST_BYTES,
            Command::ZooKeeper(entry) => match entry.op {
                zk_op::DELETE | zk_op::CLOSE_SESSION => 0,
                zk_op::CREATE_SESSION => LEASE_GRANT_COST_BYTES,
                // A create, a set or a multi: at most what it carries.
                _ => bellwether_kv::REVISION_OVERHEAD_BYTES + entry.body.len() as u64,
            },
            Command::ZooKeeperBatch(batch) => Command::zookeeper_entries(batch)
                .map(|command| command.space_cost())
                .sum(),
            Command::DeleteRange(_)
            | Command::Compact(_)
            | Command::LeaseRevoke(_)
            | Command::Alarm(_)
            | Command::MemberAdd(_)
            | Command::MemberUpdate(_)
            | Command::MemberPromote(_)
            | Command::MemberRemove(_)
            | Command::Auth(_) => 0,
        }
    }
}

fn put_cost(put: &pb::PutRequest) -> u64 {
    bellwether_kv::REVISION_OVERHEAD_BYTES + put.key.len() as u64 + put.value.len() as u64
}

/// The costlier of a txn's two branches, nested txns included (at most
/// [`bellwether_kv::TXN_DEPTH_MAX`] deep, checked before apply).
fn txn_cost(txn: &pb::TxnRequest) -> u64 {
    let branch = |ops: &[pb::RequestOp]| -> u64 {
        ops.iter()
            .map(|op| match &op.request {
                Some(pb::request_op::Request::RequestPut(put)) => put_cost(put),
                Some(pb::request_op::Request::RequestTxn(nested)) => txn_cost(nested),
                _ => 0,
            })
            .sum()
    };
    branch(&txn.success).max(branch(&txn.failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_txn_costs_its_costlier_branch_and_deletes_cost_nothing() {
        let put = |key: &str, value: &str| pb::RequestOp {
            request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
                key: key.into(),
                value: value.into(),
                ..Default::default()
            })),
        };
        let delete = pb::RequestOp {
            request: Some(pb::request_op::Request::RequestDeleteRange(
                pb::DeleteRangeRequest {
                    key: b"k".to_vec(),
                    ..Default::default()
                },
            )),
        };
        let overhead = bellwether_kv::REVISION_OVERHEAD_BYTES;
        let nested = pb::RequestOp {
            request: Some(pb::request_op::Request::RequestTxn(pb::TxnRequest {
                success: vec![put("ab", "cdef")],
                ..Default::default()
            })),
        };
        let txn = Command::Txn(pb::TxnRequest {
            success: vec![put("a", "b"), delete.clone()],
            failure: vec![put("a", "bc"), nested],
            ..Default::default()
        });
        assert_eq!(txn.space_cost(), (overhead + 3) + (overhead + 6));
        let deletes_only = Command::Txn(pb::TxnRequest {
            success: vec![delete],
            ..Default::default()
        });
        assert_eq!(deletes_only.space_cost(), 0);
        assert_eq!(Command::Compact(Default::default()).space_cost(), 0);
    }

    #[test]
    fn commands_round_trip_and_garbage_is_refused() {
        let put = Command::Put(pb::PutRequest {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        });
        assert_eq!(Command::decode(&put.encode()), Some(put));
        assert_eq!(Command::decode(&[]), None);
        assert_eq!(Command::decode(&[9, 1, 2]), None);
        let alarm = Command::Alarm(pb::AlarmRequest {
            action: pb::alarm_request::AlarmAction::Activate as i32,
            member_id: 3,
            alarm: pb::AlarmType::Nospace as i32,
        });
        assert_eq!(Command::decode(&alarm.encode()), Some(alarm));
        let add = Command::MemberAdd(MemberChange {
            id: 4,
            peer_urls: vec!["http://127.0.0.1:7004".into()],
            learner: true,
            taken_peer_urls: vec!["http://127.0.0.1:7001".into()],
            ..Default::default()
        });
        assert_eq!(Command::decode(&add.encode()), Some(add.clone()));
        let checked = Checked {
            auth_revision: 42,
            user: "alice".into(),
        };
        assert_eq!(
            Command::decode_entry(&add.encode_checked(&checked)),
            Some((Some(checked), add.clone()))
        );
        assert_eq!(Command::decode_entry(&add.encode()), Some((None, add)));
        assert_eq!(Command::decode_entry(&[CHECKED, 1, 2]), None);
    }
}

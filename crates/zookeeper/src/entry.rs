//! A ZooKeeper request as the log holds it, and a session's record.
//!
//! The entry carries what every member must apply alike: the session, the
//! time the proposing member stamped (a node's ctime and mtime; ZooKeeper's
//! leader stamps its transactions the same way), and the request as the
//! client sent it.

use crate::jute::JuteWriter;

/// One logged ZooKeeper request.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ZkEntry {
    /// The session that sent it.
    #[prost(int64, tag = "1")]
    pub session: i64,
    /// Milliseconds since the epoch, stamped by the member that took it.
    #[prost(int64, tag = "2")]
    pub time_ms: i64,
    /// The operation code (`codes::op`).
    #[prost(int32, tag = "3")]
    pub op: i32,
    /// The request's record: as the client sent it, or for a session's
    /// creation a [`SessionRecord`].
    #[prost(bytes = "vec", tag = "4")]
    pub body: Vec<u8>,
    /// The ids the client's connection has proven, for its node's ACLs.
    #[prost(message, repeated, tag = "5")]
    pub auth: Vec<crate::acl::AuthId>,
}

/// What a session is: kept in the store, with the session's lease, so that
/// any member can take a reconnecting client.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct SessionRecord {
    /// The negotiated timeout.
    #[prost(int32, tag = "1")]
    pub timeout_ms: i32,
    /// The password a client must show to take the session over.
    #[prost(bytes = "vec", tag = "2")]
    pub password: Vec<u8>,
}

/// An answer: the reply header's zxid and error, then the record. The
/// server puts the request's xid in front and sends it as is, so an
/// answer is encoded once, where it is decided.
pub fn answer(zxid: i64, err: i32, record: &[u8]) -> Vec<u8> {
    let mut w = JuteWriter::new();
    w.long(zxid).int(err).raw(record);
    w.into_bytes()
}

/// The zxid, error and record of an [`answer`].
pub fn read_answer(bytes: &[u8]) -> Option<(i64, i32, &[u8])> {
    if bytes.len() < 12 {
        return None;
    }
    let zxid = i64::from_be_bytes(bytes[..8].try_into().ok()?);
    let err = i32::from_be_bytes(bytes[8..12].try_into().ok()?);
    Some((zxid, err, &bytes[12..]))
}

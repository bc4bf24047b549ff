//! The state machine's answers as bytes: `[0] + protobuf` for etcd's
//! response, `[1, code] + message` for a refusal. Bytes, because an answer
//! to a write forwarded by a follower travels back to it over the peer
//! link; the member that took the call decodes it once, into the response
//! its client gets.

use crate::status_code::Code;
use bellwether_api::etcdserverpb as pb;
use bellwether_kv::{AuthError, KvError, MemberError};
use prost::Message;
use std::fmt;

/// A refused write or a refused call: etcd's status code and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// gRPC's code, as etcd answers it.
    pub code: Code,
    /// etcd's message.
    pub message: String,
}

impl Refusal {
    /// A refusal with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }

    /// A store error, with the code etcd answers it with.
    pub fn of_kv(error: &KvError) -> Refusal {
        Refusal::new(kv_code(error), error.to_string())
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

/// Where a store error maps in gRPC, as etcd maps it.
pub fn kv_code(error: &KvError) -> Code {
    match error {
        KvError::Compacted { .. } | KvError::FutureRevision => Code::OutOfRange,
        KvError::LeaseNotFound => Code::NotFound,
        KvError::LeaseExists => Code::FailedPrecondition,
        KvError::LeaseTtlTooLarge => Code::OutOfRange,
        KvError::TooManyLeases { .. } => Code::ResourceExhausted,
        _ => Code::InvalidArgument,
    }
}

/// etcd's code for an auth error.
pub fn auth_code(error: AuthError) -> Code {
    match error {
        AuthError::PermissionDenied => Code::PermissionDenied,
        AuthError::InvalidToken => Code::Unauthenticated,
        AuthError::UserEmpty
        | AuthError::RoleEmpty
        | AuthError::AuthFailed
        | AuthError::OldRevision
        | AuthError::InvalidAuthMgmt
        | AuthError::NoSecret => Code::InvalidArgument,
        AuthError::TooMany => Code::ResourceExhausted,
        AuthError::RootUserNotExist
        | AuthError::RootRoleNotExist
        | AuthError::UserAlreadyExist
        | AuthError::UserNotFound
        | AuthError::RoleAlreadyExist
        | AuthError::RoleNotFound
        | AuthError::PermissionNotGranted
        | AuthError::RoleNotGranted
        | AuthError::NotEnabled => Code::FailedPrecondition,
    }
}

/// etcd's code for a refused membership change.
pub fn member_code(error: &MemberError) -> Code {
    match error {
        MemberError::NotFound => Code::NotFound,
        MemberError::Removed | MemberError::PeerUrlExists | MemberError::NotLearner => {
            Code::FailedPrecondition
        }
        MemberError::TooMany => Code::ResourceExhausted,
        MemberError::NoPeerUrls => Code::InvalidArgument,
    }
}

/// An etcd response, all of which carry a [`pb::ResponseHeader`].
pub trait Answer: Message + Default {
    /// The response's header field.
    fn header_mut(&mut self) -> &mut Option<pb::ResponseHeader>;
}

macro_rules! answers {
    ($($response:ty),* $(,)?) => {
        $(impl Answer for $response {
            fn header_mut(&mut self) -> &mut Option<pb::ResponseHeader> {
                &mut self.header
            }
        })*
    };
}

answers!(
    pb::PutResponse,
    pb::DeleteRangeResponse,
    pb::TxnResponse,
    pb::CompactionResponse,
    pb::LeaseGrantResponse,
    pb::LeaseRevokeResponse,
    pb::AlarmResponse,
    pb::MemberAddResponse,
    pb::AuthEnableResponse,
);

/// An answer: `[0] + protobuf` on success. The response's header carries
/// `revision`, the store's revision right after this write was applied:
/// etcd answers a write with that revision, and clientv3's Mutex and
/// Election queue behind exactly it (a later revision would make them wait
/// on keys created after their own).
pub fn answer_ok(mut response: impl Answer, revision: i64) -> Vec<u8> {
    *response.header_mut() = Some(pb::ResponseHeader {
        revision,
        ..Default::default()
    });
    let mut out = vec![0];
    out.extend_from_slice(&response.encode_to_vec());
    out
}

/// A refusal's answer: `[1, code] + message`.
pub fn answer_error(code: Code, message: &str) -> Vec<u8> {
    let mut out = vec![1, code.number()];
    out.extend_from_slice(message.as_bytes());
    out
}

/// Reads an answer back into a response or a refusal.
pub fn read_answer<M: Message + Default>(bytes: &[u8]) -> Result<M, Refusal> {
    match bytes.split_first() {
        Some((0, body)) => M::decode(body)
            .map_err(|e| Refusal::new(Code::Internal, format!("undecodable answer: {e}"))),
        Some((1, rest)) => {
            let (code, message) = rest.split_first().unwrap_or((&(Code::Unknown as u8), &[]));
            Err(Refusal::new(
                Code::from_number(*code),
                String::from_utf8_lossy(message),
            ))
        }
        _ => Err(Refusal::new(
            Code::Internal,
            "empty answer from the state machine",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_bound_is_refused_as_resource_exhausted() {
        let refused = KvError::TooManyLeases {
            leases_max: bellwether_kv::LEASES_MAX,
        };
        assert_eq!(kv_code(&refused), Code::ResourceExhausted);
    }

    #[test]
    fn answers_round_trip_and_garbage_is_an_internal_refusal() {
        let error = answer_error(Code::OutOfRange, "compacted");
        assert_eq!(
            read_answer::<pb::PutResponse>(&error),
            Err(Refusal::new(Code::OutOfRange, "compacted"))
        );
        let ok = answer_ok(pb::PutResponse::default(), 7);
        let put = read_answer::<pb::PutResponse>(&ok).expect("an answer");
        assert_eq!(put.header.map(|h| h.revision), Some(7));
        let empty = read_answer::<pb::PutResponse>(&[]).unwrap_err();
        assert_eq!(empty.code, Code::Internal);
    }
}

//! What one member's etcd services ask another's process (see
//! [`crate::member_calls`]), and how the answers travel: a gRPC answer or
//! status, encoded once here and decoded once by the caller.
//!
//! Each call is one that must be served by a particular member's process
//! and not by the log:
//! - a lease's keep-alive and time-to-live, on the leader's lease clock;
//! - the release of a keep-alive stream's leases when it ends (see
//!   `lease_service.rs`, release on disconnect);
//! - a learner's promotion, which only the leader can judge;
//! - a member's history hash, for the consistency check.

use super::auth_gate::Caller;
use bellwether_storage::codec::{put_len, put_u32, put_u64, put_u8, Malformed, Reader};
use tonic::{Code, Status};

/// Leases one release call names, at most: what one keep-alive stream
/// tracks for release on disconnect.
pub const RELEASED_LEASES_MAX: usize = 64;
/// The largest answer a call carries (gRPC's default bound on a message a
/// client receives, as a relayed gRPC answer had): well under the peer
/// connection's frame bound, so an answer never becomes a frame that
/// cannot be sent. A larger one (a time-to-live listing a lease's many
/// keys) is answered with a clear error instead.
pub const ANSWER_BYTES_MAX: usize = 4 << 20;

const KEEP_ALIVE: u8 = 1;
const TIME_TO_LIVE: u8 = 2;
const RELEASE: u8 = 3;
const PROMOTE: u8 = 4;
const HASH_KV: u8 = 5;

const ANSWERED: u8 = 0;
const FAILED: u8 = 1;

/// A call for another member's process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberCall {
    /// Renew `lease` on the leader's lease clock.
    KeepAlive {
        /// The lease.
        lease: i64,
    },
    /// `lease`'s remaining time on the leader's lease clock, with its keys
    /// when `keys` is set (the caller checked the client may read them).
    TimeToLive {
        /// The lease.
        lease: i64,
        /// Whether the answer lists the lease's keys.
        keys: bool,
    },
    /// A keep-alive stream that renewed `leases` ended: shorten each to
    /// `within_ms` on the leader's lease clock.
    Release {
        /// The leases, at most [`RELEASED_LEASES_MAX`].
        leases: Vec<i64>,
        /// The grace the stream asked for, in milliseconds.
        within_ms: u64,
    },
    /// Promote learner `member` for `caller` (the calling member checked
    /// it is an administrator; the log checks it again at apply, at the
    /// auth revision it was read at).
    Promote {
        /// The learner's id.
        member: u64,
        /// Who asked.
        caller: Caller,
    },
    /// The member's history hash at `revision` (etcd's HashKV).
    HashKv {
        /// The revision, 0 for the latest.
        revision: i64,
    },
}

impl MemberCall {
    /// The call's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        match self {
            MemberCall::KeepAlive { lease } => {
                put_u8(&mut out, KEEP_ALIVE);
                put_u64(&mut out, *lease as u64);
            }
            MemberCall::TimeToLive { lease, keys } => {
                put_u8(&mut out, TIME_TO_LIVE);
                put_u64(&mut out, *lease as u64);
                put_u8(&mut out, u8::from(*keys));
            }
            MemberCall::Release { leases, within_ms } => {
                assert!(
                    leases.len() <= RELEASED_LEASES_MAX,
                    "a release names a bounded number of leases"
                );
                put_u8(&mut out, RELEASE);
                put_u64(&mut out, *within_ms);
                put_len(&mut out, leases.len());
                for lease in leases {
                    put_u64(&mut out, *lease as u64);
                }
            }
            MemberCall::Promote { member, caller } => {
                put_u8(&mut out, PROMOTE);
                put_u64(&mut out, *member);
                put_u64(&mut out, caller.auth_revision);
                put_u8(&mut out, u8::from(caller.enabled));
                // etcd refuses an empty user name, so empty is "none".
                let user = caller.user.as_deref().unwrap_or("");
                assert!(
                    caller.user.is_none() || !user.is_empty(),
                    "user names are not empty"
                );
                put_len(&mut out, user.len());
                out.extend_from_slice(user.as_bytes());
            }
            MemberCall::HashKv { revision } => {
                put_u8(&mut out, HASH_KV);
                put_u64(&mut out, *revision as u64);
            }
        }
        out
    }

    /// The call `bytes` encode; every byte must be used.
    pub fn decode(bytes: &[u8]) -> Result<MemberCall, Malformed> {
        let mut r = Reader::new(bytes);
        let call = match r.u8("call kind")? {
            KEEP_ALIVE => MemberCall::KeepAlive {
                lease: r.u64("lease")? as i64,
            },
            TIME_TO_LIVE => MemberCall::TimeToLive {
                lease: r.u64("lease")? as i64,
                keys: match r.u8("keys")? {
                    0 => false,
                    1 => true,
                    other => return Err(Malformed(format!("keys: {other} is not a boolean"))),
                },
            },
            RELEASE => {
                let within_ms = r.u64("grace")?;
                let count = r.u32("lease count")? as usize;
                if count > RELEASED_LEASES_MAX {
                    return Err(Malformed(format!(
                        "a release names {count} leases, more than {RELEASED_LEASES_MAX}"
                    )));
                }
                let leases = (0..count)
                    .map(|_| r.u64("lease").map(|l| l as i64))
                    .collect::<Result<_, _>>()?;
                MemberCall::Release { leases, within_ms }
            }
            PROMOTE => {
                let member = r.u64("member")?;
                let auth_revision = r.u64("auth revision")?;
                let enabled = match r.u8("auth enabled")? {
                    0 => false,
                    1 => true,
                    other => {
                        return Err(Malformed(format!("auth enabled: {other} is not a boolean")))
                    }
                };
                let len = r.u32("user length")? as usize;
                let user = std::str::from_utf8(r.take(len, "user")?)
                    .map_err(|_| Malformed("a user name that is not UTF-8".into()))?;
                let caller = Caller {
                    user: (!user.is_empty()).then(|| user.to_string()),
                    auth_revision,
                    enabled,
                };
                MemberCall::Promote { member, caller }
            }
            HASH_KV => MemberCall::HashKv {
                revision: r.u64("revision")? as i64,
            },
            other => return Err(Malformed(format!("unknown call kind {other}"))),
        };
        r.finish("member call")?;
        Ok(call)
    }
}

/// An answer's bytes: the gRPC answer's protobuf, or the status it failed
/// with; an answer over [`ANSWER_BYTES_MAX`] becomes a ResourceExhausted
/// status.
pub fn encode_answer<T: prost::Message>(answer: Result<T, Status>) -> Vec<u8> {
    let mut out = Vec::new();
    match answer {
        Ok(message) if message.encoded_len() > ANSWER_BYTES_MAX => {
            let too_large = Status::resource_exhausted(format!(
                "bellwether: the answer is {} bytes, more than the {ANSWER_BYTES_MAX} one member passes another",
                message.encoded_len()
            ));
            return encode_answer::<T>(Err(too_large));
        }
        Ok(message) => {
            put_u8(&mut out, ANSWERED);
            message.encode(&mut out).expect("a Vec grows as needed");
        }
        Err(status) => {
            put_u8(&mut out, FAILED);
            put_u32(&mut out, status.code() as i32 as u32);
            out.extend_from_slice(status.message().as_bytes());
        }
    }
    out
}

/// The answer [`encode_answer`] wrote. Bytes that are not one are the
/// answering member's fault, reported as an internal error.
pub fn decode_answer<T: prost::Message + Default>(bytes: &[u8]) -> Result<T, Status> {
    let malformed = |why: String| Status::internal(format!("bellwether: a member's answer: {why}"));
    let mut r = Reader::new(bytes);
    match r.u8("answer kind").map_err(|e| malformed(e.0))? {
        ANSWERED => T::decode(&bytes[1..]).map_err(|e| malformed(e.to_string())),
        FAILED => {
            let code = r.u32("status code").map_err(|e| malformed(e.0))? as i32;
            let message = r
                .take(r.remaining(), "message")
                .map_err(|e| malformed(e.0))?;
            Err(Status::new(
                Code::from_i32(code),
                String::from_utf8_lossy(message),
            ))
        }
        other => Err(malformed(format!("unknown answer kind {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_api::etcdserverpb as pb;

    #[test]
    fn every_call_round_trips_and_damaged_bytes_are_refused() {
        let calls = [
            MemberCall::KeepAlive { lease: -5 },
            MemberCall::TimeToLive {
                lease: 7,
                keys: true,
            },
            MemberCall::Release {
                leases: vec![1, 2, i64::MAX],
                within_ms: 250,
            },
            MemberCall::Promote {
                member: 9,
                caller: Caller {
                    user: Some("root".into()),
                    auth_revision: 4,
                    enabled: true,
                },
            },
            MemberCall::Promote {
                member: 9,
                caller: Caller {
                    user: None,
                    auth_revision: 0,
                    enabled: false,
                },
            },
            MemberCall::HashKv { revision: 0 },
        ];
        for call in calls {
            let mut bytes = call.encode();
            assert_eq!(MemberCall::decode(&bytes).unwrap(), call);
            assert!(MemberCall::decode(&bytes[..bytes.len() - 1]).is_err());
            bytes.push(0);
            assert!(MemberCall::decode(&bytes).is_err(), "trailing byte");
        }
        assert!(MemberCall::decode(&[]).is_err());
        assert!(MemberCall::decode(&[HASH_KV + 1, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        let mut too_many = vec![RELEASE];
        too_many.extend_from_slice(&1u64.to_le_bytes());
        too_many.extend_from_slice(&(RELEASED_LEASES_MAX as u32 + 1).to_le_bytes());
        assert!(MemberCall::decode(&too_many).is_err(), "bounded");
    }

    #[test]
    fn an_answer_or_its_status_arrives_as_sent() {
        let answer = pb::LeaseKeepAliveResponse {
            header: None,
            id: 3,
            ttl: 10,
        };
        let bytes = encode_answer(Ok(answer));
        assert_eq!(
            decode_answer::<pb::LeaseKeepAliveResponse>(&bytes).unwrap(),
            answer
        );
        let bytes = encode_answer::<pb::LeaseKeepAliveResponse>(Err(Status::failed_precondition(
            "etcdserver: can only promote a learner member",
        )));
        let status = decode_answer::<pb::LeaseKeepAliveResponse>(&bytes).unwrap_err();
        assert_eq!(status.code(), Code::FailedPrecondition);
        assert_eq!(
            status.message(),
            "etcdserver: can only promote a learner member"
        );
        let status = decode_answer::<pb::LeaseKeepAliveResponse>(&[7]).unwrap_err();
        assert_eq!(status.code(), Code::Internal);
        // An answer too large to pass becomes a clear error.
        let huge = pb::LeaseTimeToLiveResponse {
            keys: vec![vec![b'k'; 1024]; ANSWER_BYTES_MAX / 1024 + 1],
            ..Default::default()
        };
        let bytes = encode_answer(Ok(huge));
        assert!(bytes.len() < 1024, "a status, not the answer");
        let status = decode_answer::<pb::LeaseTimeToLiveResponse>(&bytes).unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
    }
}

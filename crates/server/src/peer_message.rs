//! What members send each other: Raft's messages, and the client requests
//! a follower hands to its leader over the same connection (see
//! [`crate::forwarding`]).
//!
//! On the wire a Raft message keeps its own encoding
//! ([`bellwether_transport::raft_wire`]);
//! the forwarding kinds use kind bytes above every Raft kind, so one frame
//! is still one message with a kind byte first.

use bellwether_core::raft::RaftMessage;
use bellwether_core::{LogIndex, NodeId, Term};
pub use bellwether_member::Forward;
use bellwether_storage::codec::{put_len, put_u64, put_u8, Malformed, Reader};
use bellwether_transport::raft_wire::{self as wire, KINDS_END};
use bellwether_transport::WireMessage;

const PROPOSE: u8 = KINDS_END;
const PROPOSE_REFUSED: u8 = 33;
const READ_INDEX: u8 = 34;
const READ_INDEX_CONFIRMED: u8 = 35;
const READ_INDEX_REFUSED: u8 = 36;
const CALL: u8 = 37;
const CALL_ANSWER: u8 = 38;
const CALL_REFUSED: u8 = 39;

// `decode` sends every kind below `PROPOSE` to Raft's decoder: the
// forwarding kinds follow Raft's, one each, in `Forward`'s order.
const _: () = assert!(
    PROPOSE == KINDS_END
        && PROPOSE_REFUSED == PROPOSE + 1
        && READ_INDEX == PROPOSE + 2
        && READ_INDEX_CONFIRMED == PROPOSE + 3
        && READ_INDEX_REFUSED == PROPOSE + 4
        && CALL == PROPOSE + 5
        && CALL_ANSWER == PROPOSE + 6
        && CALL_REFUSED == PROPOSE + 7,
    "the forwarding kinds follow every Raft kind"
);

/// One message between members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerMessage {
    /// A Raft message, for the core.
    Raft(RaftMessage),
    /// A client request forwarded between a follower and its leader.
    Forward(Forward),
}

impl PeerMessage {
    /// The kind, for the messages-sent metric.
    pub fn kind(&self) -> &'static str {
        match self {
            PeerMessage::Raft(message) => bellwether_core::Message::kind(message),
            PeerMessage::Forward(forward) => forward.kind(),
        }
    }

    /// Every kind a member sends: Raft's, then its own.
    pub fn all_kinds() -> impl Iterator<Item = &'static str> {
        <RaftMessage as bellwether_core::Message>::all_kinds()
            .iter()
            .copied()
            .chain(Forward::KINDS)
    }
}

impl WireMessage for PeerMessage {
    fn kind(&self) -> &'static str {
        PeerMessage::kind(self)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        encode(out, self);
    }

    fn decode(bytes: &[u8]) -> Result<Self, Malformed> {
        decode(bytes)
    }
}

/// Appends `message` to `out`.
pub fn encode(out: &mut Vec<u8>, message: &PeerMessage) {
    let forward = match message {
        PeerMessage::Raft(message) => {
            let start = out.len();
            wire::encode(out, message);
            assert!(
                out.get(start).is_some_and(|kind| *kind < PROPOSE),
                "a Raft message's kind is below the forwarding kinds"
            );
            return;
        }
        PeerMessage::Forward(forward) => forward,
    };
    match forward {
        Forward::Propose {
            request,
            term,
            command,
        } => {
            put_u8(out, PROPOSE);
            put_u64(out, *request);
            put_u64(out, term.0);
            put_len(out, command.len());
            out.extend_from_slice(command);
        }
        Forward::ProposeRefused {
            request,
            leader,
            busy,
        } => {
            put_u8(out, PROPOSE_REFUSED);
            put_u64(out, *request);
            put_leader(out, *leader);
            put_u8(out, u8::from(*busy));
        }
        Forward::ReadIndex { request } => {
            put_u8(out, READ_INDEX);
            put_u64(out, *request);
        }
        Forward::ReadIndexConfirmed { request, index } => {
            put_u8(out, READ_INDEX_CONFIRMED);
            put_u64(out, *request);
            put_u64(out, index.0);
        }
        Forward::ReadIndexRefused { request, leader } => {
            put_u8(out, READ_INDEX_REFUSED);
            put_u64(out, *request);
            put_leader(out, *leader);
        }
        Forward::Call { request, body } => {
            put_u8(out, CALL);
            put_u64(out, *request);
            put_len(out, body.len());
            out.extend_from_slice(body);
        }
        Forward::CallAnswer { request, body } => {
            put_u8(out, CALL_ANSWER);
            put_u64(out, *request);
            put_len(out, body.len());
            out.extend_from_slice(body);
        }
        Forward::CallRefused { request } => {
            put_u8(out, CALL_REFUSED);
            put_u64(out, *request);
        }
    }
}

/// Appends a refusal's leader: its number, 0 for none.
fn put_leader(out: &mut Vec<u8>, leader: Option<NodeId>) {
    put_u64(out, leader.map_or(0, |l| l.0));
}

/// Reads what [`put_leader`] wrote.
fn leader(r: &mut Reader<'_>) -> Result<Option<NodeId>, Malformed> {
    let id = r.u64("leader")?;
    Ok((id != 0).then_some(NodeId(id)))
}

/// Reads a call's or an answer's body: its length, then its bytes.
fn body(r: &mut Reader<'_>) -> Result<Vec<u8>, Malformed> {
    let len = r.u32("body length")? as usize;
    Ok(r.take(len, "body")?.to_vec())
}

/// Decodes one message; every byte must be used.
pub fn decode(bytes: &[u8]) -> Result<PeerMessage, Malformed> {
    let Some(kind) = bytes.first() else {
        return Err(Malformed("empty message".into()));
    };
    if *kind < PROPOSE {
        return wire::decode(bytes).map(PeerMessage::Raft);
    }
    let mut r = Reader::new(bytes);
    r.u8("message kind")?;
    let request = r.u64("request")?;
    let forward = match *kind {
        PROPOSE => {
            let term = Term(r.u64("term")?);
            let len = r.u32("command length")? as usize;
            Forward::Propose {
                request,
                term,
                command: r.take(len, "command")?.to_vec(),
            }
        }
        PROPOSE_REFUSED => Forward::ProposeRefused {
            request,
            leader: leader(&mut r)?,
            busy: match r.u8("busy")? {
                0 => false,
                1 => true,
                other => return Err(Malformed(format!("busy: {other} is not a boolean"))),
            },
        },
        READ_INDEX => Forward::ReadIndex { request },
        READ_INDEX_CONFIRMED => Forward::ReadIndexConfirmed {
            request,
            index: LogIndex(r.u64("index")?),
        },
        READ_INDEX_REFUSED => Forward::ReadIndexRefused {
            request,
            leader: leader(&mut r)?,
        },
        CALL => Forward::Call {
            request,
            body: body(&mut r)?,
        },
        CALL_ANSWER => Forward::CallAnswer {
            request,
            body: body(&mut r)?,
        },
        CALL_REFUSED => Forward::CallRefused { request },
        other => return Err(Malformed(format!("unknown message kind {other}"))),
    };
    r.finish("forwarded request")?;
    Ok(PeerMessage::Forward(forward))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarding_messages_round_trip_and_raft_messages_pass_through() {
        let messages = [
            PeerMessage::Raft(RaftMessage::TimeoutNow { term: Term(4) }),
            PeerMessage::Forward(Forward::Propose {
                request: 7,
                term: Term(3),
                command: b"put".to_vec(),
            }),
            PeerMessage::Forward(Forward::ProposeRefused {
                request: 7,
                leader: Some(NodeId(2)),
                busy: true,
            }),
            PeerMessage::Forward(Forward::ReadIndex { request: 8 }),
            PeerMessage::Forward(Forward::ReadIndexConfirmed {
                request: 8,
                index: LogIndex(41),
            }),
            PeerMessage::Forward(Forward::ReadIndexRefused {
                request: 8,
                leader: None,
            }),
            PeerMessage::Forward(Forward::Call {
                request: 9,
                body: b"keep-alive".to_vec(),
            }),
            PeerMessage::Forward(Forward::CallAnswer {
                request: 9,
                body: b"ttl".to_vec(),
            }),
            PeerMessage::Forward(Forward::CallRefused { request: 9 }),
        ];
        for message in messages {
            let mut bytes = Vec::new();
            encode(&mut bytes, &message);
            assert_eq!(decode(&bytes).unwrap(), message);
            assert!(
                decode(&bytes[..bytes.len() - 1]).is_err(),
                "truncated {message:?} is refused"
            );
            bytes.push(0);
            assert!(decode(&bytes).is_err(), "trailing byte after {message:?}");
        }
    }

    #[test]
    fn a_refusals_leader_is_its_number_on_the_wire_and_none_is_0() {
        let refusal = |leader| {
            let mut bytes = Vec::new();
            let message = Forward::ReadIndexRefused { request: 8, leader };
            encode(&mut bytes, &PeerMessage::Forward(message));
            bytes
        };
        let mut expected = vec![READ_INDEX_REFUSED];
        expected.extend_from_slice(&8u64.to_le_bytes());
        expected.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(refusal(None), expected);
        expected[9..].copy_from_slice(&2u64.to_le_bytes());
        assert_eq!(refusal(Some(NodeId(2))), expected);
    }

    #[test]
    fn garbage_is_refused_not_panicked_on() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[PROPOSE, 1]).is_err());
        assert!(decode(&[99, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(decode(&[CALL_REFUSED + 1, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        let mut huge = vec![PROPOSE];
        huge.extend_from_slice(&1u64.to_le_bytes());
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&huge).is_err(), "a length past the frame is refused");
    }
}

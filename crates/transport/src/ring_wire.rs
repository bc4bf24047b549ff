//! Ring's wire form: a kind byte, then little-endian fields. The id lists
//! an election or coordinator message carries are length-prefixed and
//! refused above the ring's member limit before anything is allocated.

use bellwether_core::ring::{RingMessage, MEMBERS_MAX};
use bellwether_core::NodeId;
use bellwether_storage::codec::{put_u32, put_u64, put_u8, Malformed, Reader};

const ELECTION: u8 = 1;
const COORDINATOR: u8 = 2;
const ACK: u8 = 3;
const HEARTBEAT: u8 = 4;

fn put_ids(out: &mut Vec<u8>, ids: &[NodeId]) {
    assert!(
        ids.len() <= MEMBERS_MAX,
        "a ring has at most {MEMBERS_MAX} members"
    );
    put_u32(out, ids.len() as u32);
    for id in ids {
        put_u64(out, id.0);
    }
}

fn ids(r: &mut Reader<'_>, what: &str) -> Result<Vec<NodeId>, Malformed> {
    let count = r.u32(what)? as usize;
    if count > MEMBERS_MAX {
        return Err(Malformed(format!(
            "{what}: {count} ids, over the ring's {MEMBERS_MAX}"
        )));
    }
    (0..count).map(|_| r.u64(what).map(NodeId)).collect()
}

impl crate::WireMessage for RingMessage {
    fn kind(&self) -> &'static str {
        bellwether_core::Message::kind(self)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            RingMessage::Election {
                initiator,
                ids,
                epoch,
                sequence,
            } => {
                put_u8(out, ELECTION);
                put_u64(out, initiator.0);
                put_ids(out, ids);
                put_u64(out, *epoch);
                put_u64(out, *sequence);
            }
            RingMessage::Coordinator {
                initiator,
                leader,
                members,
                epoch,
                sequence,
            } => {
                put_u8(out, COORDINATOR);
                put_u64(out, initiator.0);
                put_u64(out, leader.0);
                put_ids(out, members);
                put_u64(out, *epoch);
                put_u64(out, *sequence);
            }
            RingMessage::Ack { sequence } => {
                put_u8(out, ACK);
                put_u64(out, *sequence);
            }
            RingMessage::Heartbeat { epoch } => {
                put_u8(out, HEARTBEAT);
                put_u64(out, *epoch);
            }
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(bytes);
        let message = match r.u8("message kind")? {
            ELECTION => RingMessage::Election {
                initiator: NodeId(r.u64("initiator")?),
                ids: ids(&mut r, "election ids")?,
                epoch: r.u64("epoch")?,
                sequence: r.u64("sequence")?,
            },
            COORDINATOR => RingMessage::Coordinator {
                initiator: NodeId(r.u64("initiator")?),
                leader: NodeId(r.u64("leader")?),
                members: ids(&mut r, "coordinator members")?,
                epoch: r.u64("epoch")?,
                sequence: r.u64("sequence")?,
            },
            ACK => RingMessage::Ack {
                sequence: r.u64("sequence")?,
            },
            HEARTBEAT => RingMessage::Heartbeat {
                epoch: r.u64("epoch")?,
            },
            other => return Err(Malformed(format!("unknown ring message kind {other}"))),
        };
        r.finish("ring message")?;
        Ok(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireMessage;

    #[test]
    fn every_message_round_trips_and_garbage_is_refused() {
        let messages = [
            RingMessage::Election {
                initiator: NodeId(2),
                ids: vec![NodeId(2), NodeId(3)],
                epoch: 4,
                sequence: 9,
            },
            RingMessage::Coordinator {
                initiator: NodeId(2),
                leader: NodeId(3),
                members: vec![NodeId(1), NodeId(2), NodeId(3)],
                epoch: 5,
                sequence: 10,
            },
            RingMessage::Ack { sequence: 10 },
            RingMessage::Heartbeat { epoch: 5 },
        ];
        for message in messages {
            let mut bytes = Vec::new();
            message.encode(&mut bytes);
            assert_eq!(RingMessage::decode(&bytes).unwrap(), message);
            assert!(RingMessage::decode(&bytes[..bytes.len() - 1]).is_err());
            bytes.push(0);
            assert!(RingMessage::decode(&bytes).is_err(), "trailing byte");
        }
        assert!(RingMessage::decode(&[]).is_err());
    }

    #[test]
    fn an_id_list_longer_than_a_ring_is_refused_before_allocating() {
        let mut bytes = vec![ELECTION];
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        let error = RingMessage::decode(&bytes).unwrap_err();
        assert!(error.0.contains("over the ring"), "{}", error.0);
    }
}

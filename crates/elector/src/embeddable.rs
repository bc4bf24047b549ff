//! What the elector needs from a core algorithm beyond [`Protocol`]: a wire
//! form for its messages (from `bellwether-transport`), a binary form for
//! its durable state, and, for Raft, the remaining leader lease.
//!
//! Bully and Ring persist one number, their epoch. Raft persists its term,
//! vote and the few log entries an election-only group produces (one no-op
//! per term a leader was elected in); it never compacts, so a snapshot in
//! its durable state is a bug.

use bellwether_core::bully::BullyNode;
use bellwether_core::raft::{RaftDurable, RaftNode};
use bellwether_core::ring::RingNode;
use bellwether_core::Protocol;
use bellwether_storage::codec::{
    decode_entries, decode_hard_state, encode_entries, encode_hard_state, put_len, put_u64,
    Malformed, Reader,
};
use bellwether_transport::WireMessage;

/// A core algorithm the elector can run.
pub trait Embeddable:
    Protocol<Message: WireMessage, Persist: Send, Output: Send, Durable: Send> + Send + 'static
{
    /// Appends the durable state's binary form to `out`.
    fn encode_durable(durable: &Self::Durable, out: &mut Vec<u8>);
    /// Reads it back; every byte must be used.
    fn decode_durable(bytes: &[u8]) -> Result<Self::Durable, Malformed>;
    /// Ticks left of this node's leader lease, when it has one.
    fn lease_remaining_ticks(&self) -> Option<u64> {
        None
    }
}

fn encode_epoch(epoch: u64, out: &mut Vec<u8>) {
    put_u64(out, epoch);
}

fn decode_epoch(bytes: &[u8]) -> Result<u64, Malformed> {
    let mut r = Reader::new(bytes);
    let epoch = r.u64("epoch")?;
    r.finish("epoch")?;
    Ok(epoch)
}

impl Embeddable for BullyNode {
    fn encode_durable(durable: &u64, out: &mut Vec<u8>) {
        encode_epoch(*durable, out);
    }

    fn decode_durable(bytes: &[u8]) -> Result<u64, Malformed> {
        decode_epoch(bytes)
    }
}

impl Embeddable for RingNode {
    fn encode_durable(durable: &u64, out: &mut Vec<u8>) {
        encode_epoch(*durable, out);
    }

    fn decode_durable(bytes: &[u8]) -> Result<u64, Malformed> {
        decode_epoch(bytes)
    }
}

impl Embeddable for RaftNode {
    fn encode_durable(durable: &RaftDurable, out: &mut Vec<u8>) {
        assert!(
            durable.snapshot.is_none(),
            "an election-only Raft never compacts its log"
        );
        let mut part = Vec::new();
        encode_hard_state(&mut part, &durable.hard_state);
        put_len(out, part.len());
        out.extend_from_slice(&part);
        part.clear();
        if !durable.entries.is_empty() {
            encode_entries(&mut part, &durable.entries);
        }
        put_len(out, part.len());
        out.extend_from_slice(&part);
    }

    fn decode_durable(bytes: &[u8]) -> Result<RaftDurable, Malformed> {
        let mut r = Reader::new(bytes);
        let length = r.u32("hard state length")? as usize;
        let hard_state = decode_hard_state(r.take(length, "hard state")?)?;
        let length = r.u32("entries length")? as usize;
        let entries = match length {
            0 => Vec::new(),
            _ => decode_entries(r.take(length, "entries")?)?,
        };
        r.finish("raft state")?;
        Ok(RaftDurable {
            hard_state,
            snapshot: None,
            entries,
        })
    }

    fn lease_remaining_ticks(&self) -> Option<u64> {
        RaftNode::lease_remaining_ticks(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_core::raft::{Entry, HardState, Payload};
    use bellwether_core::{LogIndex, NodeId, Term};

    #[test]
    fn durable_states_round_trip_and_truncation_is_refused() {
        let raft = RaftDurable {
            hard_state: HardState {
                term: Term(7),
                voted_for: Some(NodeId(2)),
                commit: LogIndex(1),
            },
            snapshot: None,
            entries: vec![Entry {
                term: Term(7),
                index: LogIndex(1),
                payload: Payload::Noop,
            }],
        };
        let mut bytes = Vec::new();
        RaftNode::encode_durable(&raft, &mut bytes);
        assert_eq!(RaftNode::decode_durable(&bytes).unwrap(), raft);
        assert!(RaftNode::decode_durable(&bytes[..bytes.len() - 1]).is_err());
        let fresh = RaftDurable::default();
        let mut bytes = Vec::new();
        RaftNode::encode_durable(&fresh, &mut bytes);
        assert_eq!(RaftNode::decode_durable(&bytes).unwrap(), fresh);
        let mut bytes = Vec::new();
        BullyNode::encode_durable(&41, &mut bytes);
        assert_eq!(BullyNode::decode_durable(&bytes).unwrap(), 41);
        assert!(RingNode::decode_durable(&bytes[..7]).is_err());
    }
}

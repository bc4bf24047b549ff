//! What the elector needs from a core algorithm beyond [`Protocol`]: a wire
//! form for its messages (from `bellwether-transport`), a binary form for
//! its durable state, and, for Raft, the remaining leader lease.
//!
//! Bully and Ring persist one number, their epoch. Raft persists its term,
//! vote and the few log entries an election-only group produces (one no-op
//! per term a leader was elected in); it never compacts, so a snapshot in
//! its durable state is a bug.

use bellwether_core::bully::BullyNode;
use bellwether_core::paxos::{Ballot, Entry, PaxosDurable, PaxosNode};
use bellwether_core::raft::{RaftDurable, RaftNode};
use bellwether_core::ring::RingNode;
use bellwether_core::Protocol;
use bellwether_storage::codec::{
    decode_entries, decode_hard_state, encode_entries, encode_hard_state, put_len, put_u64,
    Malformed, Reader,
};
use bellwether_transport::paxos_wire::{ballot, put_ballot, BALLOT_BYTES};
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

/// Bytes of one stored `(slot, entry)`.
const PAXOS_ENTRY_BYTES: usize = 8 + BALLOT_BYTES + 8;

impl Embeddable for PaxosNode {
    /// The promise, then the accepted entries (`slot`, ballot, value), in
    /// the wire form's little-endian fields (`paxos_wire`).
    fn encode_durable(durable: &PaxosDurable, out: &mut Vec<u8>) {
        put_ballot(out, durable.promised);
        put_len(out, durable.log.len());
        for (slot, entry) in &durable.log {
            put_u64(out, *slot);
            put_ballot(out, entry.ballot);
            put_u64(out, entry.value);
        }
    }

    fn decode_durable(bytes: &[u8]) -> Result<PaxosDurable, Malformed> {
        let mut r = Reader::new(bytes);
        let promised = ballot(&mut r, "promised ballot")?;
        let count = r.u32("entry count")? as usize;
        if count.saturating_mul(PAXOS_ENTRY_BYTES) != r.remaining() {
            return Err(Malformed(format!(
                "{count} entries do not match the {} bytes left",
                r.remaining()
            )));
        }
        if promised != Ballot::ZERO && !promised.is_valid() {
            return Err(Malformed(format!(
                "promised ballot {promised} out of range"
            )));
        }
        let mut durable = PaxosDurable {
            promised,
            ..PaxosDurable::default()
        };
        for _ in 0..count {
            let slot = r.u64("entry slot")?;
            let entry = Entry {
                ballot: ballot(&mut r, "entry ballot")?,
                value: r.u64("entry value")?,
            };
            let slot_ok = (1..=bellwether_core::paxos::LOG_SLOTS_MAX).contains(&slot);
            if !slot_ok
                || !entry.ballot.is_valid()
                || entry.ballot > promised
                || durable.log.insert(slot, entry).is_some()
            {
                return Err(Malformed(format!(
                    "entry {slot} is out of range, repeated or above the promise"
                )));
            }
        }
        r.finish("paxos state")?;
        Ok(durable)
    }

    fn lease_remaining_ticks(&self) -> Option<u64> {
        PaxosNode::lease_remaining_ticks(self)
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

    #[test]
    fn paxos_state_round_trips_and_damage_is_refused() {
        let promised = Ballot {
            round: 9,
            priority: 2,
            node: NodeId(3),
        };
        let mut paxos = PaxosDurable {
            promised,
            ..PaxosDurable::default()
        };
        paxos.log.insert(
            1,
            bellwether_core::paxos::Entry {
                ballot: promised,
                value: 77,
            },
        );
        paxos.log.insert(
            2,
            bellwether_core::paxos::Entry {
                ballot: promised,
                value: 78,
            },
        );
        let mut bytes = Vec::new();
        PaxosNode::encode_durable(&paxos, &mut bytes);
        assert_eq!(PaxosNode::decode_durable(&bytes).unwrap(), paxos);
        assert!(PaxosNode::decode_durable(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(PaxosNode::decode_durable(&longer).is_err());
        let mut fresh = Vec::new();
        PaxosNode::encode_durable(&PaxosDurable::default(), &mut fresh);
        assert_eq!(
            PaxosNode::decode_durable(&fresh).unwrap(),
            PaxosDurable::default()
        );
    }
}

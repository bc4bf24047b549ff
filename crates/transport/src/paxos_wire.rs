//! Multi-Paxos's wire form: a kind byte, then little-endian fields. A
//! ballot is its round (`u64`), priority (`u32`) and node (`u64`). The
//! value and entry lists are length-prefixed, and a length that the bytes
//! left cannot hold is refused before anything is allocated.

use bellwether_core::paxos::{Ballot, Entry, PaxosMessage, ACCEPT_VALUES_MAX};
use bellwether_core::NodeId;
use bellwether_storage::codec::{put_u32, put_u64, put_u8, Malformed, Reader};

const PREPARE: u8 = 1;
const PROMISE: u8 = 2;
const ACCEPT: u8 = 3;
const ACCEPTED: u8 = 4;
const REJECT: u8 = 5;
/// Bytes of one ballot on the wire.
pub const BALLOT_BYTES: usize = 8 + 4 + 8;
/// Bytes of one `(slot, entry)` on the wire.
const ENTRY_BYTES: usize = 8 + BALLOT_BYTES + 8;

/// Appends a ballot's binary form (also the elector's state file's).
pub fn put_ballot(out: &mut Vec<u8>, ballot: Ballot) {
    put_u64(out, ballot.round);
    put_u32(out, ballot.priority);
    put_u64(out, ballot.node.0);
}

/// Reads a ballot written by [`put_ballot`].
pub fn ballot(r: &mut Reader<'_>, what: &str) -> Result<Ballot, Malformed> {
    Ok(Ballot {
        round: r.u64(what)?,
        priority: r.u32(what)?,
        node: NodeId(r.u64(what)?),
    })
}

/// A count of items of `item_bytes` each, refused when the bytes left
/// cannot hold them (so a forged count allocates nothing) or above `max`.
fn count(
    r: &mut Reader<'_>,
    item_bytes: usize,
    max: usize,
    what: &str,
) -> Result<usize, Malformed> {
    let count = r.u32(what)? as usize;
    if count > max || count.saturating_mul(item_bytes) > r.remaining() {
        return Err(Malformed(format!(
            "{what}: {count} items do not fit in {} bytes (limit {max})",
            r.remaining()
        )));
    }
    Ok(count)
}

impl crate::WireMessage for PaxosMessage {
    fn kind(&self) -> &'static str {
        bellwether_core::Message::kind(self)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            PaxosMessage::Prepare { ballot, from_slot } => {
                put_u8(out, PREPARE);
                put_ballot(out, *ballot);
                put_u64(out, *from_slot);
            }
            PaxosMessage::Promise { ballot, entries } => {
                put_u8(out, PROMISE);
                put_ballot(out, *ballot);
                put_u32(
                    out,
                    u32::try_from(entries.len()).expect("entries fit a u32"),
                );
                for (slot, entry) in entries {
                    put_u64(out, *slot);
                    put_ballot(out, entry.ballot);
                    put_u64(out, entry.value);
                }
            }
            PaxosMessage::Accept {
                ballot,
                first_slot,
                values,
                commit,
                sent_tick,
            } => {
                assert!(values.len() <= ACCEPT_VALUES_MAX, "oversized Accept");
                put_u8(out, ACCEPT);
                put_ballot(out, *ballot);
                put_u64(out, *first_slot);
                put_u64(out, *commit);
                put_u64(out, *sent_tick);
                put_u32(out, values.len() as u32);
                for value in values {
                    put_u64(out, *value);
                }
            }
            PaxosMessage::Accepted {
                ballot,
                through_slot,
                sent_tick,
            } => {
                put_u8(out, ACCEPTED);
                put_ballot(out, *ballot);
                put_u64(out, *through_slot);
                put_u64(out, *sent_tick);
            }
            PaxosMessage::Reject { ballot, promised } => {
                put_u8(out, REJECT);
                put_ballot(out, *ballot);
                put_ballot(out, *promised);
            }
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(bytes);
        let kind = r.u8("message kind")?;
        let message = match kind {
            PREPARE => PaxosMessage::Prepare {
                ballot: ballot(&mut r, "prepare")?,
                from_slot: r.u64("prepare")?,
            },
            PROMISE => {
                let ballot = ballot(&mut r, "promise")?;
                let count = count(&mut r, ENTRY_BYTES, usize::MAX, "promise entries")?;
                let mut entries = Vec::with_capacity(count);
                for _ in 0..count {
                    let slot = r.u64("promise entry")?;
                    let entry = Entry {
                        ballot: self::ballot(&mut r, "promise entry")?,
                        value: r.u64("promise entry")?,
                    };
                    entries.push((slot, entry));
                }
                PaxosMessage::Promise { ballot, entries }
            }
            ACCEPT => {
                let ballot = ballot(&mut r, "accept")?;
                let first_slot = r.u64("accept")?;
                let commit = r.u64("accept")?;
                let sent_tick = r.u64("accept")?;
                let count = count(&mut r, 8, ACCEPT_VALUES_MAX, "accept values")?;
                let values = (0..count)
                    .map(|_| r.u64("accept value"))
                    .collect::<Result<_, _>>()?;
                PaxosMessage::Accept {
                    ballot,
                    first_slot,
                    values,
                    commit,
                    sent_tick,
                }
            }
            ACCEPTED => PaxosMessage::Accepted {
                ballot: ballot(&mut r, "accepted")?,
                through_slot: r.u64("accepted")?,
                sent_tick: r.u64("accepted")?,
            },
            REJECT => PaxosMessage::Reject {
                ballot: ballot(&mut r, "reject")?,
                promised: ballot(&mut r, "reject")?,
            },
            other => return Err(Malformed(format!("unknown paxos message kind {other}"))),
        };
        r.finish("paxos message")?;
        Ok(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireMessage;

    fn ballot(round: u64) -> Ballot {
        Ballot {
            round,
            priority: 3,
            node: NodeId(2),
        }
    }

    #[test]
    fn every_message_round_trips_and_garbage_is_refused() {
        let entry = Entry {
            ballot: ballot(4),
            value: u64::MAX,
        };
        let messages = [
            PaxosMessage::Prepare {
                ballot: ballot(5),
                from_slot: 9,
            },
            PaxosMessage::Promise {
                ballot: ballot(5),
                entries: vec![(9, entry), (10, entry)],
            },
            PaxosMessage::Promise {
                ballot: ballot(5),
                entries: Vec::new(),
            },
            PaxosMessage::Accept {
                ballot: ballot(5),
                first_slot: 9,
                values: vec![1, 2, 3],
                commit: 8,
                sent_tick: 77,
            },
            PaxosMessage::Accepted {
                ballot: ballot(5),
                through_slot: 11,
                sent_tick: 77,
            },
            PaxosMessage::Reject {
                ballot: ballot(5),
                promised: ballot(6),
            },
        ];
        for message in messages {
            let mut bytes = Vec::new();
            message.encode(&mut bytes);
            assert_eq!(PaxosMessage::decode(&bytes).unwrap(), message);
            assert!(PaxosMessage::decode(&bytes[..bytes.len() - 1]).is_err());
            bytes.push(0);
            assert!(PaxosMessage::decode(&bytes).is_err(), "trailing byte");
        }
        assert!(PaxosMessage::decode(&[]).is_err());
        assert!(PaxosMessage::decode(&[9]).is_err());
    }

    #[test]
    fn a_forged_count_is_refused_before_allocating() {
        let mut bytes = vec![PROMISE];
        put_ballot(&mut bytes, ballot(1));
        put_u32(&mut bytes, u32::MAX);
        let error = PaxosMessage::decode(&bytes).unwrap_err();
        assert!(error.0.contains("do not fit"), "{error:?}");
        let mut bytes = vec![ACCEPT];
        put_ballot(&mut bytes, ballot(1));
        for _ in 0..3 {
            put_u64(&mut bytes, 1);
        }
        put_u32(&mut bytes, (ACCEPT_VALUES_MAX + 1) as u32);
        bytes.extend(std::iter::repeat_n(0, 8 * (ACCEPT_VALUES_MAX + 1)));
        assert!(
            PaxosMessage::decode(&bytes).is_err(),
            "over the value limit"
        );
    }
}

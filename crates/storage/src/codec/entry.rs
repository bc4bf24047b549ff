//! Encoding of log entries, their payloads and cluster configurations.
//!
//! A batch of contiguous entries is stored as its first index, a count, and
//! then per entry only the term and the payload: indexes are implicit, which
//! both saves 8 bytes per entry and makes a gap inside a batch impossible to
//! write.
//!
//! ```text
//! batch      = first_index:u64 count:u32 entry*count
//! entry      = term:u64 tag:u8 body
//! body       = (tag 1, Noop)       nothing
//!            | (tag 2, Command)    len:u32 bytes
//!            | (tag 3, Membership) config
//! config     = voters:u32 node_id:u64*voters learners:u32 node_id:u64*learners
//! ```

use super::{put_len, put_u32, put_u64, put_u8, Malformed, Reader};
use bellwether_core::raft::{ClusterConfig, Entry, Payload};
use bellwether_core::{LogIndex, NodeId, Term};
use std::collections::BTreeSet;

/// Bytes of the batch prefix: first index and count.
pub const ENTRIES_HEADER_BYTES: usize = 8 + 4;

/// Fixed bytes of every entry: term and payload tag.
const ENTRY_FIXED_BYTES: usize = 8 + 1;

/// Upper bound on the members of one configuration when decoding, so that a
/// malformed count cannot make the decoder allocate without bound. Far above
/// any real cluster.
const CONFIG_MEMBERS_MAX: usize = 1 << 16;

/// Payload tags. Zero is never written, so a zeroed region never decodes.
const TAG_NOOP: u8 = 1;
const TAG_COMMAND: u8 = 2;
const TAG_MEMBERSHIP: u8 = 3;

/// Bytes `entry` takes inside a batch.
pub fn entry_encoded_bytes(entry: &Entry) -> usize {
    ENTRY_FIXED_BYTES
        + match &entry.payload {
            Payload::Noop => 0,
            Payload::Command(data) => 4 + data.len(),
            Payload::Membership(config) => config_encoded_bytes(config),
        }
}

fn config_encoded_bytes(config: &ClusterConfig) -> usize {
    4 + 8 * config.voters.len() + 4 + 8 * config.learners.len()
}

/// Appends the batch encoding of `entries`, which must be contiguous.
pub fn encode_entries(buffer: &mut Vec<u8>, entries: &[Entry]) {
    assert!(!entries.is_empty(), "a batch holds at least one entry");
    let count = u32::try_from(entries.len()).expect("a record holds fewer than 2^32 entries");
    put_u64(buffer, entries[0].index.0);
    put_u32(buffer, count);
    for (offset, entry) in entries.iter().enumerate() {
        assert_eq!(
            entry.index.0,
            entries[0].index.0 + offset as u64,
            "a batch must be contiguous"
        );
        put_u64(buffer, entry.term.0);
        match &entry.payload {
            Payload::Noop => put_u8(buffer, TAG_NOOP),
            Payload::Command(data) => {
                put_u8(buffer, TAG_COMMAND);
                put_len(buffer, data.len());
                buffer.extend_from_slice(data);
            }
            Payload::Membership(config) => {
                put_u8(buffer, TAG_MEMBERSHIP);
                encode_config(buffer, config);
            }
        }
    }
}

/// Appends the encoding of a cluster configuration.
pub fn encode_config(buffer: &mut Vec<u8>, config: &ClusterConfig) {
    for set in [&config.voters, &config.learners] {
        put_len(buffer, set.len());
        for id in set {
            put_u64(buffer, id.0);
        }
    }
}

/// Decodes a whole batch payload into entries.
pub fn decode_entries(payload: &[u8]) -> Result<Vec<Entry>, Malformed> {
    let mut reader = Reader::new(payload);
    let first_index = reader.u64("first index")?;
    let count = reader.u32("entry count")? as usize;
    if first_index == 0 {
        return Err(Malformed("entry batch starts at index 0".into()));
    }
    if count == 0 || count > reader.remaining() / ENTRY_FIXED_BYTES {
        return Err(Malformed(format!(
            "entry count {count} does not fit the payload"
        )));
    }
    let mut entries = Vec::with_capacity(count);
    for offset in 0..count as u64 {
        let index = first_index
            .checked_add(offset)
            .ok_or_else(|| Malformed("entry index overflows".into()))?;
        let term = Term(reader.u64("entry term")?);
        let payload = decode_payload(&mut reader)?;
        entries.push(Entry {
            term,
            index: LogIndex(index),
            payload,
        });
    }
    reader.finish("entry batch")?;
    Ok(entries)
}

fn decode_payload(reader: &mut Reader<'_>) -> Result<Payload, Malformed> {
    match reader.u8("payload tag")? {
        TAG_NOOP => Ok(Payload::Noop),
        TAG_COMMAND => {
            let len = reader.u32("command length")? as usize;
            Ok(Payload::Command(reader.take(len, "command")?.to_vec()))
        }
        TAG_MEMBERSHIP => Ok(Payload::Membership(decode_config(reader)?)),
        tag => Err(Malformed(format!("unknown payload tag {tag}"))),
    }
}

/// Decodes a cluster configuration.
pub fn decode_config(reader: &mut Reader<'_>) -> Result<ClusterConfig, Malformed> {
    let voters = decode_member_set(reader, "voters")?;
    let learners = decode_member_set(reader, "learners")?;
    Ok(ClusterConfig { voters, learners })
}

fn decode_member_set(reader: &mut Reader<'_>, what: &str) -> Result<BTreeSet<NodeId>, Malformed> {
    let count = reader.u32(what)? as usize;
    if count > CONFIG_MEMBERS_MAX || count > reader.remaining() / 8 {
        return Err(Malformed(format!("{what}: count {count} does not fit")));
    }
    let mut set = BTreeSet::new();
    for _ in 0..count {
        let id = NodeId(reader.u64(what)?);
        // Written in ascending order without duplicates; anything else was
        // not written by this encoder.
        if set.last().is_some_and(|last| *last >= id) {
            return Err(Malformed(format!("{what}: ids not strictly ascending")));
        }
        set.insert(id);
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Entry> {
        vec![
            Entry {
                term: Term(3),
                index: LogIndex(7),
                payload: Payload::Noop,
            },
            Entry {
                term: Term(3),
                index: LogIndex(8),
                payload: Payload::Command(b"set x=1".to_vec()),
            },
            Entry {
                term: Term(4),
                index: LogIndex(9),
                payload: Payload::Membership(ClusterConfig {
                    voters: [NodeId(1), NodeId(2), NodeId(3)].into(),
                    learners: [NodeId(9)].into(),
                }),
            },
            Entry {
                term: Term(4),
                index: LogIndex(10),
                payload: Payload::Command(Vec::new()),
            },
        ]
    }

    #[test]
    fn batch_round_trips_and_sizes_are_exact() {
        let entries = sample();
        let mut buffer = Vec::new();
        encode_entries(&mut buffer, &entries);
        let expected: usize =
            ENTRIES_HEADER_BYTES + entries.iter().map(entry_encoded_bytes).sum::<usize>();
        assert_eq!(buffer.len(), expected, "size prediction drives rotation");
        assert_eq!(decode_entries(&buffer), Ok(entries));
    }

    #[test]
    fn layout_is_little_endian_and_stable() {
        let mut buffer = Vec::new();
        encode_entries(&mut buffer, &sample()[..1]);
        assert_eq!(
            buffer,
            [7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, TAG_NOOP]
        );
    }

    #[test]
    fn malformed_batches_are_reported_not_panicked_on() {
        let mut buffer = Vec::new();
        encode_entries(&mut buffer, &sample());
        for cut in 0..buffer.len() {
            assert!(decode_entries(&buffer[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_tag = Vec::new();
        encode_entries(&mut bad_tag, &sample()[..1]);
        *bad_tag.last_mut().unwrap() = 0;
        assert!(decode_entries(&bad_tag).unwrap_err().0.contains("tag 0"));
        let mut huge_count = buffer.clone();
        huge_count[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_entries(&huge_count).is_err());
    }
}

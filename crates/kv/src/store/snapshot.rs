//! Snapshots of the whole store, for Raft log compaction and for bringing a
//! lagging replica up to date.
//!
//! The encoding (see `codec.rs`) is versioned by [`SNAPSHOT_VERSION`] after
//! a magic tag. It holds the revisions, every key's retained history, the
//! leases and the event log, so a restored replica serves the same reads and
//! the same watches as the one that took the snapshot. A lease's key set is
//! not stored: it is rebuilt from the keys' lease fields, and the two are
//! checked to agree.

use super::KvStore;
use crate::codec::{Decoder, Encoder};
use crate::event_log::{EventLog, RevisionEvents};
use crate::key_history::{KeyHistory, KeyRevision};
use crate::{Event, EventKind, KeyValue, KvError, Lease};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Identifies a bellwether kv snapshot.
const SNAPSHOT_MAGIC: &[u8; 4] = b"BWKV";

/// The encoding version this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;

impl KvStore {
    /// Encodes the whole store.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Encoder::default();
        out.bytes.extend_from_slice(SNAPSHOT_MAGIC);
        out.u32(SNAPSHOT_VERSION);
        out.i64(self.revision);
        out.i64(self.compact_revision);
        out.count(self.keys.len());
        for (key, history) in &self.keys {
            out.bytes(key);
            out.count(history.revisions.len());
            for entry in &history.revisions {
                out.i64(entry.revision);
                encode_optional_kv(&mut out, entry.kv.as_deref());
            }
        }
        out.count(self.leases.len());
        for lease in self.leases.values() {
            out.i64(lease.id);
            out.i64(lease.ttl_seconds);
        }
        encode_events(&mut out, &self.events);
        out.bytes
    }

    /// Decodes a store from [`snapshot`](Self::snapshot)'s output.
    pub fn restore(bytes: &[u8]) -> Result<KvStore, KvError> {
        let mut input = Decoder::new(bytes);
        if bytes.get(..4) != Some(SNAPSHOT_MAGIC.as_slice()) {
            return Err(input.corrupt("missing snapshot magic"));
        }
        for _ in 0..4 {
            input.u8()?;
        }
        let version = input.u32()?;
        if version != SNAPSHOT_VERSION {
            return Err(KvError::SnapshotVersion {
                version,
                expected: SNAPSHOT_VERSION,
            });
        }
        let revision = input.i64()?;
        let compact_revision = input.i64()?;
        if revision < super::REVISION_INITIAL || !(0..=revision).contains(&compact_revision) {
            return Err(input.corrupt("revisions out of order"));
        }
        let keys = decode_keys(&mut input, revision)?;
        let leases = decode_leases(&mut input, &keys)?;
        let events = decode_events(&mut input, revision)?;
        if !input.is_done() {
            return Err(input.corrupt("trailing bytes"));
        }
        Ok(KvStore {
            revision,
            compact_revision,
            keys,
            leases,
            events,
        })
    }
}

/// Decodes every key's history.
fn decode_keys(
    input: &mut Decoder,
    revision: i64,
) -> Result<BTreeMap<Vec<u8>, KeyHistory>, KvError> {
    let mut keys = BTreeMap::new();
    for _ in 0..input.count(5)? {
        let key = input.bytes()?;
        let mut history = KeyHistory::default();
        for _ in 0..input.count(9)? {
            let entry_revision = input.i64()?;
            let kv = decode_optional_kv(input)?;
            let ordered = history
                .revisions
                .last()
                .is_none_or(|last| last.revision < entry_revision);
            let consistent = kv
                .as_ref()
                .is_none_or(|kv| kv.key == key && kv.mod_revision == entry_revision);
            if !ordered || !consistent || entry_revision > revision {
                return Err(input.corrupt("inconsistent key history"));
            }
            history.revisions.push(KeyRevision {
                revision: entry_revision,
                kv: kv.map(Arc::new),
            });
        }
        if history.revisions.is_empty() || keys.insert(key, history).is_some() {
            return Err(input.corrupt("empty or duplicate key history"));
        }
    }
    Ok(keys)
}

/// Decodes the leases and reattaches their keys.
fn decode_leases(
    input: &mut Decoder,
    keys: &BTreeMap<Vec<u8>, KeyHistory>,
) -> Result<BTreeMap<i64, Lease>, KvError> {
    let mut leases = BTreeMap::new();
    for _ in 0..input.count(16)? {
        let id = input.i64()?;
        let ttl_seconds = input.i64()?;
        if id == 0
            || leases
                .insert(
                    id,
                    Lease {
                        id,
                        ttl_seconds,
                        keys: BTreeSet::new(),
                    },
                )
                .is_some()
        {
            return Err(input.corrupt("zero or duplicate lease id"));
        }
    }
    for kv in keys
        .values()
        .filter_map(KeyHistory::latest)
        .filter(|kv| kv.lease != 0)
    {
        let Some(lease) = leases.get_mut(&kv.lease) else {
            return Err(input.corrupt("key attached to a missing lease"));
        };
        lease.keys.insert(kv.key.clone());
    }
    Ok(leases)
}

/// Encodes the event log.
fn encode_events(out: &mut Encoder, log: &EventLog) {
    out.i64(log.first_revision);
    out.count(log.revisions.len());
    for entry in &log.revisions {
        out.i64(entry.revision);
        out.count(entry.events.len());
        for event in &entry.events {
            out.u8(match event.kind {
                EventKind::Put => 0,
                EventKind::Delete => 1,
            });
            encode_kv(out, &event.kv);
            encode_optional_kv(out, event.prev_kv.as_deref());
        }
    }
}

/// Decodes the event log.
fn decode_events(input: &mut Decoder, revision: i64) -> Result<EventLog, KvError> {
    let first_revision = input.i64()?;
    let mut log = EventLog::new(first_revision);
    for _ in 0..input.count(12)? {
        let entry_revision = input.i64()?;
        let mut events = Vec::new();
        for _ in 0..input.count(2)? {
            let kind = match input.u8()? {
                0 => EventKind::Put,
                1 => EventKind::Delete,
                _ => return Err(input.corrupt("unknown event kind")),
            };
            let kv = decode_kv(input)?;
            let prev_kv = decode_optional_kv(input)?;
            events.push(Event::new(kind, kv, prev_kv));
        }
        let ordered = log
            .revisions
            .back()
            .is_none_or(|last| last.revision < entry_revision);
        let in_range = entry_revision >= first_revision && entry_revision <= revision;
        let matching = !events.is_empty()
            && events
                .iter()
                .all(|event| event.revision() == entry_revision);
        if !ordered || !in_range || !matching {
            return Err(input.corrupt("inconsistent event log"));
        }
        log.events_count += events.len();
        log.revisions.push_back(RevisionEvents {
            revision: entry_revision,
            events,
        });
    }
    Ok(log)
}

/// Encodes a key state.
fn encode_kv(out: &mut Encoder, kv: &KeyValue) {
    out.bytes(&kv.key);
    out.i64(kv.create_revision);
    out.i64(kv.mod_revision);
    out.i64(kv.version);
    out.bytes(&kv.value);
    out.i64(kv.lease);
}

/// Decodes a key state.
fn decode_kv(input: &mut Decoder) -> Result<KeyValue, KvError> {
    Ok(KeyValue {
        key: input.bytes()?,
        create_revision: input.i64()?,
        mod_revision: input.i64()?,
        version: input.i64()?,
        value: input.bytes()?,
        lease: input.i64()?,
    })
}

/// Encodes an optional key state behind a presence byte.
fn encode_optional_kv(out: &mut Encoder, kv: Option<&KeyValue>) {
    match kv {
        Some(kv) => {
            out.u8(1);
            encode_kv(out, kv);
        }
        None => out.u8(0),
    }
}

/// Decodes an optional key state behind a presence byte.
fn decode_optional_kv(input: &mut Decoder) -> Result<Option<KeyValue>, KvError> {
    match input.u8()? {
        0 => Ok(None),
        1 => Ok(Some(decode_kv(input)?)),
        _ => Err(input.corrupt("invalid presence byte")),
    }
}

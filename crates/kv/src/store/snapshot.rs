//! Snapshots of the whole store, for Raft log compaction and for bringing a
//! lagging replica up to date.
//!
//! The encoding (see `codec.rs`) is versioned by [`SNAPSHOT_VERSION`] after
//! a magic tag. It holds the revisions, every key's retained history, the
//! leases and the event log, so a restored replica serves the same reads and
//! the same watches as the one that took the snapshot. A lease's key set is
//! not stored: it is rebuilt from the keys' lease fields, and the two are
//! checked to agree.
//!
//! Version 2 stores the event log by reference to the key histories
//! (`snapshot_events.rs`), about a third of version 1's size under a steady
//! write load. This build reads both; a build before it reads only version
//! 1 (and stops on a version 2 snapshot from a leader), so members are
//! upgraded together.

use super::snapshot_events;
use super::KvStore;
use crate::codec::{Decoder, Encoder};
use crate::key_history::{KeyHistory, KeyRevision};
use crate::{KeyValue, KvError, Lease, LeaseKeys};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Identifies a bellwether kv snapshot.
const SNAPSHOT_MAGIC: &[u8; 4] = b"BWKV";

/// The encoding version this build writes. Version 2 stores the event log
/// by reference to the key histories (see `snapshot_events.rs`).
pub const SNAPSHOT_VERSION: u32 = 2;

/// The oldest version this build still reads (snapshots on disk from
/// earlier builds).
const SNAPSHOT_VERSION_OLDEST_READ: u32 = 1;

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
        for (id, lease) in &self.leases {
            out.i64(*id);
            out.i64(lease.ttl_seconds);
        }
        snapshot_events::encode_events(&mut out, &self.events, &self.keys);
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
        if !(SNAPSHOT_VERSION_OLDEST_READ..=SNAPSHOT_VERSION).contains(&version) {
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
        let events = snapshot_events::decode_events(&mut input, revision, version, &keys)?;
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
                        ttl_seconds,
                        keys: LeaseKeys::default(),
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

/// Encodes a key state.
pub(super) fn encode_kv(out: &mut Encoder, kv: &KeyValue) {
    out.bytes(&kv.key);
    out.i64(kv.create_revision);
    out.i64(kv.mod_revision);
    out.i64(kv.version);
    out.bytes(&kv.value);
    out.i64(kv.lease);
}

/// Decodes a key state.
pub(super) fn decode_kv(input: &mut Decoder) -> Result<KeyValue, KvError> {
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
pub(super) fn encode_optional_kv(out: &mut Encoder, kv: Option<&KeyValue>) {
    match kv {
        Some(kv) => {
            out.u8(1);
            encode_kv(out, kv);
        }
        None => out.u8(0),
    }
}

/// Decodes an optional key state behind a presence byte.
pub(super) fn decode_optional_kv(input: &mut Decoder) -> Result<Option<KeyValue>, KvError> {
    match input.u8()? {
        0 => Ok(None),
        1 => Ok(Some(decode_kv(input)?)),
        _ => Err(input.corrupt("invalid presence byte")),
    }
}

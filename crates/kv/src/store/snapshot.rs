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
//! write load. Version 3 stores the leases as varints: each id as its
//! distance from the previous one (ids come from per-member counters, so
//! mostly 1) and the TTL, about 2 bytes a lease where 16 were. That matters
//! beyond the disk: a member holds its latest snapshot in memory for
//! lagging followers, builds the next one beside it, and keeps as much log
//! as the snapshot's size, so with a million leases version 2 cost about 50
//! bytes of memory a lease. This build reads all three; a build before it
//! stops on a newer snapshot from a leader, so members are upgraded
//! together.
//!
//! Version 4 adds the raised alarms at the end (see [`crate::alarm`]);
//! version 5 adds the member directory after them (see [`crate::member`]);
//! version 6 adds users, roles and permissions last (see [`crate::auth`]);
//! version 7 adds the name each member published after its URLs;
//! version 8 adds each member's ZooKeeper addresses after its name.

use super::compaction_queue::CompactionQueue;
use super::snapshot_events;
use super::KvStore;
use crate::codec::{Decoder, Encoder};
use crate::event_log::EventLog;
use crate::key_history::{KeyHistory, KeyMap, KeyRevision};
use crate::{
    Alarm, AlarmKind, AuthState, IdMap, KeyValue, KvError, Lease, MemberIntent, MemberRecord,
    LEASE_TTL_SECONDS_MAX, LEASE_TTL_SECONDS_MIN, MEMBER_RECORDS_MAX,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Identifies a bellwether kv snapshot.
const SNAPSHOT_MAGIC: &[u8; 4] = b"BWKV";

/// The encoding version this build writes: version 2 stores the event log
/// by reference to the key histories (see `snapshot_events.rs`), version 3
/// also stores the leases as varints (see the module docs).
pub const SNAPSHOT_VERSION: u32 = 8;

/// The first version that stores leases as varints (see the module docs).
pub(super) const SNAPSHOT_VERSION_VARINT_LEASES: u32 = 3;

/// The first version that stores the alarms.
const SNAPSHOT_VERSION_ALARMS: u32 = 4;

/// The first version that stores the member directory.
const SNAPSHOT_VERSION_MEMBERS: u32 = 5;

/// The first version that stores users, roles and permissions.
const SNAPSHOT_VERSION_AUTH: u32 = 6;

/// The first version that stores the names members published.
const SNAPSHOT_VERSION_MEMBER_NAMES: u32 = 7;

/// The first version that stores the members' ZooKeeper addresses.
const SNAPSHOT_VERSION_MEMBER_ZOOKEEPER: u32 = 8;

/// Most alarms a snapshot may hold: one per kind per member, and members
/// are far fewer than this.
const ALARMS_MAX: usize = 1 << 16;

/// The oldest version this build still reads (snapshots on disk from
/// earlier builds).
const SNAPSHOT_VERSION_OLDEST_READ: u32 = 1;

/// A snapshot taken but not yet encoded: the parts that grow with the
/// store are clones that share their nodes with it (the keys' [`KeyMap`],
/// the leases' [`IdMap`] pages), so taking one on the member's loop costs
/// a few pointers and a copy of the recent events, whatever the store
/// holds. [`encode`](Self::encode), which walks every key (about a third
/// of a second for a million), runs wherever the caller likes, off the
/// loop; writes to the store meanwhile copy only the nodes they touch.
#[derive(Debug)]
pub struct PendingSnapshot {
    /// The store's revision when taken.
    revision: i64,
    /// Its compact revision.
    compact_revision: i64,
    /// Every key's history.
    keys: KeyMap,
    /// The leases.
    leases: IdMap<Lease>,
    /// The event log.
    events: EventLog,
    /// The alarms, members and auth, encoded: small, so encoded when taken.
    tail: Vec<u8>,
}

impl PendingSnapshot {
    /// The snapshot's bytes: the same as [`KvStore::snapshot`] would have
    /// given when this was taken.
    pub fn encode(self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.encode_to(&mut bytes)
            .expect("writing to memory does not fail");
        bytes
    }

    /// Streams the snapshot's bytes into `out` (a file, say) as they are
    /// encoded, [`STREAM_CHUNK_BYTES`] at a time, so no image of the whole
    /// store is assembled in memory.
    pub fn encode_to(self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut buffer = Encoder::default();
        encode_head(
            &mut buffer,
            SNAPSHOT_VERSION,
            self.revision,
            self.compact_revision,
            self.keys.len(),
        );
        for (key, history) in &self.keys {
            encode_key(&mut buffer, key, history);
            if buffer.bytes.len() >= STREAM_CHUNK_BYTES {
                out.write_all(&buffer.bytes)?;
                buffer.bytes.clear();
            }
        }
        encode_leases(&mut buffer, &self.leases);
        snapshot_events::encode_events(&mut buffer, &self.events, &self.keys);
        buffer.bytes.extend_from_slice(&self.tail);
        out.write_all(&buffer.bytes)
    }
}

/// How much [`PendingSnapshot::encode_to`] encodes before it writes.
pub const STREAM_CHUNK_BYTES: usize = 1 << 20;

impl KvStore {
    /// Encodes the whole store.
    pub fn snapshot(&self) -> Vec<u8> {
        self.snapshot_pending().encode()
    }

    /// Takes a snapshot to encode later (see [`PendingSnapshot`]).
    pub fn snapshot_pending(&self) -> PendingSnapshot {
        let mut out = Encoder::default();
        out.count(self.alarms.len());
        for alarm in &self.alarms {
            out.varint(alarm.member_id);
            out.u8(u8::try_from(alarm.kind.number()).expect("alarm numbers are small"));
        }
        out.varint(self.next_member_id);
        out.count(self.members.len());
        for member in self.members.values() {
            out.varint(member.id);
            out.u8(member.intent.number());
            for urls in [&member.peer_urls, &member.client_urls] {
                out.count(urls.len());
                for url in urls {
                    out.bytes(url.as_bytes());
                }
            }
            out.bytes(member.name.as_bytes());
            out.count(member.zookeeper_urls.len());
            for url in &member.zookeeper_urls {
                out.bytes(url.as_bytes());
            }
        }
        self.auth.encode(&mut out);
        PendingSnapshot {
            revision: self.revision,
            compact_revision: self.compact_revision,
            keys: self.keys.clone(),
            leases: self.leases.clone(),
            events: self.events.clone(),
            tail: out.bytes,
        }
    }

    /// Encodes what every version starts with (see
    /// [`encode_head_and_keys`]), for the tests that write older versions.
    #[cfg(test)]
    pub(super) fn encode_head_and_keys(&self, out: &mut Encoder, version: u32) {
        encode_head_and_keys(
            out,
            version,
            self.revision,
            self.compact_revision,
            &self.keys,
        );
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
        let leases = decode_leases(&mut input, version)?;
        let lease_keys = attach_lease_keys(&input, &keys, &leases)?;
        let events = snapshot_events::decode_events(&mut input, revision, version, &keys)?;
        let alarms = if version >= SNAPSHOT_VERSION_ALARMS {
            decode_alarms(&mut input)?
        } else {
            BTreeSet::new()
        };
        let (next_member_id, members) = if version >= SNAPSHOT_VERSION_MEMBERS {
            decode_members(&mut input, version)?
        } else {
            (1, BTreeMap::new())
        };
        let auth = if version >= SNAPSHOT_VERSION_AUTH {
            AuthState::decode(&mut input)?
        } else {
            AuthState::default()
        };
        if !input.is_done() {
            return Err(input.corrupt("trailing bytes"));
        }
        let mut store = KvStore {
            revision,
            compact_revision,
            to_compact: CompactionQueue::of(&keys),
            keys,
            leases,
            lease_keys,
            events,
            alarms,
            members,
            next_member_id,
            auth,
            size_bytes: 0,
        };
        store.size_bytes = store.count_size_bytes();
        Ok(store)
    }
}

/// Encodes what every version starts with: the magic, `version`, the
/// revisions and every key's history.
#[cfg(test)]
fn encode_head_and_keys(
    out: &mut Encoder,
    version: u32,
    revision: i64,
    compact_revision: i64,
    keys: &KeyMap,
) {
    encode_head(out, version, revision, compact_revision, keys.len());
    for (key, history) in keys {
        encode_key(out, key, history);
    }
}

/// The magic, `version`, the revisions and the count of keys.
fn encode_head(out: &mut Encoder, version: u32, revision: i64, compact_revision: i64, keys: usize) {
    out.bytes.extend_from_slice(SNAPSHOT_MAGIC);
    out.u32(version);
    out.i64(revision);
    out.i64(compact_revision);
    out.count(keys);
}

/// One key's history.
fn encode_key(out: &mut Encoder, key: &[u8], history: &KeyHistory) {
    out.bytes(key);
    out.count(history.revisions.len());
    for entry in &history.revisions {
        out.i64(entry.revision);
        encode_optional_kv(out, entry.kv.as_deref());
    }
}

/// Decodes the alarms (version 4 on).
fn decode_alarms(input: &mut Decoder) -> Result<BTreeSet<Alarm>, KvError> {
    let count = input.count(2)?;
    if count > ALARMS_MAX {
        return Err(input.corrupt("too many alarms"));
    }
    let mut alarms = BTreeSet::new();
    for _ in 0..count {
        let member_id = input.varint()?;
        let kind = AlarmKind::from_number(i32::from(input.u8()?))
            .ok_or_else(|| input.corrupt("unknown alarm kind"))?;
        if !alarms.insert(Alarm { member_id, kind }) {
            return Err(input.corrupt("an alarm listed twice"));
        }
    }
    Ok(alarms)
}

/// Decodes one of a member's lists of URLs.
fn decode_urls(input: &mut Decoder) -> Result<Vec<String>, KvError> {
    let mut urls = Vec::new();
    for _ in 0..input.count(1)? {
        let url = String::from_utf8(input.bytes()?)
            .map_err(|_| input.corrupt("a member URL that is not UTF-8"))?;
        urls.push(url);
    }
    Ok(urls)
}

/// Decodes the member directory (version 5 on).
fn decode_members(
    input: &mut Decoder,
    version: u32,
) -> Result<(u64, BTreeMap<u64, MemberRecord>), KvError> {
    let next_member_id = input.varint()?;
    let count = input.count(4)?;
    if count > MEMBER_RECORDS_MAX {
        return Err(input.corrupt("too many member records"));
    }
    let mut members = BTreeMap::new();
    for _ in 0..count {
        let id = input.varint()?;
        let intent = MemberIntent::from_number(input.u8()?)
            .ok_or_else(|| input.corrupt("unknown member intent"))?;
        let peer_urls = decode_urls(input)?;
        let client_urls = decode_urls(input)?;
        let name = if version >= SNAPSHOT_VERSION_MEMBER_NAMES {
            String::from_utf8(input.bytes()?)
                .map_err(|_| input.corrupt("a member name that is not UTF-8"))?
        } else {
            String::new()
        };
        let zookeeper_urls = if version >= SNAPSHOT_VERSION_MEMBER_ZOOKEEPER {
            decode_urls(input)?
        } else {
            Vec::new()
        };
        if id == 0 || id >= next_member_id {
            return Err(input.corrupt("a member id at or above the next one"));
        }
        let record = MemberRecord {
            id,
            peer_urls,
            client_urls,
            name,
            zookeeper_urls,
            intent,
        };
        if members.insert(id, record).is_some() {
            return Err(input.corrupt("a member listed twice"));
        }
    }
    Ok((next_member_id, members))
}

/// Decodes every key's history.
fn decode_keys(input: &mut Decoder, revision: i64) -> Result<KeyMap, KvError> {
    let mut keys = KeyMap::new();
    for _ in 0..input.count(5)? {
        let key = input.bytes()?;
        let writes = input.count(9)?;
        let mut history = KeyHistory::with_capacity(writes);
        for _ in 0..writes {
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

/// Encodes the leases as versions 1 and 2 did: the count, then each id and
/// TTL as eight bytes. Kept for the tests that restore older snapshots.
#[cfg(test)]
pub(super) fn encode_leases_fixed(out: &mut Encoder, leases: &IdMap<Lease>) {
    out.count(leases.len());
    for (id, lease) in leases.iter() {
        out.i64(id);
        out.i64(lease.ttl_seconds);
    }
}

/// Encodes the leases as version 3 does: the count, then per lease (in
/// ascending id order) the first id zigzagged or the distance from the
/// previous id, and the TTL, each as a varint.
pub(super) fn encode_leases(out: &mut Encoder, leases: &IdMap<Lease>) {
    out.count(leases.len());
    let mut previous: Option<i64> = None;
    for (id, lease) in leases.iter() {
        match previous {
            None => out.varint(zigzag(id)),
            Some(previous) => {
                assert!(previous < id, "ids ascend");
                out.varint((id as u64).wrapping_sub(previous as u64));
            }
        }
        previous = Some(id);
        assert!(
            (LEASE_TTL_SECONDS_MIN..=LEASE_TTL_SECONDS_MAX).contains(&lease.ttl_seconds),
            "grants keep TTLs in range"
        );
        out.varint(lease.ttl_seconds as u64);
    }
}

/// Decodes one lease's id and TTL in `version`'s encoding; `previous` is
/// the id decoded before it.
fn decode_lease(
    input: &mut Decoder,
    version: u32,
    previous: Option<i64>,
) -> Result<(i64, i64), KvError> {
    let (id, ttl_seconds) = if version < SNAPSHOT_VERSION_VARINT_LEASES {
        (input.i64()?, input.i64()?)
    } else {
        (decode_lease_id(input, previous)?, input.varint()? as i64)
    };
    // Grants raise and cap the TTL, so a store holds only these; every
    // version is held to them, so a restored store encodes again.
    if !(LEASE_TTL_SECONDS_MIN..=LEASE_TTL_SECONDS_MAX).contains(&ttl_seconds) {
        return Err(input.corrupt("lease TTL out of range"));
    }
    Ok((id, ttl_seconds))
}

/// Decodes a lease id as version 3 stores it.
fn decode_lease_id(input: &mut Decoder, previous: Option<i64>) -> Result<i64, KvError> {
    Ok(match previous {
        None => unzigzag(input.varint()?),
        Some(previous) => {
            let distance = input.varint()?;
            let id = i128::from(previous) + i128::from(distance);
            if distance == 0 || id > i128::from(i64::MAX) {
                return Err(input.corrupt("lease ids out of order"));
            }
            id as i64
        }
    })
}

/// Maps signed to unsigned so that small magnitudes stay small varints.
fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// The inverse of [`zigzag`].
fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// Decodes the leases.
fn decode_leases(input: &mut Decoder, version: u32) -> Result<IdMap<Lease>, KvError> {
    let mut leases = IdMap::new();
    let lease_bytes_min = if version < SNAPSHOT_VERSION_VARINT_LEASES {
        16
    } else {
        2
    };
    let mut previous = None;
    for _ in 0..input.count(lease_bytes_min)? {
        let (id, ttl_seconds) = decode_lease(input, version, previous)?;
        previous = Some(id);
        if id == 0 || leases.insert(id, Lease { ttl_seconds }).is_some() {
            return Err(input.corrupt("zero or duplicate lease id"));
        }
    }
    Ok(leases)
}

/// Rebuilds each lease's key set from the keys' lease fields.
fn attach_lease_keys(
    input: &Decoder,
    keys: &KeyMap,
    leases: &IdMap<Lease>,
) -> Result<BTreeMap<i64, BTreeSet<Vec<u8>>>, KvError> {
    lease_key_sets(keys, leases).map_err(|_| input.corrupt("key attached to a missing lease"))
}

/// Each lease's key set, from the keys' lease fields; a live key on a
/// lease that `leases` lacks is returned as the error.
pub(super) fn lease_key_sets<'k>(
    keys: &'k KeyMap,
    leases: &IdMap<Lease>,
) -> Result<BTreeMap<i64, BTreeSet<Vec<u8>>>, &'k KeyValue> {
    let mut lease_keys: BTreeMap<i64, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for kv in keys
        .values()
        .filter_map(KeyHistory::latest)
        .filter(|kv| kv.lease != 0)
    {
        if !leases.contains_key(kv.lease) {
            return Err(kv);
        }
        lease_keys
            .entry(kv.lease)
            .or_default()
            .insert(kv.key.clone());
    }
    Ok(lease_keys)
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

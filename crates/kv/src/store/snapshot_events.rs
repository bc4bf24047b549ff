//! The event log's part of a kv snapshot.
//!
//! Version 1 stored every event whole: its kv and its prev_kv. Those are
//! almost always states the key histories hold already (a put's kv is the
//! history entry at the event's revision, its prev_kv the entry before), so
//! the events made up about two thirds of a snapshot under a steady write
//! load, and a snapshot is taken, held in memory and sent whole.
//!
//! Version 2 stores each event's kind and key, and then, for its kv and its
//! prev_kv, either "as the history says" or the state itself. The encoder
//! writes "as the history says" only when deriving it from the histories
//! gives exactly the event's state, so decoding reproduces every event
//! whatever compaction kept; the derived states are shared with the
//! histories, as they are in a store that took the writes itself.

use super::snapshot::{decode_kv, decode_optional_kv, encode_kv, encode_optional_kv};
use crate::codec::{Decoder, Encoder};
use crate::event_log::{EventLog, RevisionEvents};
use crate::key_history::{KeyHistory, KeyMap};
use crate::{Event, EventKind, KeyValue, KvError};
use std::sync::Arc;

/// The key histories, by key.
type Histories = KeyMap;

/// Marks a state taken from the key histories.
const DERIVED: u8 = 0;
/// Marks a state stored in place.
const STORED: u8 = 1;

/// Encodes the event log (version 2).
pub(super) fn encode_events(out: &mut Encoder, log: &EventLog, keys: &Histories) {
    encode_log(out, log, |out, revision, event| {
        out.u8(kind_byte(event.kind));
        out.bytes(&event.kv.key);
        let history = keys.get(&event.kv.key);
        let kv = derived_kv(history, event.kind, &event.kv.key, revision);
        if kv.as_deref() == Some(&*event.kv) {
            out.u8(DERIVED);
        } else {
            out.u8(STORED);
            encode_kv(out, &event.kv);
        }
        let prev = derived_prev(history, revision);
        if prev.map(|p| &**p) == event.prev_kv.as_deref() {
            out.u8(DERIVED);
        } else {
            out.u8(STORED);
            encode_optional_kv(out, event.prev_kv.as_deref());
        }
    });
}

/// The log's framing, the same in every version: its first revision, then
/// each revision with its count of events, each event as `event` encodes
/// it (given the event's revision).
fn encode_log(out: &mut Encoder, log: &EventLog, mut event: impl FnMut(&mut Encoder, i64, &Event)) {
    out.i64(log.first_revision);
    out.count(log.revisions.len());
    for entry in &log.revisions {
        out.i64(entry.revision);
        out.count(entry.events.len());
        for one in entry.events.iter() {
            event(out, entry.revision, one);
        }
    }
}

/// Decodes the event log, version 1 (every state stored) or 2 (also
/// version 3's).
pub(super) fn decode_events(
    input: &mut Decoder,
    revision: i64,
    version: u32,
    keys: &Histories,
) -> Result<EventLog, KvError> {
    let first_revision = input.i64()?;
    let mut log = EventLog::new(first_revision);
    for _ in 0..input.count(12)? {
        let entry_revision = input.i64()?;
        let mut events = Vec::new();
        for _ in 0..input.count(2)? {
            let event = if version == 1 {
                decode_event_v1(input)?
            } else {
                decode_event_v2(input, entry_revision, keys)?
            };
            events.push(event);
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
            events: Arc::new(events),
        });
    }
    Ok(log)
}

fn kind_byte(kind: EventKind) -> u8 {
    match kind {
        EventKind::Put => 0,
        EventKind::Delete => 1,
    }
}

fn decode_kind(input: &mut Decoder) -> Result<EventKind, KvError> {
    match input.u8()? {
        0 => Ok(EventKind::Put),
        1 => Ok(EventKind::Delete),
        _ => Err(input.corrupt("unknown event kind")),
    }
}

/// One event as version 1 stored it.
fn decode_event_v1(input: &mut Decoder) -> Result<Event, KvError> {
    let kind = decode_kind(input)?;
    let kv = decode_kv(input)?;
    let prev_kv = decode_optional_kv(input)?;
    Ok(Event::new(kind, kv, prev_kv))
}

/// One event as version 2 stores it.
fn decode_event_v2(input: &mut Decoder, revision: i64, keys: &Histories) -> Result<Event, KvError> {
    let kind = decode_kind(input)?;
    let key = input.bytes()?;
    let history = keys.get(&key);
    let kv = match input.u8()? {
        DERIVED => derived_kv(history, kind, &key, revision)
            .ok_or_else(|| input.corrupt("event state missing from the key's history"))?,
        STORED => Arc::new(decode_kv(input)?),
        _ => return Err(input.corrupt("invalid event state marker")),
    };
    if kv.key != key {
        return Err(input.corrupt("event state of another key"));
    }
    let prev_kv = match input.u8()? {
        DERIVED => derived_prev(history, revision).cloned(),
        STORED => decode_optional_kv(input)?.map(Arc::new),
        _ => return Err(input.corrupt("invalid event state marker")),
    };
    Ok(Event { kind, kv, prev_kv })
}

/// The kv an event at `revision` has if the key's history tells it: for a
/// put, the history's state at exactly that revision; for a delete, the
/// tombstone etcd reports.
fn derived_kv(
    history: Option<&KeyHistory>,
    kind: EventKind,
    key: &[u8],
    revision: i64,
) -> Option<Arc<KeyValue>> {
    match kind {
        EventKind::Put => {
            let revisions = &history?.revisions;
            let at = revisions.partition_point(|entry| entry.revision < revision);
            let entry = revisions
                .get(at)
                .filter(|entry| entry.revision == revision)?;
            entry.kv.clone()
        }
        EventKind::Delete if !key.is_empty() && revision > 0 => {
            Some(Arc::new(KeyValue::tombstone(key.to_vec(), revision)))
        }
        EventKind::Delete => None,
    }
}

/// The prev_kv an event at `revision` has if the key's history tells it:
/// the newest state the history holds before that revision (none when the
/// history holds nothing before it, or a delete).
fn derived_prev(history: Option<&KeyHistory>, revision: i64) -> Option<&Arc<KeyValue>> {
    let history = history?;
    let before = history
        .revisions
        .partition_point(|entry| entry.revision < revision);
    history.revisions[..before].last()?.kv.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::snapshot::{encode_leases, encode_leases_fixed};
    use crate::{DeleteRangeRequest, KeyRange, KvStore, PutRequest};

    /// The event log as version 1 stored it.
    fn encode_events_v1(out: &mut Encoder, log: &EventLog) {
        encode_log(out, log, |out, _, event| {
            out.u8(kind_byte(event.kind));
            encode_kv(out, &event.kv);
            encode_optional_kv(out, event.prev_kv.as_deref());
        });
    }

    /// `store`'s snapshot as version 1 wrote it: the same keys, the
    /// leases in eight-byte fields, then every event whole.
    fn snapshot_v1(store: &KvStore) -> Vec<u8> {
        let mut out = Encoder::default();
        store.encode_head_and_keys(&mut out, 1);
        encode_leases_fixed(&mut out, &store.leases);
        encode_events_v1(&mut out, &store.events);
        out.bytes
    }

    /// `store`'s snapshot as version 2 wrote it: version 3's keys and
    /// events, the leases in eight-byte fields.
    fn snapshot_v2(store: &KvStore) -> Vec<u8> {
        let mut out = Encoder::default();
        store.encode_head_and_keys(&mut out, 2);
        encode_leases_fixed(&mut out, &store.leases);
        encode_events(&mut out, &store.events, &store.keys);
        out.bytes
    }

    /// `store`'s snapshot as version 3 wrote it: version 4 without the
    /// alarms.
    fn snapshot_v3(store: &KvStore) -> Vec<u8> {
        let mut out = Encoder::default();
        store.encode_head_and_keys(&mut out, 3);
        encode_leases(&mut out, &store.leases);
        encode_events(&mut out, &store.events, &store.keys);
        out.bytes
    }

    /// A store after a mixed write load: overwrites, single and range
    /// deletes, leased keys revoked with their lease, and compactions, from
    /// a fixed pseudo-random sequence.
    fn busy_store(ops: u64) -> KvStore {
        let mut store = KvStore::new();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut lease = 0;
        for op in 0..ops {
            let key = format!("k{}", next() % 12);
            match next() % 10 {
                0..=5 => {
                    let value = format!("v{op}-{}", "x".repeat((next() % 40) as usize));
                    store.put(&PutRequest::new(key, value)).unwrap();
                }
                6 => {
                    store
                        .delete_range(&DeleteRangeRequest::new(key, ""))
                        .unwrap();
                }
                7 => {
                    store
                        .delete_range(&DeleteRangeRequest::new("k1", "k5"))
                        .unwrap();
                }
                8 => {
                    lease += 1;
                    store.lease_grant(lease, 60).unwrap();
                    for key in [&key, "leased"] {
                        let put = PutRequest {
                            lease,
                            ..PutRequest::new(key, "leased value")
                        };
                        store.put(&put).unwrap();
                    }
                    if next() % 2 == 0 {
                        store.lease_revoke(lease).unwrap();
                    }
                }
                _ => {
                    let target = store.revision() - (next() % 20) as i64;
                    if target > store.compact_revision() {
                        store.compact(target).unwrap();
                    }
                }
            }
        }
        store
    }

    #[test]
    fn every_event_survives_the_round_trip_whatever_compaction_kept() {
        let all = KeyRange::new(vec![0], vec![0]);
        for ops in [1, 10, 57, 300, 2_000] {
            let original = busy_store(ops);
            let bytes = original.snapshot();
            let restored = KvStore::restore(&bytes).expect("restore");
            assert_eq!(restored, original, "{ops} ops");
            let from = original.events.first_revision.max(1);
            assert_eq!(
                restored.events_since(from, &all),
                original.events_since(from, &all)
            );
            assert_eq!(restored.snapshot(), bytes, "deterministic, {ops} ops");
            assert_eq!(
                KvStore::restore(&snapshot_v1(&original)).as_ref(),
                Ok(&original)
            );
            assert_eq!(
                KvStore::restore(&snapshot_v2(&original)).as_ref(),
                Ok(&original)
            );
            assert_eq!(KvStore::restore(&snapshot_v3(&original)), Ok(original));
        }
    }

    #[test]
    fn events_are_stored_by_reference_to_the_histories() {
        let mut store = KvStore::new();
        for i in 0..1_000 {
            let put = PutRequest {
                prev_kv: true,
                ..PutRequest::new("key", format!("{i:0>256}"))
            };
            store.put(&put).unwrap();
        }
        let v2 = store.snapshot().len();
        let v1 = snapshot_v1(&store).len();
        assert!(v2 * 3 < v1 * 2 - v1 / 2, "v2 {v2} bytes, v1 {v1} bytes");
        let restored = KvStore::restore(&store.snapshot()).unwrap();
        let (history, events) = (&restored.keys[b"key".as_slice()], &restored.events);
        let last = events.revisions.back().unwrap();
        assert!(
            Arc::ptr_eq(&last.events[0].kv, history.latest_shared().unwrap()),
            "a restored event shares its state with the history"
        );
    }

    #[test]
    fn a_derived_state_the_histories_lack_is_refused() {
        // Store a's events (a put of "a", taken from the histories) after
        // store b's histories (a put of "b" at the same revision).
        let (mut a, mut b) = (KvStore::new(), KvStore::new());
        a.put(&PutRequest::new("a", "1")).unwrap();
        b.put(&PutRequest::new("b", "1")).unwrap();
        let mut events_a = Encoder::default();
        encode_events(&mut events_a, &a.events, &a.keys);
        let mut events_b = Encoder::default();
        encode_events(&mut events_b, &b.events, &b.keys);
        let snapshot_b = b.snapshot();
        let mut bytes = snapshot_b[..snapshot_b.len() - events_b.bytes.len()].to_vec();
        bytes.extend_from_slice(&events_a.bytes);
        assert!(matches!(
            KvStore::restore(&bytes),
            Err(KvError::SnapshotCorrupt { .. })
        ));
    }
}

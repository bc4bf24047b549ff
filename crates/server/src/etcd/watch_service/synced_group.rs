//! The watchers of one stream that have seen every revision up to the
//! same point, read together through an index of their keys.
//!
//! Without it, every watcher read the event log for itself as revisions
//! passed: a stream holding 4,096 idle watchers scanned each new revision
//! 4,096 times, under the store's lock, and a member holding tens of
//! thousands of watchers slowed every write (see the abuse runs in
//! `docs/benchmarks.md`). The group reads each page of revisions once and
//! looks its keys up in the index: a single-key watcher costs one hash
//! lookup per event whatever the number of watchers, a range watcher one
//! comparison per event whose key is at or after its start.
//!
//! The group only decides who has something to read. A member whose key
//! is in a page leaves the group at the group's position and reads its
//! events itself (`Watcher::read`, the one place that builds events for a
//! client), so the group adds no second path for what a client is sent.
//! A watcher rejoins once it has read up to exactly the group's position.

use super::watcher::READ_SCAN_BYTES_MAX;
use bellwether_kv::{KeyRange, KvError, KvStore};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What one read of the group's next page found.
#[derive(Debug, PartialEq, Eq)]
pub enum Advance {
    /// Nothing to read: the group is empty or caught up.
    CaughtUp,
    /// The group moved past a page. These members had keys in it; they
    /// left the group at `from`, the revision the page started at.
    Moved { left: BTreeSet<i64>, from: i64 },
    /// The revisions the group needs are gone. Every member left at
    /// `from`; their own reads will report the compaction.
    Compacted { left: BTreeSet<i64>, from: i64 },
}

/// Watchers that have all been sent every event before `next_revision`.
#[derive(Debug, Default)]
pub struct SyncedGroup {
    /// The first revision no member has read. Meaningless while empty.
    next_revision: i64,
    /// Members watching one key, by that key.
    single: HashMap<Vec<u8>, BTreeSet<i64>>,
    /// Members watching a range, by start key then watch id.
    ranges: BTreeMap<(Vec<u8>, i64), KeyRange>,
    /// The members' ranges by watch id, to remove them.
    members: BTreeMap<i64, KeyRange>,
}

impl SyncedGroup {
    /// True when the group has no member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True when `id` is a member.
    pub fn contains(&self, id: i64) -> bool {
        self.members.contains_key(&id)
    }

    /// True when the store holds revisions the members have not read.
    pub fn is_behind(&self, store_revision: i64) -> bool {
        !self.is_empty() && self.next_revision <= store_revision
    }

    /// True when a watcher that has read everything before
    /// `next_revision` can join: it stands exactly where the group does.
    pub fn can_join(&self, next_revision: i64) -> bool {
        self.is_empty() || self.next_revision == next_revision
    }

    /// Adds a watcher standing at `next_revision` (see [`can_join`](Self::can_join)).
    pub fn join(&mut self, id: i64, range: &KeyRange, next_revision: i64) {
        assert!(
            self.can_join(next_revision),
            "a watcher joins at the group's position"
        );
        assert!(!self.contains(id), "watch id {id} is already in the group");
        self.next_revision = next_revision;
        if range.is_single() {
            self.single.entry(range.key.clone()).or_default().insert(id);
        } else {
            self.ranges.insert((range.key.clone(), id), range.clone());
        }
        self.members.insert(id, range.clone());
    }

    /// Removes a member; returns the revision it stood at, or `None` when
    /// `id` was not a member.
    pub fn leave(&mut self, id: i64) -> Option<i64> {
        let range = self.members.remove(&id)?;
        if range.is_single() {
            let ids = self.single.get_mut(&range.key).expect("indexed key");
            ids.remove(&id);
            if ids.is_empty() {
                self.single.remove(&range.key);
            }
        } else {
            self.ranges.remove(&(range.key, id)).expect("indexed range");
        }
        Some(self.next_revision)
    }

    /// Reads the next page of revisions once for every member, moves the
    /// group past it, and takes out the members that have events in it.
    pub fn advance(&mut self, store: &KvStore) -> Advance {
        if !self.is_behind(store.revision()) {
            return Advance::CaughtUp;
        }
        let from = self.next_revision;
        let every_key = KeyRange::prefix(Vec::new());
        match store.events_page(from, &every_key, READ_SCAN_BYTES_MAX) {
            Ok((events, next_revision)) => {
                assert!(next_revision > from, "a page must advance the group");
                let mut left = BTreeSet::new();
                for event in &events {
                    self.members_watching(&event.kv.key, &mut left);
                }
                for id in &left {
                    self.leave(*id);
                }
                self.next_revision = next_revision;
                Advance::Moved { left, from }
            }
            Err(KvError::Compacted { .. }) | Err(_) => {
                let left: BTreeSet<i64> = self.members.keys().copied().collect();
                for id in &left {
                    self.leave(*id);
                }
                Advance::Compacted { left, from }
            }
        }
    }

    /// Adds to `found` every member whose range holds `key`.
    fn members_watching(&self, key: &[u8], found: &mut BTreeSet<i64>) {
        if let Some(ids) = self.single.get(key) {
            found.extend(ids);
        }
        if self.ranges.is_empty() {
            return;
        }
        let upper = (key.to_vec(), i64::MAX);
        for ((_, id), range) in self.ranges.range(..=upper) {
            if range.contains(key) {
                found.insert(*id);
            }
        }
    }
}

//! The state of one Watch stream, without any IO: the watchers it holds,
//! the control responses (created, canceled, progress) waiting to go out,
//! and the choice of what to send next.
//!
//! The stream's task (in `watch_service.rs`) feeds it requests and clock
//! ticks and asks it for one response whenever the client can take one.
//! Answering one response at a time, only when there is room to send it, is
//! what keeps a slow client from making the server buffer: a watcher that
//! is not read stays at its `next_revision` in the store's event log.
//!
//! The answers follow etcd 3.4 (`etcdserver/api/v3rpc/watch.go` and
//! `mvcc/watcher.go`), checked against a real etcd 3.4:
//!
//! - a create is answered with `created`, under a watch id chosen by the
//!   server (counting from 0 per stream, skipping ids in use) or the
//!   client's own nonzero id; a duplicate id or an empty range is answered
//!   with `created` and `canceled`, watch id -1 and a `cancel_reason`;
//! - an empty key means the key `\0`;
//! - a cancel of a live watcher is answered with `canceled`; a cancel of an
//!   unknown id is ignored;
//! - a progress request is answered with watch id -1 and the store's
//!   revision. Unlike etcd 3.4, it is sent only once every watcher on the
//!   stream has been sent all events up to that revision, so it never
//!   claims progress that has not been delivered (etcd 3.5 does the same);
//! - a watcher whose start revision is gone gets `canceled` with the
//!   `compact_revision` and a header revision of 0, after its `created`.

use super::synced_group::{Advance, SyncedGroup};
use super::watcher::{Read, Watcher};
use bellwether_api::etcdserverpb as pb;
use bellwether_kv::{KeyRange, KvStore};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Most control responses waiting on one stream. While the queue is full
/// the stream stops reading requests, so a client that sends creates
/// faster than it reads answers is slowed down instead of buffered.
pub const CONTROL_RESPONSES_MAX: usize = 64;

/// Most watchers on one stream. etcd has no limit; we bound it so that
/// one stream's index, and the watchers that catch up alone after falling
/// behind, stay a bounded amount of work for the stream's task. A client
/// that needs more opens another stream.
pub const WATCHERS_PER_STREAM_MAX: usize = 4096;

/// Most watchers one member serves over all its streams: with the bounds
/// on connections and streams alone, a client could still hold billions.
/// etcd has no limit. Past it a create is refused, and the client learns
/// why from the cancel reason.
pub const WATCHERS_MAX: usize = 65_536;

/// The member-wide count of watchers, shared by every stream and bounded
/// by its maximum ([`WATCHERS_MAX`] unless set).
#[derive(Clone, Debug)]
pub struct WatcherBudget {
    used: Arc<AtomicUsize>,
    max: usize,
}

impl Default for WatcherBudget {
    fn default() -> Self {
        WatcherBudget::new(WATCHERS_MAX)
    }
}

impl WatcherBudget {
    /// A budget of `max` watchers.
    pub fn new(max: usize) -> Self {
        WatcherBudget {
            used: Arc::default(),
            max,
        }
    }

    /// Takes one watcher's place; false when none is left.
    fn take(&self) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used < self.max).then_some(used + 1)
            })
            .is_ok()
    }

    /// Returns `count` places.
    fn give_back(&self, count: usize) {
        let before = self.used.fetch_sub(count, Ordering::AcqRel);
        assert!(before >= count, "more watchers returned than taken");
    }

    /// Watchers alive on the member now.
    pub fn in_use(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The most watchers allowed.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// etcd's watch id for "no watcher": rejected creates and progress
/// responses, which concern the whole stream.
pub const WATCH_ID_NONE: i64 = -1;

/// etcd's reason for a create with `key >= range_end`.
pub const REASON_EMPTY_RANGE: &str = "mvcc: watcher range is empty";
/// etcd's reason for a create reusing a live watch id.
pub const REASON_DUPLICATE_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";

/// One stream's watchers and pending answers.
#[derive(Debug)]
pub struct WatchSession {
    /// Live watchers by id. A `BTreeMap` so that the order in which they
    /// are served is the same on every run.
    watchers: BTreeMap<i64, Watcher>,
    /// The watchers that stand at the same revision and are read together
    /// (see `synced_group.rs`). A member's own `next_revision` is not
    /// used while it is in the group.
    group: SyncedGroup,
    /// The watchers not in the group, which read the event log each for
    /// itself: those catching up from an old revision, and those the group
    /// found events for. Every watcher is in exactly one of the two.
    solo: BTreeSet<i64>,
    /// The next id to try for a create without one, as etcd counts.
    next_watch_id: i64,
    /// Answers to creates and cancels, and progress notifications, in the
    /// order they must be sent. Bounded by [`CONTROL_RESPONSES_MAX`].
    control: VecDeque<pb::WatchResponse>,
    /// A progress request waits for every watcher to catch up.
    progress_requested: bool,
    /// The id of the watcher served last; the next event response goes to
    /// the first watcher after it that has events, so one busy watcher
    /// cannot starve the others.
    last_served: i64,
    /// Cluster id, member id and term for response headers; the revision
    /// is filled per response.
    header: pb::ResponseHeader,
    /// The member's watcher count this stream's watchers are part of.
    budget: WatcherBudget,
}

impl Drop for WatchSession {
    fn drop(&mut self) {
        self.budget.give_back(self.watchers.len());
    }
}

impl WatchSession {
    /// An empty stream whose responses carry `header` (its revision is
    /// replaced in each response).
    pub fn new(header: pb::ResponseHeader) -> Self {
        WatchSession {
            watchers: BTreeMap::new(),
            group: SyncedGroup::default(),
            solo: BTreeSet::new(),
            next_watch_id: 0,
            control: VecDeque::new(),
            progress_requested: false,
            last_served: WATCH_ID_NONE,
            header,
            budget: WatcherBudget::default(),
        }
    }

    /// Counts this stream's watchers in the member-wide `budget`.
    pub fn with_budget(mut self, budget: WatcherBudget) -> Self {
        assert!(
            self.watchers.is_empty(),
            "the budget is set before any watcher"
        );
        self.budget = budget;
        self
    }

    /// Updates the term in later headers.
    pub fn set_raft_term(&mut self, raft_term: u64) {
        self.header.raft_term = raft_term;
    }

    /// The number of live watchers.
    pub fn watchers_count(&self) -> usize {
        self.watchers.len()
    }

    /// True while there is room to answer another request.
    pub fn accepts_requests(&self) -> bool {
        self.control.len() < CONTROL_RESPONSES_MAX
    }

    /// True when [`next_response`](Self::next_response) may have something
    /// to send, given that the store is at `store_revision`.
    pub fn has_work(&self, store_revision: i64) -> bool {
        !self.control.is_empty() || self.progress_requested || self.is_behind(store_revision)
    }

    /// True while some watcher has not been sent every event up to
    /// `store_revision`.
    fn is_behind(&self, store_revision: i64) -> bool {
        self.group.is_behind(store_revision)
            || self
                .solo
                .iter()
                .any(|id| self.watchers[id].is_behind(store_revision))
    }

    /// True while the watcher `id` has not been sent every event up to
    /// `store_revision`.
    fn watcher_is_behind(&self, id: i64, store_revision: i64) -> bool {
        if self.group.contains(id) {
            self.group.is_behind(store_revision)
        } else {
            self.watchers[&id].is_behind(store_revision)
        }
    }

    /// Handles one request from the client.
    pub fn receive(&mut self, request: pb::WatchRequest, store: &KvStore) {
        use pb::watch_request::RequestUnion;
        assert!(
            self.accepts_requests(),
            "request read while the queue is full"
        );
        match request.request_union {
            Some(RequestUnion::CreateRequest(create)) => self.create(create, store),
            Some(RequestUnion::CancelRequest(cancel)) => self.cancel(cancel.watch_id, store),
            Some(RequestUnion::ProgressRequest(_)) => self.progress_requested = true,
            // etcd ignores a request with nothing in it.
            None => {}
        }
    }

    fn create(&mut self, request: pb::WatchCreateRequest, store: &KvStore) {
        let mut key = request.key.clone();
        if key.is_empty() {
            // As etcd: `\0` is the smallest key, and what an empty one means.
            key.push(0);
        }
        let range = KeyRange::new(key, request.range_end.clone());
        if range.is_empty_interval() {
            return self.reject(REASON_EMPTY_RANGE.into(), store);
        }
        if self.watchers.len() >= WATCHERS_PER_STREAM_MAX {
            let reason = format!(
                "bellwether: too many watchers on one stream (at most \
                 {WATCHERS_PER_STREAM_MAX}); open another stream"
            );
            return self.reject(reason, store);
        }
        let id = match request.watch_id {
            0 => self.unused_watch_id(),
            id if id < 0 => {
                return self.reject("bellwether: a watch ID must not be negative".into(), store)
            }
            id if self.watchers.contains_key(&id) => {
                return self.reject(REASON_DUPLICATE_ID.into(), store)
            }
            id => id,
        };
        if !self.budget.take() {
            let reason = format!(
                "bellwether: too many watchers on this member (at most {})",
                self.budget.max()
            );
            return self.reject(reason, store);
        }
        let next_revision = match request.start_revision {
            0 => store.revision() + 1,
            start => start,
        };
        self.watchers
            .insert(id, Watcher::new(&request, range, next_revision));
        self.solo.insert(id);
        // A watcher that starts in the future would move an empty group
        // there, out of reach of the watchers created "now" after it.
        if next_revision <= store.revision() + 1 {
            self.try_join(id);
        }
        let created = pb::WatchResponse {
            header: Some(self.header_at(store.revision())),
            watch_id: id,
            created: true,
            ..Default::default()
        };
        self.control.push_back(created);
    }

    /// The id etcd gives a create without one: the counter's next value
    /// not in use.
    fn unused_watch_id(&mut self) -> i64 {
        assert!(self.watchers.len() < WATCHERS_PER_STREAM_MAX);
        while self.watchers.contains_key(&self.next_watch_id) {
            self.next_watch_id += 1;
        }
        let id = self.next_watch_id;
        self.next_watch_id += 1;
        id
    }

    /// Answers a create that made no watcher.
    fn reject(&mut self, reason: String, store: &KvStore) {
        self.control.push_back(pb::WatchResponse {
            header: Some(self.header_at(store.revision())),
            watch_id: WATCH_ID_NONE,
            created: true,
            canceled: true,
            cancel_reason: reason,
            ..Default::default()
        });
    }

    fn cancel(&mut self, watch_id: i64, store: &KvStore) {
        if self.watchers.remove(&watch_id).is_none() {
            return;
        }
        self.group.leave(watch_id);
        self.solo.remove(&watch_id);
        self.budget.give_back(1);
        self.control.push_back(pb::WatchResponse {
            header: Some(self.header_at(store.revision())),
            watch_id,
            canceled: true,
            ..Default::default()
        });
    }

    /// A progress tick: every watcher that asked for progress notifications
    /// and was sent nothing since the last tick, and is caught up, gets an
    /// empty response saying how far the store is. A notification that does
    /// not fit in the control queue is skipped: the next tick retries it.
    pub fn progress_tick(&mut self, store: &KvStore) {
        let revision = store.revision();
        let due: Vec<i64> = self
            .watchers
            .iter()
            .filter(|(id, w)| {
                w.progress_notify && !w.sent_since_tick && !self.watcher_is_behind(**id, revision)
            })
            .map(|(id, _)| *id)
            .collect();
        for watch_id in due {
            if self.control.len() >= CONTROL_RESPONSES_MAX {
                break;
            }
            self.control.push_back(pb::WatchResponse {
                header: Some(self.header_at(revision)),
                watch_id,
                ..Default::default()
            });
        }
        for watcher in self.watchers.values_mut() {
            watcher.sent_since_tick = false;
        }
    }

    /// The next response to send, if any: control responses first, in
    /// order; then events of the next watcher that has some; then a
    /// requested progress response once every watcher is caught up.
    ///
    /// Reads at most one page per watcher, so one call is bounded. `None`
    /// with [`has_work`](Self::has_work) still true means "call again".
    pub fn next_response(&mut self, store: &KvStore) -> Option<pb::WatchResponse> {
        if let Some(response) = self.control.pop_front() {
            return Some(response);
        }
        if let Some(response) = self.next_events(store) {
            return Some(response);
        }
        let revision = store.revision();
        if self.progress_requested && !self.is_behind(revision) {
            self.progress_requested = false;
            return Some(pb::WatchResponse {
                header: Some(self.header_at(revision)),
                watch_id: WATCH_ID_NONE,
                ..Default::default()
            });
        }
        None
    }

    /// Events (or a compaction) for the first watcher after the last one
    /// served that has any. The group reads one page first, so that only
    /// the watchers it found events for read for themselves.
    fn next_events(&mut self, store: &KvStore) -> Option<pb::WatchResponse> {
        self.advance_group(store);
        let revision = store.revision();
        let after = self.last_served;
        let order: Vec<i64> = self
            .solo
            .range((Bound::Excluded(after), Bound::Unbounded))
            .chain(self.solo.range(..=after))
            .copied()
            .filter(|id| self.watchers[id].is_behind(revision))
            .collect();
        let mut response = None;
        for watch_id in order {
            let watcher = self.watchers.get_mut(&watch_id).expect("listed watcher");
            match watcher.read(store) {
                Read::Events(events) if events.is_empty() => {}
                Read::Events(events) => {
                    watcher.sent_since_tick = true;
                    self.last_served = watch_id;
                    response = Some(pb::WatchResponse {
                        header: Some(self.header_at(revision)),
                        watch_id,
                        events,
                        ..Default::default()
                    });
                }
                Read::Compacted(compact_revision) => {
                    self.watchers.remove(&watch_id);
                    self.solo.remove(&watch_id);
                    self.budget.give_back(1);
                    self.last_served = watch_id;
                    // etcd sends this one with a header revision of 0.
                    response = Some(pb::WatchResponse {
                        header: Some(self.header_at(0)),
                        watch_id,
                        canceled: true,
                        compact_revision,
                        ..Default::default()
                    });
                    break;
                }
            }
            self.try_join(watch_id);
            if response.is_some() {
                break;
            }
        }
        self.join_caught_up(revision);
        assert_eq!(
            self.group.len() + self.solo.len(),
            self.watchers.len(),
            "every watcher is in the group or reads alone"
        );
        response
    }

    /// Moves the group past one page; the members it found events for (or
    /// all of them, if the page was compacted) read alone from where the
    /// group stood.
    fn advance_group(&mut self, store: &KvStore) {
        let (left, from) = match self.group.advance(store) {
            Advance::CaughtUp => return,
            Advance::Moved { left, from } | Advance::Compacted { left, from } => (left, from),
        };
        for id in left {
            self.watchers
                .get_mut(&id)
                .expect("a group member is a live watcher")
                .next_revision = from;
            self.solo.insert(id);
        }
    }

    /// Puts a lone watcher into the group if it stands where the group does.
    fn try_join(&mut self, id: i64) {
        let watcher = &self.watchers[&id];
        if self.solo.contains(&id) && self.group.can_join(watcher.next_revision) {
            self.group.join(id, &watcher.range, watcher.next_revision);
            self.solo.remove(&id);
        }
    }

    /// Puts every lone watcher that has read all the store holds into the
    /// group, when the group has read as far.
    fn join_caught_up(&mut self, store_revision: i64) {
        let ready: Vec<i64> = self
            .solo
            .iter()
            .copied()
            .filter(|id| !self.watchers[id].is_behind(store_revision))
            .collect();
        for id in ready {
            self.try_join(id);
        }
    }

    fn header_at(&self, revision: i64) -> pb::ResponseHeader {
        pb::ResponseHeader {
            revision,
            ..self.header
        }
    }
}

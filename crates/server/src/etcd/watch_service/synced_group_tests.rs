//! The synced group: its index on its own, and a stream whose watchers
//! move in and out of it under random writes, checked against the event
//! log read watcher by watcher.

use super::synced_group::{Advance, SyncedGroup};
use super::*;
use bellwether_api::mvccpb;
use bellwether_kv::{DeleteRangeRequest, KeyRange, PutRequest, RequestOp, TxnRequest};
use pb::watch_request::RequestUnion;
use std::collections::{BTreeMap, BTreeSet};

const HEADER: pb::ResponseHeader = pb::ResponseHeader {
    cluster_id: 7,
    member_id: 3,
    revision: 0,
    raft_term: 2,
};

#[test]
fn the_group_names_only_the_members_whose_keys_a_page_touches() {
    let mut store = KvStore::new();
    let mut group = SyncedGroup::default();
    let now = store.revision() + 1;
    for i in 0..1000 {
        group.join(i, &KeyRange::single(format!("idle/{i}")), now);
    }
    group.join(1000, &KeyRange::prefix("app/"), now);
    group.join(1001, &KeyRange::new("m", vec![0]), now);
    assert_eq!(group.advance(&store), Advance::CaughtUp);

    store.put(&PutRequest::new("app/x", "1")).unwrap();
    store.put(&PutRequest::new("busy", "1")).unwrap();
    let Advance::Moved { left, from } = group.advance(&store) else {
        panic!("the group must move");
    };
    assert_eq!(from, now);
    assert_eq!(left, BTreeSet::from([1000]), "only the prefix watcher");
    assert!(!group.contains(1000) && group.len() == 1001);
    assert!(!group.is_behind(store.revision()));

    store.put(&PutRequest::new("idle/7", "1")).unwrap();
    store.put(&PutRequest::new("zz", "1")).unwrap();
    let Advance::Moved { left, .. } = group.advance(&store) else {
        panic!("the group must move");
    };
    assert_eq!(left, BTreeSet::from([7, 1001]));
    assert!(!group.can_join(now), "the group has moved on");
    assert!(group.can_join(store.revision() + 1));
    assert_eq!(group.leave(3), Some(store.revision() + 1));
    assert_eq!(group.leave(3), None);
}

#[test]
fn a_compacted_page_sends_every_member_to_read_alone() {
    let mut store = KvStore::new();
    let mut group = SyncedGroup::default();
    store.put(&PutRequest::new("a", "1")).unwrap();
    group.join(1, &KeyRange::single("a"), 2);
    group.join(2, &KeyRange::single("b"), 2);
    store.put(&PutRequest::new("a", "2")).unwrap();
    store.compact(3).unwrap();
    assert_eq!(
        group.advance(&store),
        Advance::Compacted {
            left: BTreeSet::from([1, 2]),
            from: 2
        }
    );
    assert!(group.is_empty());
}

/// A small deterministic generator, so a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

fn random_range(rng: &mut Rng) -> KeyRange {
    let key = |rng: &mut Rng| format!("k{:02}", rng.below(30));
    match rng.below(4) {
        0 | 1 => KeyRange::single(key(rng)),
        2 => KeyRange::prefix(format!("k{}", rng.below(3))),
        _ => {
            let (a, b) = (key(rng), key(rng));
            if a == b {
                KeyRange::new(a, vec![0])
            } else {
                KeyRange::new(a.clone().min(b.clone()), a.max(b))
            }
        }
    }
}

fn random_write(rng: &mut Rng, store: &mut KvStore, step: u64) {
    let key = |rng: &mut Rng| format!("k{:02}", rng.below(30));
    match rng.below(5) {
        0 => {
            let key = key(rng);
            store
                .delete_range(&DeleteRangeRequest::new(key, ""))
                .unwrap();
        }
        1 => {
            // A txn may not write one key twice: three neighbours.
            let first = rng.below(28);
            let txn = TxnRequest {
                compare: Vec::new(),
                success: (first..first + 3)
                    .map(|i| {
                        RequestOp::Put(PutRequest::new(format!("k{i:02}"), format!("t{step}")))
                    })
                    .collect(),
                failure: Vec::new(),
            };
            store.txn(&txn).unwrap();
        }
        _ => {
            store
                .put(&PutRequest::new(key(rng), format!("v{step}")))
                .unwrap();
        }
    }
}

/// What a watcher was asked for and what it was sent.
struct Watched {
    range: KeyRange,
    start: i64,
    no_delete: bool,
    got: Vec<(i32, Vec<u8>, i64)>,
}

fn event_summary(event: &mvccpb::Event) -> (i32, Vec<u8>, i64) {
    let kv = event.kv.as_ref().unwrap();
    (event.r#type, kv.key.clone(), kv.mod_revision)
}

#[test]
fn watchers_moving_in_and_out_of_the_group_get_exactly_their_events_in_order() {
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut store = KvStore::new();
        let mut session = WatchSession::new(HEADER);
        let mut watched: BTreeMap<i64, Watched> = BTreeMap::new();
        let mut waiting_for_id: Vec<Watched> = Vec::new();
        for step in 0..400u64 {
            match rng.below(10) {
                0 if session.accepts_requests() => {
                    let range = random_range(&mut rng);
                    let start = if rng.below(3) == 0 {
                        1 + rng.below(store.revision() as u64) as i64
                    } else {
                        store.revision() + 1
                    };
                    let no_delete = rng.below(4) == 0;
                    session.receive(
                        pb::WatchRequest {
                            request_union: Some(RequestUnion::CreateRequest(
                                pb::WatchCreateRequest {
                                    key: range.key.clone(),
                                    range_end: range.range_end.clone(),
                                    start_revision: start,
                                    filters: if no_delete { vec![1] } else { vec![] },
                                    ..Default::default()
                                },
                            )),
                        },
                        &store,
                    );
                    waiting_for_id.push(Watched {
                        range,
                        start,
                        no_delete,
                        got: Vec::new(),
                    });
                }
                1 if session.accepts_requests() && !watched.is_empty() => {
                    let victim = *watched
                        .keys()
                        .nth(rng.below(watched.len() as u64) as usize)
                        .unwrap();
                    watched.remove(&victim);
                    session.receive(
                        pb::WatchRequest {
                            request_union: Some(RequestUnion::CancelRequest(
                                pb::WatchCancelRequest { watch_id: victim },
                            )),
                        },
                        &store,
                    );
                }
                _ => random_write(&mut rng, &mut store, step),
            }
            // Serve a few responses now and then, as a client that reads
            // at its own pace.
            let budget = rng.below(4) * 3;
            for _ in 0..budget {
                if !session.has_work(store.revision()) {
                    break;
                }
                let Some(response) = session.next_response(&store) else {
                    continue;
                };
                record(response, &mut watched, &mut waiting_for_id);
            }
        }
        let mut rounds = 0;
        while session.has_work(store.revision()) {
            if let Some(response) = session.next_response(&store) {
                record(response, &mut watched, &mut waiting_for_id);
            }
            rounds += 1;
            assert!(rounds < 100_000, "the session never runs dry");
        }
        assert!(waiting_for_id.is_empty());
        for (id, watcher) in &watched {
            let expected: Vec<(i32, Vec<u8>, i64)> = store
                .events_since(watcher.start, &watcher.range)
                .unwrap()
                .iter()
                .filter(|event| {
                    !(watcher.no_delete && event.kind == bellwether_kv::EventKind::Delete)
                })
                .map(|event| {
                    let kind = match event.kind {
                        bellwether_kv::EventKind::Put => mvccpb::event::EventType::Put,
                        bellwether_kv::EventKind::Delete => mvccpb::event::EventType::Delete,
                    };
                    (kind as i32, event.kv.key.clone(), event.kv.mod_revision)
                })
                .collect();
            assert_eq!(
                watcher.got, expected,
                "seed {seed}, watcher {id} on {:?}",
                watcher.range
            );
        }
    }
}

fn record(
    response: pb::WatchResponse,
    watched: &mut BTreeMap<i64, Watched>,
    waiting_for_id: &mut Vec<Watched>,
) {
    if response.created {
        assert!(!response.canceled, "{response:?}");
        let watcher = waiting_for_id.remove(0);
        watched.insert(response.watch_id, watcher);
        return;
    }
    if response.canceled {
        // The answer to a cancel the test sent; nothing is compacted here.
        assert!(!watched.contains_key(&response.watch_id), "{response:?}");
        return;
    }
    if let Some(watcher) = watched.get_mut(&response.watch_id) {
        watcher
            .got
            .extend(response.events.iter().map(event_summary));
    }
}

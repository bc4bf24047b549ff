//! Random etcd API calls for the differential test, from a seed.
//!
//! Keys come from a small set so that calls collide: puts overwrite,
//! ranges and deletes cover nested prefixes, compares see every state.
//! Revisions are drawn around the live history (compacted, current,
//! future) so the errors are exercised as well as the answers.

use bellwether_api::etcdserverpb as pb;
use pb::compare::{CompareResult, CompareTarget, TargetUnion};
use pb::request_op::Request;

/// A seeded generator (SplitMix64): the same seed gives the same calls.
pub struct Dice(u64);

impl Dice {
    pub fn new(seed: u64) -> Dice {
        Dice(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// 0..n.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

const KEYS: &[&str] = &[
    "a", "a/1", "a/2", "a/2/x", "b", "b/1", "c", "d", "e/1", "e/2",
];

/// One call of the sequence.
#[derive(Clone, Debug)]
pub enum Call {
    Range(pb::RangeRequest),
    Put(pb::PutRequest),
    Delete(pb::DeleteRangeRequest),
    Txn(pb::TxnRequest),
    Compact(pb::CompactionRequest),
    LeaseGrant(pb::LeaseGrantRequest),
    LeaseRevoke(pb::LeaseRevokeRequest),
    LeaseTimeToLive(pb::LeaseTimeToLiveRequest),
}

/// What the generator knows of the store, to aim revisions and leases.
pub struct History {
    /// The store's revision after the last write.
    pub revision: i64,
    /// The last compaction's revision.
    pub compacted: i64,
    /// Lease ids granted so far (revoked ones included: calls on them
    /// must fail alike).
    pub leases: Vec<i64>,
}

fn key(dice: &mut Dice) -> Vec<u8> {
    dice.pick(KEYS).as_bytes().to_vec()
}

fn value(dice: &mut Dice) -> Vec<u8> {
    let length = dice.below(4) as usize;
    (0..length).map(|_| b'p' + dice.below(4) as u8).collect()
}

/// A range end: none (one key), a prefix, a span, or everything from key.
fn range_end(dice: &mut Dice, key: &[u8]) -> Vec<u8> {
    match dice.below(5) {
        0 | 1 => Vec::new(),
        2 => {
            let mut end = key.to_vec();
            *end.last_mut().expect("keys are not empty") += 1;
            end
        }
        3 => dice.pick(KEYS).as_bytes().to_vec(),
        _ => vec![0],
    }
}

/// A revision near the live history: 0 (latest) most often.
fn revision(dice: &mut Dice, history: &History) -> i64 {
    match dice.below(6) {
        0..=2 => 0,
        3 => history.revision + dice.below(3) as i64 - 1,
        4 => (history.compacted - 1 + dice.below(3) as i64).max(1),
        _ => {
            history.compacted + dice.below((history.revision - history.compacted + 1) as u64) as i64
        }
    }
}

fn lease(dice: &mut Dice, history: &History) -> i64 {
    if history.leases.is_empty() || dice.chance(20) {
        return 0x7000 + dice.below(4) as i64; // never granted
    }
    dice.pick(&history.leases)
}

fn range(dice: &mut Dice, history: &History) -> pb::RangeRequest {
    let key = key(dice);
    let filters = dice.chance(15);
    pb::RangeRequest {
        range_end: range_end(dice, &key),
        key,
        limit: if dice.chance(30) {
            dice.below(3) as i64
        } else {
            0
        },
        revision: revision(dice, history),
        sort_order: if dice.chance(30) {
            dice.below(3) as i32
        } else {
            0
        },
        sort_target: if dice.chance(30) {
            dice.below(5) as i32
        } else {
            0
        },
        serializable: false,
        keys_only: dice.chance(15),
        count_only: dice.chance(10),
        min_mod_revision: if filters { revision(dice, history) } else { 0 },
        max_mod_revision: if filters && dice.chance(50) {
            revision(dice, history)
        } else {
            0
        },
        min_create_revision: if filters && dice.chance(50) {
            revision(dice, history)
        } else {
            0
        },
        max_create_revision: if filters && dice.chance(30) {
            revision(dice, history)
        } else {
            0
        },
    }
}

fn put(dice: &mut Dice, history: &History) -> pb::PutRequest {
    let ignore_value = dice.chance(5);
    pb::PutRequest {
        key: key(dice),
        value: if ignore_value {
            Vec::new()
        } else {
            value(dice)
        },
        lease: if dice.chance(15) {
            lease(dice, history)
        } else {
            0
        },
        prev_kv: dice.chance(40),
        ignore_value,
        ignore_lease: dice.chance(3),
    }
}

fn delete(dice: &mut Dice) -> pb::DeleteRangeRequest {
    let key = key(dice);
    pb::DeleteRangeRequest {
        range_end: range_end(dice, &key),
        key,
        prev_kv: dice.chance(50),
    }
}

fn compare(dice: &mut Dice, history: &History) -> pb::Compare {
    let key = key(dice);
    let target = dice.pick(&[
        CompareTarget::Version,
        CompareTarget::Create,
        CompareTarget::Mod,
        CompareTarget::Value,
        CompareTarget::Lease,
    ]);
    let union = match target {
        CompareTarget::Version => TargetUnion::Version(dice.below(4) as i64),
        CompareTarget::Create => TargetUnion::CreateRevision(revision(dice, history)),
        CompareTarget::Mod => TargetUnion::ModRevision(revision(dice, history)),
        CompareTarget::Value => TargetUnion::Value(value(dice)),
        CompareTarget::Lease => TargetUnion::Lease(if dice.chance(50) {
            0
        } else {
            lease(dice, history)
        }),
    };
    pb::Compare {
        result: dice.pick(&[
            CompareResult::Equal,
            CompareResult::Greater,
            CompareResult::Less,
            CompareResult::NotEqual,
        ]) as i32,
        target: target as i32,
        range_end: if dice.chance(15) {
            range_end(dice, &key)
        } else {
            Vec::new()
        },
        key,
        target_union: Some(union),
    }
}

fn request_op(dice: &mut Dice, history: &History, depth: u32) -> pb::RequestOp {
    let request = match dice.below(if depth < 2 { 8 } else { 7 }) {
        0 | 1 => Request::RequestRange(range(dice, history)),
        2..=4 => Request::RequestPut(put(dice, history)),
        5 | 6 => Request::RequestDeleteRange(delete(dice)),
        _ => Request::RequestTxn(txn(dice, history, depth + 1)),
    };
    pb::RequestOp {
        request: Some(request),
    }
}

fn txn(dice: &mut Dice, history: &History, depth: u32) -> pb::TxnRequest {
    pb::TxnRequest {
        compare: (0..dice.below(3)).map(|_| compare(dice, history)).collect(),
        success: (0..dice.below(4))
            .map(|_| request_op(dice, history, depth))
            .collect(),
        failure: (0..dice.below(3))
            .map(|_| request_op(dice, history, depth))
            .collect(),
    }
}

/// The next call.
pub fn next_call(dice: &mut Dice, history: &History) -> Call {
    match dice.below(100) {
        0..=24 => Call::Range(range(dice, history)),
        25..=49 => Call::Put(put(dice, history)),
        50..=59 => Call::Delete(delete(dice)),
        60..=86 => Call::Txn(txn(dice, history, 0)),
        // Revision 0 is left out: a documented difference on a store never
        // compacted (etcd_differential.rs checks it on its own).
        87..=88 => Call::Compact(pb::CompactionRequest {
            revision: revision(dice, history).max(history.compacted - 1).max(1),
            physical: dice.chance(50),
        }),
        89..=92 => Call::LeaseGrant(pb::LeaseGrantRequest {
            ttl: 3600,
            id: 0x1000 + dice.below(12) as i64,
        }),
        93..=95 => Call::LeaseRevoke(pb::LeaseRevokeRequest {
            id: lease(dice, history),
        }),
        _ => Call::LeaseTimeToLive(pb::LeaseTimeToLiveRequest {
            id: lease(dice, history),
            keys: dice.chance(70),
        }),
    }
}

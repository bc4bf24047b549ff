//! Shared helpers of the storage integration tests: entry builders, a seeded
//! workload generator that only produces calls the `Storage` contract allows,
//! and the oracle that says which recovered states a crash may leave.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use bellwether_core::raft::{ClusterConfig, Entry, HardState, Payload, Snapshot, SnapshotMeta};
use bellwether_core::{LogIndex, NodeId, Term};
use bellwether_storage::{MemoryStorage, Recovered, Storage, StorageError};

/// Most operations one generated workload holds.
pub const WORKLOAD_OPERATIONS_MAX: usize = 10_000;

/// A small seeded generator (SplitMix64): tests need reproducible
/// randomness and no dependency.
#[derive(Clone, Debug)]
pub struct TestRng(u64);

impl TestRng {
    pub fn new(seed: u64) -> Self {
        TestRng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound`.
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0);
        self.next_u64() % bound
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A command entry whose payload is derived from its index and term, so
/// mixed-up entries never compare equal.
pub fn command(index: u64, term: u64, bytes: usize) -> Entry {
    let mut data = format!("cmd-{index}-{term}-").into_bytes();
    data.resize(data.len().max(bytes), (index % 251) as u8);
    Entry {
        term: Term(term),
        index: LogIndex(index),
        payload: Payload::Command(data),
    }
}

/// Contiguous command entries `first..first + count`, all of `term`.
pub fn commands(first: u64, count: u64, term: u64) -> Vec<Entry> {
    (first..first + count)
        .map(|index| command(index, term, 8))
        .collect()
}

/// A snapshot at `index` of `term` with some data.
pub fn snapshot(index: u64, term: u64) -> Snapshot {
    Snapshot {
        meta: SnapshotMeta {
            last_index: LogIndex(index),
            last_term: Term(term),
            config: ClusterConfig::voters([NodeId(1), NodeId(2), NodeId(3)]),
        },
        data: format!("state-through-{index}").into_bytes().into(),
    }
}

/// One call on a `Storage`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    Append(Vec<Entry>),
    HardState(HardState),
    Snapshot(Snapshot),
    Compact(LogIndex),
    Sync,
}

impl Operation {
    /// Whether the operation makes everything before it durable.
    pub fn is_sync_point(&self) -> bool {
        matches!(
            self,
            Operation::Sync | Operation::Snapshot(_) | Operation::Compact(_)
        )
    }

    /// Applies the operation to `storage`.
    pub fn apply(&self, storage: &mut dyn Storage) -> Result<(), StorageError> {
        match self {
            Operation::Append(entries) => storage.append(entries),
            Operation::HardState(state) => storage.save_hard_state(state),
            Operation::Snapshot(snapshot) => storage.save_snapshot(snapshot),
            Operation::Compact(through) => storage.compact(*through),
            Operation::Sync => storage.sync(),
        }
    }
}

/// What the generator knows of the log, to keep its calls legal.
struct LogModel {
    snapshot_index: u64,
    snapshot_term: u64,
    /// Terms of entries `snapshot_index + 1 ..`.
    terms: Vec<u64>,
    term: u64,
    hard_state: HardState,
}

impl LogModel {
    fn last_index(&self) -> u64 {
        self.snapshot_index + self.terms.len() as u64
    }

    fn term_at(&self, index: u64) -> Option<u64> {
        if index == self.snapshot_index {
            return Some(self.snapshot_term);
        }
        let offset = index.checked_sub(self.snapshot_index + 1)?;
        self.terms.get(offset as usize).copied()
    }
}

/// A seeded workload of `count` legal operations: appends (with conflict
/// truncations and payloads of varied size and kind), hard-state saves,
/// syncs, snapshots that match the log or conflict with it, compactions.
pub fn workload(seed: u64, count: usize) -> Vec<Operation> {
    assert!(count <= WORKLOAD_OPERATIONS_MAX);
    let mut rng = TestRng::new(seed);
    let mut model = LogModel {
        snapshot_index: 0,
        snapshot_term: 0,
        terms: Vec::new(),
        term: 1,
        hard_state: HardState::default(),
    };
    let mut operations = Vec::with_capacity(count);
    while operations.len() < count {
        let roll = rng.below(100);
        let operation = match roll {
            0..=39 => generate_append(&mut rng, &mut model),
            40..=54 => generate_hard_state(&mut rng, &mut model),
            55..=61 => generate_snapshot(&mut rng, &mut model),
            62..=66 => Operation::Compact(LogIndex(rng.below(model.snapshot_index + 1))),
            _ => Operation::Sync,
        };
        operations.push(operation);
    }
    operations
}

fn generate_append(rng: &mut TestRng, model: &mut LogModel) -> Operation {
    if rng.chance(10) {
        model.term += 1;
    }
    let last = model.last_index();
    let first = if last > model.snapshot_index && rng.chance(15) {
        model.snapshot_index + 1 + rng.below(last - model.snapshot_index)
    } else {
        last + 1
    };
    let count = 1 + rng.below(8);
    let entries: Vec<Entry> = (first..first + count)
        .map(|index| {
            let payload = match rng.below(10) {
                0 => Payload::Noop,
                1 => Payload::Membership(ClusterConfig {
                    voters: [NodeId(1), NodeId(2), NodeId(rng.below(5) + 3)].into(),
                    learners: [NodeId(9)].into(),
                }),
                _ => return command(index, model.term, rng.below(160) as usize),
            };
            Entry {
                term: Term(model.term),
                index: LogIndex(index),
                payload,
            }
        })
        .collect();
    model
        .terms
        .truncate((first - model.snapshot_index - 1) as usize);
    model.terms.extend(entries.iter().map(|entry| entry.term.0));
    Operation::Append(entries)
}

fn generate_hard_state(rng: &mut TestRng, model: &mut LogModel) -> Operation {
    let previous = model.hard_state;
    let mut next = previous;
    if rng.chance(40) {
        model.term += 1;
        next.term = Term(model.term);
        next.voted_for = None;
    } else {
        next.term = Term(model.term.max(previous.term.0));
        if next.term != previous.term {
            next.voted_for = None;
        }
    }
    if next.voted_for.is_none() && rng.chance(60) {
        next.voted_for = Some(NodeId(1 + rng.below(3)));
    }
    next.commit = LogIndex(rng.below(model.last_index() + 1));
    model.hard_state = next;
    Operation::HardState(next)
}

fn generate_snapshot(rng: &mut TestRng, model: &mut LogModel) -> Operation {
    let last = model.last_index();
    let (index, term) = if rng.chance(70) {
        let index = model.snapshot_index + rng.below(last - model.snapshot_index + 1);
        (index, model.term_at(index).expect("within the log"))
    } else {
        // An installed snapshot from a leader: possibly beyond the log, or
        // with a term the log does not have there.
        model.term += 1;
        (
            model.snapshot_index + rng.below(last - model.snapshot_index + 6),
            model.term,
        )
    };
    if model.term_at(index) == Some(term) {
        model.terms.drain(..(index - model.snapshot_index) as usize);
    } else {
        model.terms.clear();
    }
    model.snapshot_index = index;
    model.snapshot_term = term;
    Operation::Snapshot(snapshot(index, term))
}

/// The states a crash may leave, by position in the operation list.
///
/// `states[k]` holds the state after the first `k` operations, followed by
/// the states in which only a prefix of operation `k`'s entries survived
/// (an append split over several records can be cut between them).
pub fn oracle_states(operations: &[Operation]) -> Vec<Vec<Recovered>> {
    let mut model = MemoryStorage::new();
    let mut states = Vec::with_capacity(operations.len() + 1);
    for operation in operations {
        let mut here = vec![model.clone().recover().unwrap()];
        if let Operation::Append(entries) = operation {
            for cut in 1..entries.len() {
                let mut partial = model.clone();
                partial.append(&entries[..cut]).unwrap();
                here.push(partial.recover().unwrap());
            }
        }
        states.push(here);
        operation.apply(&mut model).unwrap();
    }
    states.push(vec![model.recover().unwrap()]);
    states
}

/// Whether `recovered` is one of the states at positions `from..=to`.
pub fn is_allowed(
    states: &[Vec<Recovered>],
    from: usize,
    to: usize,
    recovered: &Recovered,
) -> bool {
    states[from..=to.min(states.len() - 1)]
        .iter()
        .flatten()
        .any(|state| state == recovered)
}

/// A short description of a recovered state, for failure messages.
pub fn describe(recovered: &Recovered) -> String {
    format!(
        "hard_state={:?} snapshot={:?} entries={:?}",
        recovered.hard_state,
        recovered
            .snapshot
            .as_ref()
            .map(|s| (s.meta.last_index, s.meta.last_term)),
        recovered
            .entries
            .iter()
            .map(|e| (e.index.0, e.term.0))
            .collect::<Vec<_>>()
    )
}

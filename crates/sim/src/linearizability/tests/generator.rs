//! Random histories that are linearizable by construction.
//!
//! Each operation gets a real linearization point inside its interval, and a
//! real register per key is run in the order of those points to produce the
//! responses. Clients issue one operation at a time; a client that times out
//! moves on, while its operation either never takes effect or takes effect
//! later, possibly after the client's next operations (a delayed message).
//! Every written value is unique, which makes some mutations provably wrong.

use crate::linearizability::{ClientId, Command, Key, Operation, Response, Value};
use std::collections::BTreeMap;

/// Steele, Lea & Flood's SplitMix64: tiny, fast, and good enough to drive
/// tests; seeded explicitly so each seed replays exactly.
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub(super) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound`; `bound` must be positive. The modulo bias is
    /// irrelevant for tests.
    pub(super) fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0);
        self.next_u64() % bound
    }

    /// True with probability `percent`/100.
    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The size and timing of a generated history.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shape {
    /// Concurrent clients.
    pub(super) clients: u64,
    /// Keys, all hot.
    pub(super) keys: u64,
    /// Operations in the history.
    pub(super) operations: usize,
    /// Chance that a client times out on an operation.
    pub(super) indeterminate_percent: u64,
    /// Largest delay from invoke to effect, and from effect to completion.
    pub(super) latency_us_max: u64,
}

/// An operation before its response is known.
struct Planned {
    /// The record, with a placeholder outcome until `respond` fills it.
    operation: Operation,
    /// When the operation takes effect; `None` if it never does.
    effect_us: Option<u64>,
    /// Completion time, if the client got an answer.
    complete_us: Option<u64>,
}

/// A linearizable history of `shape`, reproducible from `seed`.
pub(super) fn generate(seed: u64, shape: Shape) -> Vec<Operation> {
    assert!(shape.clients > 0 && shape.keys > 0 && shape.latency_us_max > 0);
    let mut rng = SplitMix64::new(seed);
    let mut free_us: Vec<u64> = vec![0; shape.clients as usize];
    let mut last_written: BTreeMap<Key, Value> = BTreeMap::new();
    let mut planned = Vec::with_capacity(shape.operations);
    for value_counter in 0..shape.operations as u64 {
        // The client that has been idle longest goes next, so all overlap.
        let client = (0..free_us.len())
            .min_by_key(|&c| (free_us[c], c))
            .expect("clients");
        let invoke_us = free_us[client] + rng.below(shape.latency_us_max / 2 + 1);
        let command = random_command(
            &mut rng,
            shape.keys,
            Value(value_counter + 1),
            &mut last_written,
        );
        let latency_us = shape.latency_us_max;
        let (effect_us, complete_us) = if rng.chance(shape.indeterminate_percent) {
            let timeout_us = 3 * latency_us;
            free_us[client] = invoke_us + timeout_us;
            let effect_us = invoke_us + rng.below(6 * latency_us);
            (rng.chance(50).then_some(effect_us), None)
        } else {
            let effect_us = invoke_us + rng.below(latency_us + 1);
            let complete_us = effect_us + rng.below(latency_us + 1);
            free_us[client] = complete_us;
            (Some(effect_us), Some(complete_us))
        };
        let operation = Operation::indeterminate(ClientId(client as u64), command, invoke_us);
        planned.push(Planned {
            operation,
            effect_us,
            complete_us,
        });
    }
    respond(planned)
}

/// A random command on a random key; writes use `value`, and CAS usually
/// expects the last value generated for the key so it often succeeds.
fn random_command(
    rng: &mut SplitMix64,
    keys: u64,
    value: Value,
    last_written: &mut BTreeMap<Key, Value>,
) -> Command {
    let key = Key(rng.below(keys));
    // Leased values are odd and every other even, so that a revoke names
    // only what a leased put wrote, as the model requires.
    let (value, leased) = (Value(value.0 * 2), Value(value.0 * 2 + 1));
    match rng.below(12) {
        0..=3 => Command::Get { key },
        4..=6 => {
            last_written.insert(key, value);
            Command::Put { key, value }
        }
        7 => {
            last_written.insert(key, leased);
            Command::LeasedPut { key, value: leased }
        }
        8 => match last_written.get(&key) {
            Some(&lease) if lease.0 % 2 == 1 => Command::Revoke { key, lease },
            _ => Command::Get { key },
        },
        _ => {
            let expected = if rng.chance(80) {
                last_written.get(&key).copied()
            } else {
                None
            };
            last_written.insert(key, value);
            Command::CompareAndSet {
                key,
                expected,
                new: value,
            }
        }
    }
}

/// Runs a register per key through the effects in time order and fills in
/// the responses of the operations that completed.
fn respond(planned: Vec<Planned>) -> Vec<Operation> {
    let mut effects: Vec<usize> = (0..planned.len())
        .filter(|&i| planned[i].effect_us.is_some())
        .collect();
    effects.sort_by_key(|&i| (planned[i].effect_us, i));
    let mut registers: BTreeMap<Key, Value> = BTreeMap::new();
    let mut responses: Vec<Option<Response>> = vec![None; planned.len()];
    for i in effects {
        let command = planned[i].operation.command;
        let current = registers.get(&command.key()).copied();
        responses[i] = Some(match command {
            Command::Put { key, value } => {
                registers.insert(key, value);
                Response::Put
            }
            Command::LeasedPut { key, value } => {
                registers.insert(key, value);
                Response::Put
            }
            Command::Revoke { key, lease } => {
                if current == Some(lease) {
                    registers.remove(&key);
                }
                Response::Revoked
            }
            Command::Get { .. } => Response::Get(current),
            Command::CompareAndSet { key, expected, new } => {
                let succeeded = current == expected;
                if succeeded {
                    registers.insert(key, new);
                }
                Response::CompareAndSet(succeeded)
            }
        });
    }
    planned
        .into_iter()
        .zip(responses)
        .map(|(plan, response)| match (plan.complete_us, response) {
            (Some(complete_us), Some(response)) => Operation::ok(
                plan.operation.client,
                plan.operation.command,
                plan.operation.invoke_us,
                complete_us,
                response,
            ),
            (None, _) => plan.operation,
            (Some(_), None) => unreachable!("a completed operation always takes effect"),
        })
        .collect()
}

//! The search against the definition: on small random histories, the
//! verdict of `check` must equal that of a plain enumeration of every order
//! (no memo table, no cuts), written independently of the search and the
//! register model. This is what shows the cuts for unknown-outcome
//! operations are sound (no false "not linearizable") and the search
//! complete.

use super::generator::{generate, Shape, SplitMix64};
use crate::linearizability::{
    check, CheckOptions, CheckResult, ClientId, Command, Key, Operation, Outcome, Response, Value,
};

/// Random histories compared.
const HISTORIES_MAX: u64 = 20_000;
/// Operations per history; enumeration is factorial in this.
const OPERATIONS_MAX: u64 = 7;

/// A value from a domain of three, or absent.
fn small_value(rng: &mut SplitMix64) -> Option<Value> {
    (rng.below(4) > 0).then(|| Value(rng.below(3) + 1))
}

/// A random, usually non-linearizable history on one key.
fn random_history(rng: &mut SplitMix64) -> Vec<Operation> {
    let key = Key(0);
    (0..1 + rng.below(OPERATIONS_MAX))
        .map(|client| {
            let (command, response) = match rng.below(3) {
                0 => (Command::Get { key }, Response::Get(small_value(rng))),
                1 => (
                    Command::Put {
                        key,
                        value: Value(rng.below(3) + 1),
                    },
                    Response::Put,
                ),
                _ => {
                    let (expected, new) = (small_value(rng), Value(rng.below(3) + 1));
                    (
                        Command::CompareAndSet { key, expected, new },
                        Response::CompareAndSet(rng.chance(50)),
                    )
                }
            };
            let invoke_us = rng.below(30);
            if rng.chance(35) {
                return Operation::indeterminate(ClientId(client), command, invoke_us);
            }
            let complete_us = invoke_us + rng.below(15);
            Operation::ok(ClientId(client), command, invoke_us, complete_us, response)
        })
        .collect()
}

/// The register's sequential semantics, restated: the next value if
/// `operation` may answer as recorded in `value`, else `None`.
fn apply(operation: &Operation, value: Option<Value>) -> Option<Option<Value>> {
    let response = operation.response();
    match operation.command {
        Command::Put { value: written, .. } | Command::LeasedPut { value: written, .. } => {
            match response {
                None | Some(&Response::Put) => Some(Some(written)),
                Some(_) => None,
            }
        }
        Command::Revoke { lease, .. } => match response {
            None | Some(&Response::Revoked) => {
                Some(if value == Some(lease) { None } else { value })
            }
            Some(_) => None,
        },
        Command::Get { .. } => match response {
            None => Some(value),
            Some(&Response::Get(read)) => (read == value).then_some(value),
            Some(_) => None,
        },
        Command::CompareAndSet { expected, new, .. } => {
            let next = if value == expected { Some(new) } else { value };
            match response {
                None => Some(next),
                Some(&Response::CompareAndSet(ok)) => (ok == (value == expected)).then_some(next),
                Some(_) => None,
            }
        }
    }
}

/// Tries every order: any unplaced operation may go next unless an unplaced
/// completed one finished before it was invoked; done once every completed
/// operation is placed (the rest never took effect).
fn linearizable_by_enumeration(
    history: &[Operation],
    placed: &mut Vec<bool>,
    value: Option<Value>,
) -> bool {
    let unplaced_completed =
        |i: usize, placed: &[bool]| !placed[i] && history[i].complete_us().is_some();
    if !(0..history.len()).any(|i| unplaced_completed(i, placed)) {
        return true;
    }
    for i in 0..history.len() {
        let blocked = (0..history.len()).any(|j| {
            unplaced_completed(j, placed) && history[j].complete_us() < Some(history[i].invoke_us)
        });
        if placed[i] || blocked {
            continue;
        }
        let Some(next) = apply(&history[i], value) else {
            continue;
        };
        placed[i] = true;
        let found = linearizable_by_enumeration(history, placed, next);
        placed[i] = false;
        if found {
            return true;
        }
    }
    false
}

#[test]
fn search_agrees_with_enumeration_of_all_orders() {
    let mut rng = SplitMix64::new(7);
    let (mut linearizable, mut violations) = (0, 0);
    for seed in 0..HISTORIES_MAX {
        let history = random_history(&mut rng);
        let expected = linearizable_by_enumeration(&history, &mut vec![false; history.len()], None);
        let result = check(&history, &CheckOptions::default());
        match (&result, expected) {
            (CheckResult::Linearizable, true) => linearizable += 1,
            (CheckResult::NotLinearizable { .. }, false) => violations += 1,
            _ => panic!(
                "history {seed}: search says {result}, enumeration says {expected}\n{history:#?}"
            ),
        }
    }
    // Both verdicts must be well represented for the comparison to mean much.
    assert!(
        linearizable > HISTORIES_MAX / 5 && violations > HISTORIES_MAX / 5,
        "{linearizable} vs {violations}"
    );
}

#[test]
fn search_agrees_with_enumeration_on_generated_histories() {
    // Realistic shapes (sequential clients, timeouts, unique values), half
    // of them with one read changed to a random small value.
    let mut rng = SplitMix64::new(11);
    let shape = Shape {
        clients: 4,
        keys: 1,
        operations: 9,
        indeterminate_percent: 30,
        latency_us_max: 10,
    };
    let (mut linearizable, mut violations) = (0, 0);
    for seed in 0..HISTORIES_MAX / 4 {
        let mut history = generate(seed, shape);
        let target = rng.below(history.len() as u64) as usize;
        if let (
            true,
            Outcome::Ok {
                response: Response::Get(read),
                ..
            },
        ) = (rng.chance(50), &mut history[target].outcome)
        {
            *read = (rng.below(4) > 0).then(|| Value(rng.below(9) + 1));
        }
        let expected = linearizable_by_enumeration(&history, &mut vec![false; history.len()], None);
        let result = check(&history, &CheckOptions::default());
        match (&result, expected) {
            (CheckResult::Linearizable, true) => linearizable += 1,
            (CheckResult::NotLinearizable { .. }, false) => violations += 1,
            _ => panic!(
                "history {seed}: search says {result}, enumeration says {expected}\n{history:#?}"
            ),
        }
    }
    assert!(
        linearizable > HISTORIES_MAX / 10 && violations > HISTORIES_MAX / 100,
        "{linearizable} vs {violations}"
    );
}

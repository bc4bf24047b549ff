//! Lets the search treat timed-out writes of values that nothing will read
//! as interchangeable.
//!
//! A compare-and-set that failed needs *some* value other than the one it
//! expected, and any timed-out write can supply it. When a write's value is
//! never observed — no read returns it, no compare-and-set expects it — the
//! write is no different from a write of any other unobserved value, yet the
//! search would try each such write in turn and revisit the rest of the
//! history once per choice: exponential in their number. The same holds
//! from the moment every operation that does observe the value is placed.
//!
//! So every unknown-outcome write of value v gets a stand-in command that
//! writes one fresh value instead: from the start if nothing observes v,
//! else once every completed observer of v (they all finish by some time T)
//! is placed, which the search knows from its real-time frontier passing T.
//! No operation left can tell v from the fresh value, so no verdict changes,
//! and equal stand-ins make the writes interchangeable (symmetry reduction;
//! see [`super::classes`]). An unknown-outcome compare-and-set that expects
//! v may be placed at any time, so v then keeps its identity throughout.

use super::command::{Command, Response, Value};
use super::operation::Operation;
use std::collections::{BTreeMap, BTreeSet};

/// The command the search uses for one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SearchCommand {
    /// The command from the start.
    pub(super) early: Command,
    /// `(after_us, command)`: once every completed operation that finished
    /// by `after_us` is placed, the operation acts as `command`.
    pub(super) late: Option<(u64, Command)>,
}

/// What the search should use for the operations at `indices`.
pub(super) fn search_commands(history: &[Operation], indices: &[usize]) -> Vec<SearchCommand> {
    let operations = || indices.iter().map(|&index| &history[index]);
    // Value → completion time of its last completed observer; `None` when an
    // unknown-outcome operation observes it.
    let mut observed_until: BTreeMap<Value, Option<u64>> = BTreeMap::new();
    let mut mentioned = BTreeSet::new();
    for operation in operations() {
        if let Some(value) = observed(operation) {
            let until = observed_until.entry(value).or_insert(Some(0));
            *until = until.zip(operation.complete_us()).map(|(a, b)| a.max(b));
        }
        mentioned.extend(observed(operation));
        mentioned.extend(written(&operation.command));
    }
    let fresh = fresh_value(&mentioned);
    operations()
        .map(|operation| {
            let unchanged = SearchCommand {
                early: operation.command,
                late: None,
            };
            let Some(value) = written(&operation.command) else {
                return unchanged;
            };
            if operation.complete_us().is_some() {
                return unchanged;
            }
            let stand_in = rewritten(operation.command, fresh);
            match observed_until.get(&value) {
                None => SearchCommand {
                    early: stand_in,
                    late: None,
                },
                Some(Some(until_us)) => SearchCommand {
                    early: operation.command,
                    late: Some((*until_us, stand_in)),
                },
                Some(None) => unchanged,
            }
        })
        .collect()
}

/// The value whose identity `operation` observes: the one a read returned,
/// a compare-and-set expected, or a revoke names as its lease.
fn observed(operation: &Operation) -> Option<Value> {
    match (operation.command, operation.response()) {
        (Command::Get { .. }, Some(Response::Get(read))) => *read,
        (Command::CompareAndSet { expected, .. }, _) => expected,
        (Command::Revoke { lease, .. }, _) => Some(lease),
        _ => None,
    }
}

/// The value a command may write.
fn written(command: &Command) -> Option<Value> {
    match *command {
        Command::Put { value, .. } | Command::LeasedPut { value, .. } => Some(value),
        Command::CompareAndSet { new, .. } => Some(new),
        Command::Get { .. } | Command::Revoke { .. } => None,
    }
}

/// `command` writing `value` instead of its own value.
fn rewritten(command: Command, value: Value) -> Command {
    match command {
        Command::Put { key, .. } => Command::Put { key, value },
        // The model treats a leased put as a put once no revoke names its
        // value, and equal stand-ins are what makes them interchangeable.
        Command::LeasedPut { key, .. } => Command::Put { key, value },
        Command::CompareAndSet { key, expected, .. } => Command::CompareAndSet {
            key,
            expected,
            new: value,
        },
        Command::Get { .. } | Command::Revoke { .. } => {
            unreachable!("unobserved: a get or a revoke writes no value")
        }
    }
}

/// The smallest value not in `mentioned`.
fn fresh_value(mentioned: &BTreeSet<Value>) -> Value {
    let mut candidate = 0u64;
    // Ascending order: the first gap is the answer, at most len + 1 steps.
    for value in mentioned {
        if value.0 != candidate {
            break;
        }
        candidate += 1;
    }
    assert!(
        !mentioned.contains(&Value(candidate)),
        "unobserved: fresh value is taken"
    );
    Value(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linearizability::{ClientId, Key};

    const KEY: Key = Key(1);

    fn put_timeout(value: u64) -> Operation {
        Operation::indeterminate(
            ClientId(1),
            Command::Put {
                key: KEY,
                value: Value(value),
            },
            0,
        )
    }

    #[test]
    fn timed_out_writes_get_stand_ins_when_their_value_is_no_longer_observed() {
        let history = [
            Operation::ok(
                ClientId(1),
                Command::Put {
                    key: KEY,
                    value: Value(0),
                },
                0,
                1,
                Response::Put,
            ),
            put_timeout(5),
            put_timeout(6),
            put_timeout(7),
            Operation::ok(
                ClientId(2),
                Command::Get { key: KEY },
                5,
                6,
                Response::Get(Some(Value(6))),
            ),
            Operation::ok(
                ClientId(2),
                Command::Get { key: KEY },
                7,
                9,
                Response::Get(Some(Value(6))),
            ),
            Operation::indeterminate(
                ClientId(3),
                Command::CompareAndSet {
                    key: KEY,
                    expected: Some(Value(7)),
                    new: Value(8),
                },
                0,
            ),
        ];
        let commands = search_commands(&history, &[0, 1, 2, 3, 4, 5, 6]);
        // 0 and 5..=8 are mentioned, so 1 is the fresh value.
        let stand_in = Command::Put {
            key: KEY,
            value: Value(1),
        };
        assert_eq!(
            commands[1],
            SearchCommand {
                early: stand_in,
                late: None
            },
            "5 is never observed"
        );
        assert_eq!(
            commands[2],
            SearchCommand {
                early: history[2].command,
                late: Some((9, stand_in))
            }
        );
        assert_eq!(
            commands[3].late, None,
            "7 is expected by an unknown-outcome CAS"
        );
        assert_eq!(commands[0].late, None, "completed writes keep their value");
        assert_eq!(commands[6].early.key(), KEY);
        assert_eq!(
            commands[6].late.map(|(after_us, _)| after_us),
            None,
            "8 is never observed"
        );
    }
}

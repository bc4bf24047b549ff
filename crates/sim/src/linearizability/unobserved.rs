//! Makes timed-out writes of values that nothing observes interchangeable.
//!
//! A compare-and-set that failed needs *some* value other than the one it
//! expected, and any timed-out write can supply it. When those writes store
//! values that no read returns and no compare-and-set expects, which one
//! supplied it makes no difference to anything that follows — yet the
//! search would try each, and revisit the rest of the history once per
//! choice, which is exponential in the number of such writes. Rewriting all
//! such values to one fresh value changes no verdict (no operation can tell
//! them apart) and makes the writes equal commands, which the search then
//! treats as interchangeable (cut 4 in [`super::search`]). This is symmetry
//! reduction in the sense of model checking (Clarke, Emerson & Sistla,
//! "Symmetry reductions in model checking", 1998), specialized to the
//! register.

use super::command::{Command, Response, Value};
use super::operation::Operation;
use std::collections::BTreeSet;

/// The commands of the operations at `indices`, with every unknown-outcome
/// write of an unobserved value rewritten to write one shared fresh value.
pub(super) fn interchangeable_commands(history: &[Operation], indices: &[usize]) -> Vec<Command> {
    let operations = || indices.iter().map(|&index| &history[index]);
    let mut observed = BTreeSet::new();
    let mut mentioned = BTreeSet::new();
    for operation in operations() {
        match (operation.command, operation.response()) {
            (Command::Get { .. }, Some(Response::Get(Some(value)))) => {
                observed.insert(*value);
            }
            (Command::CompareAndSet { expected: Some(value), .. }, _) => {
                observed.insert(value);
            }
            _ => {}
        }
        if let Some(value) = written(&operation.command) {
            mentioned.insert(value);
        }
    }
    mentioned.extend(observed.iter().copied());
    let fresh = fresh_value(&mentioned);
    operations()
        .map(|operation| match operation.command {
            Command::Put { key, value }
                if operation.complete_us().is_none() && !observed.contains(&value) =>
            {
                Command::Put { key, value: fresh }
            }
            Command::CompareAndSet { key, expected, new }
                if operation.complete_us().is_none() && !observed.contains(&new) =>
            {
                Command::CompareAndSet { key, expected, new: fresh }
            }
            command => command,
        })
        .collect()
}

/// The value a command may write.
fn written(command: &Command) -> Option<Value> {
    match *command {
        Command::Put { value, .. } => Some(value),
        Command::CompareAndSet { new, .. } => Some(new),
        Command::Get { .. } => None,
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
    assert!(!mentioned.contains(&Value(candidate)), "unobserved: fresh value is taken");
    Value(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linearizability::{ClientId, Key};

    #[test]
    fn only_unobserved_timed_out_writes_are_rewritten() {
        let key = Key(1);
        let history = [
            Operation::ok(ClientId(1), Command::Put { key, value: Value(0) }, 0, 1, Response::Put),
            Operation::indeterminate(ClientId(2), Command::Put { key, value: Value(5) }, 2),
            Operation::indeterminate(ClientId(3), Command::Put { key, value: Value(6) }, 3),
            Operation::indeterminate(ClientId(4), Command::Put { key, value: Value(7) }, 4),
            Operation::ok(ClientId(5), Command::Get { key }, 5, 6, Response::Get(Some(Value(6)))),
            Operation::ok(ClientId(5), Command::Put { key, value: Value(9) }, 7, 8, Response::Put),
        ];
        let commands = interchangeable_commands(&history, &[0, 1, 2, 3, 4, 5]);
        // 0, 5, 6, 7, 9 are mentioned, so 1 is the fresh value.
        assert_eq!(commands[1], Command::Put { key, value: Value(1) });
        assert_eq!(commands[2], history[2].command, "6 is read, so it stays");
        assert_eq!(commands[3], Command::Put { key, value: Value(1) });
        assert_eq!(commands[5], history[5].command, "completed writes stay");
    }
}

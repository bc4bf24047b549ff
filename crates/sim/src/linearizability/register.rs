//! The sequential specification of one key of the store: a register that
//! starts absent and supports put, get, compare-and-set, a put under a
//! lease and the lease's revoke.
//!
//! A leased put's lease id is the value it writes (values are unique), so
//! the state needs nothing beyond the value: a revoke of lease `v` removes
//! the key exactly when it holds `v`, that is, when the last write was the
//! leased put of `v` (a later put or compare-and-set detached the key from
//! the lease, as etcd does).
//!
//! One register per key is enough because a command touches a single key, so
//! the history splits into independent per-key histories (Horn & Kroening,
//! "Faster linearizability checking via P-compositionality", 2015; and
//! Herlihy & Wing 1990, Theorem 1: linearizability is local).

use super::command::{Command, Response, Value};
use super::model::Model;

/// A single register; its state is the current value, `None` when absent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Register;

impl Model for Register {
    type State = Option<Value>;
    type Command = Command;
    type Response = Response;

    fn initial_state(&self) -> Option<Value> {
        None
    }

    fn step(
        &self,
        state: &Option<Value>,
        command: &Command,
        response: Option<&Response>,
    ) -> Option<Option<Value>> {
        match (*command, response) {
            (
                Command::Put { value, .. } | Command::LeasedPut { value, .. },
                None | Some(Response::Put),
            ) => Some(Some(value)),
            (Command::Revoke { lease, .. }, None | Some(Response::Revoked)) => {
                Some(if *state == Some(lease) { None } else { *state })
            }
            (Command::Get { .. }, None) => Some(*state),
            (Command::Get { .. }, Some(Response::Get(read))) => (read == state).then_some(*state),
            (Command::CompareAndSet { expected, new, .. }, observed) => {
                let matches = *state == expected;
                match observed {
                    // Unknown answer: the command did whatever the state dictates.
                    None => Some(if matches { Some(new) } else { *state }),
                    Some(Response::CompareAndSet(succeeded)) => {
                        (*succeeded == matches).then_some(if matches { Some(new) } else { *state })
                    }
                    Some(_) => None,
                }
            }
            // A response of the wrong kind is never allowed.
            (
                Command::Put { .. }
                | Command::Get { .. }
                | Command::LeasedPut { .. }
                | Command::Revoke { .. },
                Some(_),
            ) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linearizability::command::Key;

    const KEY: Key = Key(1);

    #[test]
    fn get_must_read_the_current_value() {
        let get = Command::Get { key: KEY };
        let state = Some(Value(3));
        assert_eq!(
            Register.step(&state, &get, Some(&Response::Get(state))),
            Some(state)
        );
        assert_eq!(
            Register.step(&state, &get, Some(&Response::Get(None))),
            None
        );
        assert_eq!(
            Register.step(&None, &get, Some(&Response::Get(state))),
            None
        );
    }

    #[test]
    fn compare_and_set_succeeds_exactly_when_expected_matches() {
        let cas = Command::CompareAndSet {
            key: KEY,
            expected: None,
            new: Value(7),
        };
        let yes = Response::CompareAndSet(true);
        let no = Response::CompareAndSet(false);
        assert_eq!(Register.step(&None, &cas, Some(&yes)), Some(Some(Value(7))));
        assert_eq!(Register.step(&None, &cas, Some(&no)), None);
        assert_eq!(Register.step(&Some(Value(1)), &cas, Some(&yes)), None);
        assert_eq!(
            Register.step(&Some(Value(1)), &cas, Some(&no)),
            Some(Some(Value(1)))
        );
        // Unknown answer: applied if it matches, no effect otherwise.
        assert_eq!(Register.step(&None, &cas, None), Some(Some(Value(7))));
        assert_eq!(
            Register.step(&Some(Value(1)), &cas, None),
            Some(Some(Value(1)))
        );
    }

    #[test]
    fn a_revoke_removes_the_key_only_while_it_holds_the_leased_value() {
        let leased = Command::LeasedPut {
            key: KEY,
            value: Value(5),
        };
        let revoke = Command::Revoke {
            key: KEY,
            lease: Value(5),
        };
        let state = Register.step(&None, &leased, Some(&Response::Put));
        assert_eq!(state, Some(Some(Value(5))));
        assert_eq!(
            Register.step(&Some(Value(5)), &revoke, Some(&Response::Revoked)),
            Some(None)
        );
        assert_eq!(
            Register.step(&Some(Value(6)), &revoke, None),
            Some(Some(Value(6))),
            "a later put detached the key"
        );
        assert_eq!(
            Register.step(&Some(Value(5)), &revoke, Some(&Response::Put)),
            None
        );
    }

    #[test]
    fn wrong_response_kind_is_rejected() {
        let put = Command::Put {
            key: KEY,
            value: Value(1),
        };
        assert_eq!(Register.step(&None, &put, Some(&Response::Get(None))), None);
        assert_eq!(
            Register.step(&None, &put, Some(&Response::Put)),
            Some(Some(Value(1)))
        );
    }
}

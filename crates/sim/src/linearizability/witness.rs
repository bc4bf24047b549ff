//! Independent validation of a linearization the search claims to have
//! found.
//!
//! The search is intricate (memo table, three cuts, dancing links); the
//! definition it decides is simple (Herlihy & Wing 1990, section 2). Checking
//! every "linearizable" verdict against the definition costs O(n) and turns
//! a bug in the search that would claim a false success into a loud failure.

use super::model::Model;
use super::search::Call;

/// Checks that `order` (call indices) is a linearization of `calls`: every
/// completed operation appears once, unknown-outcome ones at most once, no
/// operation precedes one that completed before it was invoked, and the
/// model accepts every step. Returns what is wrong otherwise.
pub(super) fn validate<M: Model>(
    model: &M,
    calls: &[Call<'_, M>],
    order: &[usize],
) -> Result<(), String> {
    let mut placed = vec![false; calls.len()];
    let mut invoke_max_us = 0;
    let mut state = model.initial_state();
    for (position, &index) in order.iter().enumerate() {
        let call = calls
            .get(index)
            .ok_or(format!("index {index} out of range"))?;
        if std::mem::replace(&mut placed[index], true) {
            return Err(format!("operation {index} placed twice"));
        }
        // Real time: an earlier-placed operation must not have been invoked
        // after this one completed.
        if call
            .complete_us
            .is_some_and(|complete_us| complete_us < invoke_max_us)
        {
            return Err(format!(
                "operation {index} at position {position} completed before an earlier-placed one was invoked"
            ));
        }
        invoke_max_us = invoke_max_us.max(call.invoke_us);
        state = model
            .step(&state, call.command, call.response)
            .ok_or(format!(
                "the model rejects operation {index} at position {position}"
            ))?;
    }
    match (0..calls.len()).find(|&i| calls[i].complete_us.is_some() && !placed[i]) {
        Some(missing) => Err(format!("completed operation {missing} never placed")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::validate;
    use crate::linearizability::register::Register;
    use crate::linearizability::search::Call;
    use crate::linearizability::{Command, Key, Response, Value};

    const PUT: Command = Command::Put {
        key: Key(1),
        value: Value(1),
    };
    const GET: Command = Command::Get { key: Key(1) };
    const READ_ONE: Response = Response::Get(Some(Value(1)));

    fn call<'h>(
        command: &'h Command,
        response: Option<&'h Response>,
        at: (u64, Option<u64>),
    ) -> Call<'h, Register> {
        Call {
            command,
            response,
            invoke_us: at.0,
            complete_us: at.1,
            late: None,
        }
    }

    #[test]
    fn accepts_a_valid_linearization() {
        let calls = [
            call(&PUT, Some(&Response::Put), (0, Some(10))),
            call(&GET, Some(&READ_ONE), (20, Some(30))),
        ];
        assert_eq!(validate(&Register, &calls, &[0, 1]), Ok(()));
    }

    #[test]
    fn rejects_each_kind_of_invalid_order() {
        let calls = [
            call(&PUT, Some(&Response::Put), (20, Some(30))),
            call(&GET, Some(&READ_ONE), (0, Some(10))),
        ];
        // Real time: the get completed before the put was invoked.
        assert!(validate(&Register, &calls, &[0, 1])
            .unwrap_err()
            .contains("completed before"));
        // Model: the get reads 1 before anything was written.
        assert!(validate(&Register, &calls, &[1, 0])
            .unwrap_err()
            .contains("model rejects"));
        assert!(validate(&Register, &calls, &[0])
            .unwrap_err()
            .contains("never placed"));
        assert!(validate(&Register, &calls, &[0, 0])
            .unwrap_err()
            .contains("twice"));
    }

    #[test]
    fn unknown_outcome_operations_are_optional() {
        let calls = [call(&PUT, None, (0, None))];
        assert_eq!(validate(&Register, &calls, &[]), Ok(()));
        assert_eq!(validate(&Register, &calls, &[0]), Ok(()));
    }
}

//! Hand-written histories, each named after the property it shows. Times are
//! in microseconds; `[a, b]` below is an operation's invoke and completion.

use crate::linearizability::{
    check, CheckOptions, CheckResult, ClientId, Command, Explanation, Key, Operation, Response,
    UnknownReason, Value,
};

const K: u64 = 1;

fn put(client: u64, key: u64, value: u64, invoke_us: u64, complete_us: u64) -> Operation {
    let command = Command::Put {
        key: Key(key),
        value: Value(value),
    };
    Operation::ok(
        ClientId(client),
        command,
        invoke_us,
        complete_us,
        Response::Put,
    )
}

fn get(client: u64, key: u64, read: Option<u64>, invoke_us: u64, complete_us: u64) -> Operation {
    let command = Command::Get { key: Key(key) };
    let response = Response::Get(read.map(Value));
    Operation::ok(ClientId(client), command, invoke_us, complete_us, response)
}

fn cas(client: u64, expected: Option<u64>, new: u64, ok: bool, at: (u64, u64)) -> Operation {
    let command = Command::CompareAndSet {
        key: Key(K),
        expected: expected.map(Value),
        new: Value(new),
    };
    Operation::ok(
        ClientId(client),
        command,
        at.0,
        at.1,
        Response::CompareAndSet(ok),
    )
}

fn put_timeout(client: u64, value: u64, invoke_us: u64) -> Operation {
    let command = Command::Put {
        key: Key(K),
        value: Value(value),
    };
    Operation::indeterminate(ClientId(client), command, invoke_us)
}

fn cas_timeout(client: u64, expected: Option<u64>, new: u64, invoke_us: u64) -> Operation {
    let command = Command::CompareAndSet {
        key: Key(K),
        expected: expected.map(Value),
        new: Value(new),
    };
    Operation::indeterminate(ClientId(client), command, invoke_us)
}

fn verdict(history: &[Operation]) -> CheckResult {
    check(history, &CheckOptions::default())
}

fn assert_linearizable(history: &[Operation]) {
    let result = verdict(history);
    assert!(
        result.is_linearizable(),
        "expected linearizable, got {result}"
    );
}

/// Asserts a violation on `key` and returns its explanation.
fn assert_violation(history: &[Operation], key: u64) -> Explanation {
    match verdict(history) {
        CheckResult::NotLinearizable {
            key: found,
            explanation,
        } => {
            assert_eq!(found, Key(key), "violation reported on the wrong key");
            *explanation
        }
        other => panic!("expected a violation on k{key}, got {other}"),
    }
}

#[test]
fn empty_history_is_linearizable() {
    assert_linearizable(&[]);
}

#[test]
fn sequential_history_passes() {
    assert_linearizable(&[
        get(1, K, None, 0, 1),
        put(1, K, 1, 2, 3),
        get(2, K, Some(1), 4, 5),
        cas(3, Some(1), 2, true, (6, 7)),
        cas(1, Some(1), 3, false, (8, 9)),
        get(2, K, Some(2), 10, 11),
        cas(2, None, 4, false, (12, 13)),
        put(3, K, 5, 14, 15),
        get(1, K, Some(5), 16, 17),
    ]);
}

#[test]
fn concurrent_overlapping_operations_that_admit_an_order_pass() {
    // put(1) [0, 50] and put(2) [10, 60] overlap; the reads force the order
    // put(2), get -> 2, put(1), get -> 1, which fits every interval.
    assert_linearizable(&[
        put(1, K, 1, 0, 50),
        put(2, K, 2, 10, 60),
        get(3, K, Some(2), 20, 30),
        get(4, K, Some(1), 40, 70),
        // A CAS overlapping both reads, applied between them.
        cas(5, Some(2), 3, false, (25, 45)),
    ]);
}

#[test]
fn stale_read_after_a_completed_write_fails() {
    let history = [
        put(1, K, 1, 0, 10),
        put(2, K, 2, 20, 30),
        get(3, K, Some(1), 40, 50),
    ];
    let explanation = assert_violation(&history, K);
    assert_eq!(
        explanation.blocking.index, 2,
        "the stale read is what cannot be placed"
    );
    assert_eq!(explanation.state, Some(Value(2)));
    assert_eq!(explanation.linearized_completed, 2);
    assert!(
        explanation.to_string().contains("#2 c3 get(k1) -> 1"),
        "{explanation}"
    );
}

#[test]
fn read_of_a_value_never_written_fails() {
    let explanation = assert_violation(&[put(1, K, 1, 0, 10), get(2, K, Some(7), 5, 30)], K);
    assert_eq!(explanation.blocking.index, 1);
}

#[test]
fn lost_update_fails() {
    // Two compare-and-sets from the same expected value cannot both succeed.
    let history = [
        put(1, K, 0, 0, 10),
        cas(2, Some(0), 1, true, (20, 40)),
        cas(3, Some(0), 2, true, (25, 45)),
    ];
    assert_violation(&history, K);
    // With one of them failing the same history is fine.
    let mut fixed = history;
    fixed[2] = cas(3, Some(0), 2, false, (25, 45));
    assert_linearizable(&fixed);
}

#[test]
fn read_your_write_violation_fails() {
    // Client 1 writes 1 then 3 and then reads its older write 1.
    let history = [
        put(1, K, 1, 0, 10),
        put(2, K, 2, 5, 100),
        put(1, K, 3, 20, 30),
        get(1, K, Some(1), 40, 50),
    ];
    assert_violation(&history, K);
    // Reading the concurrent write of client 2 instead is allowed.
    let mut fine = history;
    fine[3] = get(1, K, Some(2), 40, 50);
    assert_linearizable(&fine);
}

#[test]
fn completed_put_invisible_to_a_later_get_fails() {
    assert_violation(&[put(1, K, 1, 0, 10), get(2, K, None, 20, 30)], K);
    // Overlapping, the get may come first.
    assert_linearizable(&[put(1, K, 1, 0, 25), get(2, K, None, 20, 30)]);
}

#[test]
fn new_then_old_value_read_fails() {
    // Once a later read saw 2, an even later read cannot see 1 again.
    let history = [
        put(1, K, 1, 0, 10),
        put(2, K, 2, 20, 200),
        get(3, K, Some(2), 30, 40),
        get(4, K, Some(1), 50, 60),
    ];
    assert_violation(&history, K);
}

#[test]
fn touching_intervals_count_as_overlapping() {
    // The get is invoked the very microsecond the put completes.
    assert_linearizable(&[put(1, K, 1, 0, 10), get(2, K, None, 10, 20)]);
}

#[test]
fn indeterminate_put_observed_later_passes() {
    assert_linearizable(&[
        put(1, K, 1, 0, 10),
        put_timeout(2, 2, 20),
        get(3, K, Some(1), 30, 40),
        get(3, K, Some(2), 1_000, 1_010),
        get(1, K, Some(2), 2_000, 2_010),
    ]);
}

#[test]
fn indeterminate_put_never_observed_passes() {
    assert_linearizable(&[
        put(1, K, 1, 0, 10),
        put_timeout(2, 2, 20),
        get(3, K, Some(1), 30, 40),
        get(3, K, Some(1), 1_000, 1_010),
    ]);
}

#[test]
fn indeterminate_put_observed_before_its_invoke_fails() {
    assert_violation(&[get(1, K, Some(2), 0, 10), put_timeout(2, 2, 20)], K);
}

#[test]
fn indeterminate_put_takes_effect_at_most_once() {
    // Seen, then overwritten, then seen again: it cannot apply twice.
    let history = [
        put_timeout(1, 2, 0),
        get(2, K, Some(2), 10, 20),
        put(3, K, 3, 30, 40),
        get(2, K, Some(2), 50, 60),
    ];
    assert_violation(&history, K);
}

#[test]
fn indeterminate_compare_and_set_applies_only_when_it_matches() {
    // Applied: the read of 5 needs it.
    assert_linearizable(&[
        put(1, K, 1, 0, 10),
        cas_timeout(2, Some(1), 5, 20),
        get(3, K, Some(1), 30, 40),
        get(3, K, Some(5), 50, 60),
    ]);
    // It expected 9, which the key never held, so 5 can never appear.
    assert_violation(
        &[
            put(1, K, 1, 0, 10),
            cas_timeout(2, Some(9), 5, 20),
            get(3, K, Some(5), 50, 60),
        ],
        K,
    );
}

#[test]
fn many_unobserved_indeterminate_writes_stay_cheap() {
    // 60 timed-out writes that never took effect, interleaved with reads of
    // the one completed write. Each timed-out write stays a candidate
    // forever; without the search's cuts for them, refuting the bad final
    // read would take far more than the budget.
    let mut history = vec![put(0, K, 1, 0, 10)];
    for i in 0..60 {
        history.push(put_timeout(1 + i, 100 + i, 20 + 10 * i));
        history.push(get(100 + i, K, Some(1), 25 + 10 * i, 26 + 10 * i));
    }
    assert_eq!(
        check(
            &history,
            &CheckOptions {
                search_steps_max: 1_000
            }
        ),
        CheckResult::Linearizable
    );
    history.push(get(0, K, Some(999), 10_000, 10_010));
    let options = CheckOptions {
        search_steps_max: 20_000,
    };
    assert!(matches!(
        check(&history, &options),
        CheckResult::NotLinearizable { .. }
    ));
}

#[test]
fn indeterminate_get_is_ignored() {
    let read = Operation::indeterminate(ClientId(1), Command::Get { key: Key(K) }, 0);
    assert_linearizable(&[read, put(2, K, 1, 5, 10)]);
    // It is not even counted among the key's operations.
    let explanation = assert_violation(&[read, put(2, K, 1, 5, 10), get(3, K, None, 20, 30)], K);
    assert_eq!(explanation.operations, 2);
}

#[test]
fn violation_is_reported_on_its_own_key() {
    let history = [
        put(1, 1, 1, 0, 10),
        put(2, 2, 1, 0, 10),
        put(3, 3, 1, 0, 10),
        get(1, 1, Some(1), 20, 30),
        get(2, 2, None, 20, 30), // the violation: key 2 lost its put
        get(3, 3, Some(1), 20, 30),
        put(1, 2, 5, 40, 50),
        get(2, 2, Some(5), 60, 70),
    ];
    let explanation = assert_violation(&history, 2);
    assert_eq!(explanation.blocking.index, 4);
    let others: Vec<Operation> = history
        .iter()
        .copied()
        .filter(|op| op.key() != Key(2))
        .collect();
    assert_linearizable(&others);
}

#[test]
fn operations_on_different_keys_do_not_interact() {
    assert_linearizable(&[
        put(1, 1, 1, 0, 10),
        get(2, 2, None, 20, 30),
        get(2, 1, Some(1), 40, 50),
    ]);
}

#[test]
fn history_order_does_not_change_the_verdict() {
    let mut history = vec![
        put(1, K, 1, 0, 10),
        put(2, K, 2, 20, 30),
        get(3, K, Some(1), 40, 50),
    ];
    history.reverse();
    assert_violation(&history, K);
}

#[test]
fn step_limit_returns_unknown() {
    let history: Vec<Operation> = (0..50).map(|i| put(1, K, i, 10 * i, 10 * i + 5)).collect();
    let tight = CheckOptions {
        search_steps_max: 10,
    };
    let expected = CheckResult::Unknown {
        key: Key(K),
        reason: UnknownReason::SearchStepsExceeded { steps_max: 10 },
    };
    assert_eq!(check(&history, &tight), expected);
    // The same history with room to finish is linearizable.
    assert_linearizable(&history);
}

#[test]
fn violation_on_one_key_outranks_unknown_on_another() {
    let mut history: Vec<Operation> = (0..50).map(|i| put(1, 1, i, 10 * i, 10 * i + 5)).collect();
    history.extend([put(2, 2, 1, 0, 10), get(2, 2, None, 20, 30)]);
    let tight = CheckOptions {
        search_steps_max: 20,
    };
    match check(&history, &tight) {
        CheckResult::NotLinearizable { key, .. } => assert_eq!(key, Key(2)),
        other => panic!("expected the key-2 violation, got {other}"),
    }
}

#[test]
fn malformed_operations_make_the_result_unknown() {
    let backwards = put(1, K, 1, 10, 5);
    match verdict(&[put(1, K, 1, 0, 1), backwards]) {
        CheckResult::Unknown {
            reason: UnknownReason::MalformedOperation { index, .. },
            ..
        } => {
            assert_eq!(index, 1)
        }
        other => panic!("expected a malformed-operation unknown, got {other}"),
    }
    let wrong_kind = Operation::ok(
        ClientId(1),
        Command::Get { key: Key(K) },
        0,
        1,
        Response::Put,
    );
    assert!(matches!(
        verdict(&[wrong_kind]),
        CheckResult::Unknown {
            reason: UnknownReason::MalformedOperation { index: 0, .. },
            ..
        }
    ));
}

#[test]
fn explanation_limits_its_length() {
    // 40 writes, then a read of the first: the tail shows only the last steps.
    let mut history: Vec<Operation> = (0..40).map(|i| put(1, K, i, 10 * i, 10 * i + 5)).collect();
    history.push(get(2, K, Some(0), 1_000, 1_010));
    let explanation = assert_violation(&history, K);
    assert_eq!(
        explanation.linearized_tail.len(),
        crate::linearizability::EXPLANATION_TAIL_MAX
    );
    assert_eq!(
        explanation.linearized_omitted + explanation.linearized_tail.len(),
        40
    );
    assert_eq!(
        explanation.linearized_tail.last().map(|s| s.state_after),
        Some(Some(Value(39)))
    );
}

//! Checks a key-value history: split it per key, search each key's history
//! for a linearization, and turn the search's findings into a verdict.
//!
//! Splitting is sound because linearizability is local (Herlihy & Wing 1990,
//! Theorem 1): a history is linearizable iff each object's sub-history is,
//! and each key is its own register. It is also what makes the check fast
//! (Horn & Kroening 2015 call this P-compositionality): the search's cost
//! grows with the concurrency inside one partition, not with the whole
//! history.

use super::command::{Command, Key};
use super::explanation::{
    Explanation, IndexedOperation, LinearizedStep, EXPLANATION_CANDIDATES_MAX, EXPLANATION_TAIL_MAX,
};
use super::model::Model;
use super::operation::Operation;
use super::options::CheckOptions;
use super::register::Register;
use super::result::{CheckResult, UnknownReason};
use super::search::{Call, Search, SearchOutcome, Stuck};
use super::unobserved::{search_commands, SearchCommand};
use super::witness::validate;
use std::collections::BTreeMap;

/// Checks whether `history` is linearizable with respect to a map of
/// independent registers, all initially absent.
///
/// Operations may appear in any order. An operation with an indeterminate
/// outcome may have taken effect at any instant after its invoke, or never.
/// Keys are checked in ascending order; the first key that is not
/// linearizable is reported, else the first undecided one.
pub fn check(history: &[Operation], options: &CheckOptions) -> CheckResult {
    if let Some((index, detail)) = first_malformed(history) {
        return CheckResult::Unknown {
            key: history[index].key(),
            reason: UnknownReason::MalformedOperation { index, detail },
        };
    }
    let mut undecided = None;
    for (key, indices) in partition(history) {
        match check_partition(history, &indices, options.search_steps_max) {
            SearchOutcome::Linearizable { .. } => {}
            SearchOutcome::NotLinearizable(stuck) => {
                let explanation = Box::new(explain(history, &indices, &stuck));
                return CheckResult::NotLinearizable { key, explanation };
            }
            SearchOutcome::StepsExceeded { steps } => {
                assert_eq!(steps, options.search_steps_max);
                undecided.get_or_insert(CheckResult::Unknown {
                    key,
                    reason: UnknownReason::SearchStepsExceeded { steps_max: steps },
                });
            }
        }
    }
    undecided.unwrap_or(CheckResult::Linearizable)
}

/// The first record that cannot be checked, with what is wrong with it.
fn first_malformed(history: &[Operation]) -> Option<(usize, String)> {
    history
        .iter()
        .enumerate()
        .find_map(|(index, operation)| operation.malformation().map(|detail| (index, detail)))
}

/// History indices per key, in history order. Timed-out reads are dropped:
/// they observed nothing and changed nothing, so they cannot matter.
fn partition(history: &[Operation]) -> BTreeMap<Key, Vec<usize>> {
    let mut partitions: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (index, operation) in history.iter().enumerate() {
        let unobserved_read =
            matches!(operation.command, Command::Get { .. }) && operation.complete_us().is_none();
        if !unobserved_read {
            partitions.entry(operation.key()).or_default().push(index);
        }
    }
    partitions
}

/// Runs the search over the operations at `indices`.
fn check_partition(history: &[Operation], indices: &[usize], steps_max: u64) -> SearchOutcome {
    let commands = search_commands(history, indices);
    let outcome = Search::new(&Register, &calls(history, indices, &commands), steps_max).run();
    if let SearchOutcome::Linearizable { order } = &outcome {
        // A false "linearizable" is the one mistake a checker must not make:
        // confirm the order against the recorded operations themselves.
        let recorded: Vec<SearchCommand> = indices
            .iter()
            .map(|&index| SearchCommand {
                early: history[index].command,
                late: None,
            })
            .collect();
        if let Err(problem) = validate(&Register, &calls(history, indices, &recorded), order) {
            panic!("check: the search's linearization is invalid: {problem}");
        }
    }
    outcome
}

/// The search's view of the operations at `indices`, with `commands[i]`
/// standing for the command of `history[indices[i]]`.
fn calls<'h>(
    history: &'h [Operation],
    indices: &[usize],
    commands: &'h [SearchCommand],
) -> Vec<Call<'h, Register>> {
    assert_eq!(indices.len(), commands.len());
    indices
        .iter()
        .zip(commands)
        .map(|(&index, command)| {
            let operation = &history[index];
            Call {
                command: &command.early,
                late: command
                    .late
                    .as_ref()
                    .map(|(after_us, late)| (*after_us, late)),
                response: operation.response(),
                invoke_us: operation.invoke_us,
                complete_us: operation.complete_us(),
            }
        })
        .collect()
}

/// Turns the search's stuck point into history terms. `stuck` indexes into
/// `indices`.
fn explain(history: &[Operation], indices: &[usize], stuck: &Stuck) -> Explanation {
    let indexed = |call: usize| IndexedOperation {
        index: indices[call],
        operation: history[indices[call]],
    };
    // Replay with the recorded commands, which the search's stand-ins
    // cannot be told apart from, to show real values.
    let mut state = Register.initial_state();
    let mut steps = Vec::with_capacity(stuck.order.len());
    for &call in &stuck.order {
        let operation = &history[indices[call]];
        state = Register
            .step(&state, &operation.command, operation.response())
            .expect("explain: the search's partial linearization must replay");
        steps.push(LinearizedStep {
            operation: indexed(call),
            state_after: state,
        });
    }
    let linearized_omitted = steps.len().saturating_sub(EXPLANATION_TAIL_MAX);
    let is_completed = |call: usize| history[indices[call]].complete_us().is_some();
    Explanation {
        operations: indices.len(),
        completed: (0..indices.len())
            .filter(|&call| is_completed(call))
            .count(),
        linearized_completed: stuck
            .order
            .iter()
            .filter(|&&call| is_completed(call))
            .count(),
        linearized_tail: steps.split_off(linearized_omitted),
        linearized_omitted,
        state,
        blocking: indexed(stuck.blocking),
        candidates: stuck
            .candidates
            .iter()
            .take(EXPLANATION_CANDIDATES_MAX)
            .map(|&c| indexed(c))
            .collect(),
        candidates_omitted: stuck
            .candidates
            .len()
            .saturating_sub(EXPLANATION_CANDIDATES_MAX),
    }
}

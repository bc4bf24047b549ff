//! Randomized histories: generated linearizable ones must pass, and
//! mutations that provably break them must fail.

use super::generator::{generate, Shape, SplitMix64};
use crate::linearizability::{
    check, CheckOptions, CheckResult, Command, Key, Operation, Outcome, Response, Value,
};

/// Seeds per randomized test.
const SEEDS_MAX: u64 = 300;

/// A small random shape, varied per seed so that all sizes get exercised.
fn small_shape(rng: &mut SplitMix64) -> Shape {
    Shape {
        clients: 1 + rng.below(6),
        keys: 1 + rng.below(3),
        operations: 20 + rng.below(200) as usize,
        indeterminate_percent: rng.below(15),
        latency_us_max: 1 + rng.below(100),
    }
}

fn history_for(seed: u64) -> Vec<Operation> {
    let mut rng = SplitMix64::new(seed ^ 0x5eed);
    let shape = small_shape(&mut rng);
    generate(seed, shape)
}

/// Replaces the response of operation `index`, keeping its times.
fn respond_with(history: &mut [Operation], index: usize, response: Response) {
    match &mut history[index].outcome {
        Outcome::Ok { response: old, .. } => *old = response,
        Outcome::Indeterminate => panic!("mutating an indeterminate operation"),
    }
}

fn assert_violation_on(history: &[Operation], key: Key, seed: u64, what: &str) {
    match check(history, &CheckOptions::default()) {
        CheckResult::NotLinearizable { key: found, .. } => {
            assert_eq!(found, key, "seed {seed}: {what} reported on the wrong key")
        }
        other => panic!("seed {seed}: {what} not caught: {other}"),
    }
}

#[test]
fn generated_linearizable_histories_pass() {
    let mut indeterminate = 0;
    for seed in 0..SEEDS_MAX {
        let history = history_for(seed);
        indeterminate += history
            .iter()
            .filter(|op| op.complete_us().is_none())
            .count();
        let result = check(&history, &CheckOptions::default());
        assert!(result.is_linearizable(), "seed {seed}: {result}");
    }
    assert!(indeterminate > 100, "the generator must exercise timeouts");
}

#[test]
fn reads_of_never_written_values_fail() {
    for seed in 0..SEEDS_MAX {
        let mut history = history_for(seed);
        let reads: Vec<usize> = completed_indices(&history, |c| matches!(c, Command::Get { .. }));
        let Some(&target) = reads.get(seed as usize % reads.len().max(1)) else {
            continue;
        };
        // Generated values count up from 1, so this one was never written.
        respond_with(&mut history, target, Response::Get(Some(Value(u64::MAX))));
        assert_violation_on(
            &history,
            history[target].key(),
            seed,
            "read of an unwritten value",
        );
    }
}

#[test]
fn compare_and_set_denied_although_its_value_was_read_fails() {
    let mut mutated = 0;
    for seed in 0..SEEDS_MAX {
        let mut history = history_for(seed);
        let Some(target) = observed_successful_cas(&history) else {
            continue;
        };
        respond_with(&mut history, target, Response::CompareAndSet(false));
        assert_violation_on(
            &history,
            history[target].key(),
            seed,
            "denied CAS whose value was read",
        );
        mutated += 1;
    }
    assert!(
        mutated > SEEDS_MAX / 4,
        "only {mutated} histories had a CAS to flip"
    );
}

#[test]
fn stale_reads_fail() {
    let mut mutated = 0;
    for seed in 0..SEEDS_MAX {
        let mut history = history_for(seed);
        let Some((read, stale)) = stale_read_candidate(&history) else {
            continue;
        };
        respond_with(&mut history, read, Response::Get(Some(stale)));
        assert_violation_on(&history, history[read].key(), seed, "stale read");
        mutated += 1;
    }
    assert!(
        mutated > SEEDS_MAX / 4,
        "only {mutated} histories had a stale read to plant"
    );
}

#[test]
fn arbitrary_read_mutations_never_break_the_checker() {
    // Some of these stay linearizable; `check` validates every success it
    // claims against the definition, so a wrong "linearizable" panics here.
    let mut failed = 0;
    for seed in 0..SEEDS_MAX {
        let mut history = history_for(seed);
        let mut rng = SplitMix64::new(seed);
        let reads = completed_indices(&history, |c| matches!(c, Command::Get { .. }));
        if reads.is_empty() {
            continue;
        }
        let target = reads[rng.below(reads.len() as u64) as usize];
        let value =
            (rng.below(history.len() as u64) > 0).then(|| Value(rng.below(history.len() as u64)));
        respond_with(&mut history, target, Response::Get(value));
        match check(&history, &CheckOptions::default()) {
            CheckResult::Linearizable => {}
            CheckResult::NotLinearizable { .. } => failed += 1,
            other @ CheckResult::Unknown { .. } => panic!("seed {seed}: {other}"),
        }
    }
    assert!(failed > 0, "random read values should break some histories");
}

/// Indices of completed operations whose command satisfies `keep`.
fn completed_indices(history: &[Operation], keep: impl Fn(&Command) -> bool) -> Vec<usize> {
    (0..history.len())
        .filter(|&i| history[i].complete_us().is_some() && keep(&history[i].command))
        .collect()
}

/// The value a completed effective write stored, if it is one.
fn written_value(operation: &Operation) -> Option<Value> {
    match (operation.command, operation.response()) {
        (Command::Put { value, .. }, Some(Response::Put)) => Some(value),
        (Command::CompareAndSet { new, .. }, Some(Response::CompareAndSet(true))) => Some(new),
        _ => None,
    }
}

/// A successful CAS whose written value some completed read returned.
fn observed_successful_cas(history: &[Operation]) -> Option<usize> {
    history.iter().enumerate().position(|(i, op)| {
        matches!(op.response(), Some(Response::CompareAndSet(true)))
            && history.iter().any(|read| {
                read.key() == op.key()
                    && read.response() == Some(&Response::Get(written_value(&history[i])))
            })
    })
}

/// A completed read R and a value v such that v's (unique) completed write
/// W finished before another completed effective write W2 on the key began,
/// and W2 finished before R began: R reading v is then certainly stale.
fn stale_read_candidate(history: &[Operation]) -> Option<(usize, Value)> {
    let writes = completed_indices(history, |_| true)
        .into_iter()
        .filter(|&i| written_value(&history[i]).is_some())
        .collect::<Vec<_>>();
    let reads = completed_indices(history, |c| matches!(c, Command::Get { .. }));
    for &read in &reads {
        let r = &history[read];
        for &w2 in writes.iter().filter(|&&w2| history[w2].key() == r.key()) {
            if history[w2].complete_us()? >= r.invoke_us {
                continue;
            }
            let older = writes.iter().find(|&&w| {
                history[w].key() == r.key()
                    && history[w].complete_us() < Some(history[w2].invoke_us)
            });
            if let Some(&w) = older {
                return Some((read, written_value(&history[w])?));
            }
        }
    }
    None
}

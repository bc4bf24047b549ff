//! A timing run, not a test: ignored by default, and it asserts verdicts
//! only, never times. Run it in release mode:
//!
//! `cargo test --release <module path>::tests::bench -- --ignored --nocapture`

use super::generator::{generate, Shape};
use crate::linearizability::{
    check, CheckOptions, CheckResult, Operation, Outcome, Response, Value,
};
use std::time::Instant;

/// Histories timed per configuration; the median and maximum are reported.
const RUNS_MAX: u64 = 5;

/// Timing of one kind of check over `RUNS_MAX` histories.
#[derive(Default)]
struct Timings {
    /// Elapsed milliseconds per run.
    elapsed_ms: Vec<f64>,
    /// Runs that came back `Unknown`.
    unknown: usize,
}

impl Timings {
    fn time(&mut self, history: &[Operation]) -> CheckResult {
        let started = Instant::now();
        let result = check(history, &CheckOptions::default());
        self.elapsed_ms.push(started.elapsed().as_secs_f64() * 1e3);
        self.unknown += usize::from(matches!(result, CheckResult::Unknown { .. }));
        result
    }

    fn summary(&mut self) -> String {
        self.elapsed_ms.sort_by(f64::total_cmp);
        let median = self.elapsed_ms[self.elapsed_ms.len() / 2];
        let max = self.elapsed_ms[self.elapsed_ms.len() - 1];
        format!(
            "median {median:.1} ms, max {max:.1} ms, unknown {}/{}",
            self.unknown,
            self.elapsed_ms.len()
        )
    }
}

/// Replaces the response of the completed read at `nth_from_end` (0 = the
/// last) with a value never written.
fn plant_bad_read(history: &mut [Operation], nth_from_end: usize) {
    let reads: Vec<usize> = (0..history.len())
        .filter(|&i| {
            matches!(
                history[i].outcome,
                Outcome::Ok {
                    response: Response::Get(_),
                    ..
                }
            )
        })
        .collect();
    let target = reads[reads.len() - 1 - nth_from_end.min(reads.len() - 1)];
    if let Outcome::Ok { response, .. } = &mut history[target].outcome {
        *response = Response::Get(Some(Value(u64::MAX)));
    }
}

#[test]
#[ignore = "timing run; use --release -- --ignored --nocapture"]
fn bench_ten_thousand_operations() {
    println!("10,000 operations, 5 keys, 10 clients, {RUNS_MAX} seeds each:");
    for indeterminate_percent in [0, 2, 5, 10, 20] {
        let shape = Shape {
            clients: 10,
            keys: 5,
            operations: 10_000,
            indeterminate_percent,
            latency_us_max: 1_000,
        };
        let (mut valid, mut bad_middle, mut bad_end) =
            (Timings::default(), Timings::default(), Timings::default());
        for seed in 0..RUNS_MAX {
            let history = generate(seed, shape);
            let result = valid.time(&history);
            assert!(result.is_linearizable(), "seed {seed}: {result}");
            for (timings, nth_from_end) in [(&mut bad_middle, 2_000), (&mut bad_end, 0)] {
                let mut bad = history.clone();
                plant_bad_read(&mut bad, nth_from_end);
                let result = timings.time(&bad);
                assert!(!result.is_linearizable(), "seed {seed}: a bad read passed");
            }
        }
        println!(
            "  {indeterminate_percent:>2}% timeouts: linearizable: {}",
            valid.summary()
        );
        println!("      bad read mid-history: {}", bad_middle.summary());
        println!("      bad read at the end:  {}", bad_end.summary());
    }
}

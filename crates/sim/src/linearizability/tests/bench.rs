//! A timing run, not a test: ignored by default and asserting nothing about
//! time. Run it in release mode:
//!
//! `cargo test --release <path>::tests::bench -- --ignored --nocapture`

use super::generator::{generate, Shape};
use crate::linearizability::{check, CheckOptions, CheckResult, Outcome, Response, Value};
use std::time::Instant;

/// Histories timed per configuration; the median is reported.
const RUNS_MAX: u64 = 5;

#[test]
#[ignore = "timing run; use --release -- --ignored --nocapture"]
fn bench_ten_thousand_operations() {
    for indeterminate_percent in [0, 2, 5, 10] {
        let shape = Shape { clients: 10, keys: 5, operations: 10_000, indeterminate_percent, latency_us_max: 1_000 };
        let mut pass_ms = Vec::new();
        let mut fail_ms = Vec::new();
        for seed in 0..RUNS_MAX {
            let mut history = generate(seed, shape);
            let started = Instant::now();
            let result = check(&history, &CheckOptions::default());
            pass_ms.push(started.elapsed().as_secs_f64() * 1e3);
            assert!(result.is_linearizable(), "seed {seed}: {result}");
            // The same history with one late read of a never-written value.
            let last_read = (0..history.len()).rev().find(|&i| {
                matches!(history[i].outcome, Outcome::Ok { response: Response::Get(_), .. })
            });
            if let Some(Outcome::Ok { response, .. }) = last_read.map(|i| &mut history[i].outcome) {
                *response = Response::Get(Some(Value(u64::MAX)));
            }
            let started = Instant::now();
            let result = check(&history, &CheckOptions::default());
            fail_ms.push(started.elapsed().as_secs_f64() * 1e3);
            assert!(matches!(result, CheckResult::NotLinearizable { .. }), "seed {seed}: {result}");
        }
        pass_ms.sort_by(f64::total_cmp);
        fail_ms.sort_by(f64::total_cmp);
        let median = RUNS_MAX as usize / 2;
        println!(
            "10000 ops, 5 keys, 10 clients, {indeterminate_percent}% timeouts: linearizable in {:.1} ms (max {:.1}), violation found in {:.1} ms (max {:.1})",
            pass_ms[median], pass_ms[RUNS_MAX as usize - 1], fail_ms[median], fail_ms[RUNS_MAX as usize - 1]
        );
    }
}

use super::generator::{generate, Shape};
use crate::linearizability::{check, CheckOptions, Outcome, Response, Value};
#[test]
#[ignore]
fn exp() {
    for ops in [10000usize] {
      for pct in [2u64, 5] {
        let shape = Shape { clients: 10, keys: 5, operations: ops, indeterminate_percent: pct, latency_us_max: 1_000 };
        let mut history = generate(1, shape);
        let last_read = (0..history.len()).rev().find(|&i| matches!(history[i].outcome, Outcome::Ok { response: Response::Get(_), .. }));
        if let Some(Outcome::Ok { response, .. }) = last_read.map(|i| &mut history[i].outcome) { *response = Response::Get(Some(Value(u64::MAX))); }
                let t = std::time::Instant::now(); let r = check(&history, &CheckOptions{search_steps_max: 20_000_000});
        eprintln!("EXP ops {ops} pct {pct} {:?}: {}", t.elapsed(), match r { crate::linearizability::CheckResult::Unknown{..} => "unknown", crate::linearizability::CheckResult::NotLinearizable{..} => "violation", _ => "lin"});
      }
    }
}

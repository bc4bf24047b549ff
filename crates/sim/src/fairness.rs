//! Fairness: "all nodes should have a reasonable chance of becoming the
//! leader over time". Each node's share of the total leader time over long
//! chaos runs, summarised as Jain's fairness index: 1 when every node led
//! equally long, 1/n when one node always led.

use crate::run::run;
use crate::spec::{FaultProfile, RunSpec};
use serde::Serialize;

/// Length of the chaos phase of one fairness run.
pub const RUN_MS: u64 = 20_000;

/// Each node's share of leader time, and Jain's index of the shares.
#[derive(Clone, Debug, Serialize)]
pub struct Fairness {
    /// Node i's share of all leader time, in node order; sums to 1.
    pub shares: Vec<f64>,
    /// Jain's index of `shares`, in [1/n, 1].
    pub jain: f64,
}

/// Jain's fairness index (Σx)² / (n·Σx²); `None` when all are zero.
pub fn jain(values: &[f64]) -> Option<f64> {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (values.len() as f64 * squares))
}

/// Leader time per node over `seeds` chaos runs of [`RUN_MS`] each, with
/// the winner rule and rotation of `template` (its algorithm and size).
pub fn fairness(template: &RunSpec, seeds: u64) -> Option<Fairness> {
    let (algorithm, nodes) = (template.algorithm, template.nodes);
    let mut totals = vec![0u64; nodes];
    for seed in 1..=seeds {
        let mut spec = RunSpec::new(algorithm, nodes, seed, FaultProfile::Chaos);
        spec.lowest_id_wins = template.lowest_id_wins;
        spec.rotate_after_ms = template.rotate_after_ms;
        spec.timeline = true;
        spec.fault_phase_ms = RUN_MS;
        for span in run(&spec).timeline {
            totals[(span.node - 1) as usize] += span.end_us.saturating_sub(span.start_us);
        }
    }
    let sum: u64 = totals.iter().sum();
    if sum == 0 {
        return None;
    }
    let shares: Vec<f64> = totals.iter().map(|t| *t as f64 / sum as f64).collect();
    let jain = jain(&shares)?;
    Some(Fairness { shares, jain })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Algorithm;

    #[test]
    fn jain_is_one_when_equal_and_one_over_n_when_one_node_leads() {
        assert_eq!(jain(&[2.0, 2.0, 2.0, 2.0]), Some(1.0));
        assert_eq!(jain(&[5.0, 0.0, 0.0, 0.0]), Some(0.25));
        assert_eq!(jain(&[0.0, 0.0]), None);
    }

    #[test]
    fn bully_favours_its_best_id_more_than_raft_favours_anyone() {
        let of = |algorithm| RunSpec::new(algorithm, 5, 1, FaultProfile::Chaos);
        let raft = fairness(&of(Algorithm::Raft), 2).unwrap();
        let bully = fairness(&of(Algorithm::Bully), 2).unwrap();
        let best = bully.shares[4];
        assert!(
            bully.shares.iter().all(|s| *s <= best),
            "the highest id leads longest under bully: {:?}",
            bully.shares
        );
        assert!(raft.jain > bully.jain, "raft {raft:?} bully {bully:?}");
        assert!((bully.shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }
}

//! Runs one spec with the algorithm it names, using each algorithm's default
//! configuration (timeouts sized for 1 ms ticks and ≤ 5 ms latency).

use crate::report::RunReport;
use crate::scenario::run_with;
use crate::spec::{Algorithm, RunSpec};
use bellwether_core::bully::{BullyConfig, BullyNode};
use bellwether_core::raft::{RaftConfig, RaftNode};
use bellwether_core::ring::{RingConfig, RingNode};

/// Runs `spec` and reports what happened.
pub fn run(spec: &RunSpec) -> RunReport {
    match spec.algorithm {
        Algorithm::Raft => run_with::<RaftNode>(spec, RaftConfig::default()),
        Algorithm::Bully => run_with::<BullyNode>(spec, BullyConfig::default()),
        Algorithm::Ring => run_with::<RingNode>(spec, RingConfig::default()),
    }
}

//! Deterministic simulator for bellwether's election algorithms.
//!
//! A [`World`] runs real protocol nodes against a virtual clock and a faulty
//! network; checkers verify invariants after every event; scenarios inject
//! crashes, pauses, partitions, loss and clock skew; reports aggregate
//! election time, failover time, message counts and split-brain incidents.
//! One seed reproduces a whole run.
//!
//! Besides the bare cores, the `etcd` workload ([`member`]) runs the member
//! driver that production runs, with the etcd store behind it.

pub mod checkers;
pub mod compare;
pub mod event;
pub mod fairness;
pub mod host;
pub mod html;
pub mod kv;
pub mod linearizability;
pub mod member;
pub mod network;
pub mod partition;
pub mod promise_guards;
pub mod report;
pub mod run;
pub mod scenario;
pub mod spec;
pub mod stats;
pub mod sweep;
pub mod world;

pub use checkers::Violation;
pub use partition::Partition;
pub use report::RunReport;
pub use run::run;
pub use spec::{lease_skew_ppm_bound, Algorithm, FaultProfile, ReadMode, RunSpec, Workload};
pub use sweep::{sweep, SweepSummary};
pub use world::{LeadershipSpan, World, WorldConfig, WorldStats};

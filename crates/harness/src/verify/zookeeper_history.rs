//! What the contenders of the ZooKeeper workload record: the register's
//! operations for the linearizability check, every acknowledged fenced
//! write with the fencing token it was made under and the version the
//! store gave it, every (version, value) pair a read saw, and counts for
//! the report. Shared by the contender tasks behind one mutex; checked by
//! `zookeeper_check` once they end.

use bellwether_sim::linearizability::{Command, Operation, Value};
use serde::Serialize;
use std::time::Duration;
use tokio::time::Instant;

/// The least time from one hung holder's waking to the next hang, so that
/// a run spends most of its time with holders that are not hung.
const HANG_GAP: Duration = Duration::from_secs(8);

/// One fenced write the store acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AckedWrite {
    /// The contender that wrote.
    pub client: u64,
    /// Its fencing token: the sequence number of the election node it
    /// held (or, hung, believed it held).
    pub token: i64,
    /// The value written.
    pub value: u64,
    /// The register version the write expected.
    pub expected_version: i32,
    /// The register version the answer gave the write.
    pub version: i32,
    /// When the write was sent, in µs from the run's origin.
    pub invoke_us: u64,
    /// When its answer came.
    pub complete_us: u64,
}

/// The register's version and value as one answer showed them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// The register's version.
    pub version: i32,
    /// Its value then (`None`: the empty data it was created with).
    pub value: Option<Value>,
}

/// Counts for the report line.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ZkCounts {
    /// Sessions opened by the contenders.
    pub sessions: u64,
    /// Times a session connected again after losing its member.
    pub reconnections: u64,
    /// Times a contender found its election node the lowest.
    pub leaderships: u64,
    /// Linearizable reads (sync, then getData) answered.
    pub reads: u64,
    /// Fenced writes the store acknowledged.
    pub acked: u64,
    /// Fenced writes refused because the holder's election node was gone.
    pub fenced_out: u64,
    /// Fenced writes refused because the register had moved on.
    pub version_refused: u64,
    /// Fenced writes with no answer.
    pub unanswered: u64,
    /// Holders that hung until a successor wrote, and woke to write.
    pub hangs: u64,
    /// Waking writes the store acknowledged (only unfenced ones should).
    pub stale_accepted: u64,
    /// Waking writes the store refused.
    pub stale_refused: u64,
    /// Time holders spent hung, in all, in ms.
    pub hung_ms: u64,
}

/// Everything the contenders recorded.
#[derive(Default)]
pub struct ZkHistory {
    /// The register's operations (one key), for the linearizability check.
    pub operations: Vec<Operation>,
    /// Acknowledged writes, in no particular order.
    pub writes: Vec<AckedWrite>,
    /// What reads saw.
    pub observations: Vec<Observation>,
    /// Register data no contender could have written.
    pub garbage: Vec<String>,
    /// Counts.
    pub counts: ZkCounts,
    /// Whether a holder is hung now.
    hanging: bool,
    /// When the last hung holder woke.
    last_woke: Option<Instant>,
}

impl ZkHistory {
    /// Whether a holder may hang now: the run lasts, none is hung, and
    /// none woke within [`HANG_GAP`]. Claims the hang when it may.
    pub fn claim_hang(&mut self, now: Instant, until: Instant) -> bool {
        let due = now < until
            && !self.hanging
            && self
                .last_woke
                .is_none_or(|woke| now.duration_since(woke) >= HANG_GAP);
        self.hanging |= due;
        due
    }

    /// Whether a holder is hung now.
    pub fn hanging(&self) -> bool {
        self.hanging
    }

    /// Records a hung holder's waking: whether its write was accepted.
    pub fn woke(&mut self, hung_for: Duration, accepted: bool) {
        assert!(self.hanging, "only a hung holder wakes");
        self.hanging = false;
        self.last_woke = Some(Instant::now());
        self.counts.hangs += 1;
        self.counts.hung_ms += hung_for.as_millis() as u64;
        match accepted {
            true => self.counts.stale_accepted += 1,
            false => self.counts.stale_refused += 1,
        }
    }

    /// Writes whose answer never came: each may have taken effect.
    pub fn unanswered_writes(&self) -> usize {
        self.operations
            .iter()
            .filter(|o| {
                matches!(o.command, Command::CompareAndSet { .. }) && o.complete_us().is_none()
            })
            .count()
    }
}

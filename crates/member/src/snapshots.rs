//! When this member snapshots its state machine and compacts its log, and
//! the snapshot in progress.
//!
//! A snapshot is taken once enough was applied since the last one: at
//! least [`SNAPSHOT_EVERY_ENTRIES_MIN`] entries (or
//! [`SNAPSHOT_SLOW_LOG_ENTRIES_MIN`] on a slow log) whose memory in the log
//! adds up to at least the last snapshot's size, or
//! [`SNAPSHOT_EVERY_ENTRIES_MAX`] entries. A snapshot costs time
//! proportional to the state; tying the interval to the state's size keeps
//! that cost per applied byte constant as the state grows, where a fixed
//! interval made it grow with the state. The log kept in memory stays below
//! about the snapshot's size (or the minimum interval).
//!
//! A snapshot goes through four stages, one snapshot at a time: taken on
//! the loop between applies and **encoded** on another thread (encoding a
//! million leases on the loop stalled every member's writes for about
//! 11 ms each time, `bench abuse`); **held** until the followers have the
//! entries it covers; **written** beside the log on another thread once the
//! log is compacted in memory; and **recorded** by the log at its next
//! persist, which deletes the segments it covers.

use bellwether_core::raft::{SnapshotData, SnapshotMeta};
use bellwether_core::LogIndex;
use std::time::Duration;

/// The node snapshots its state machine and compacts the log once at
/// least this many entries were applied since the last snapshot, and the
/// entries applied since then (their commands, and
/// [`ENTRY_BYTES_IN_MEMORY`] each) add up to at least the last snapshot's
/// size.
pub const SNAPSHOT_EVERY_ENTRIES_MIN: u64 = 10_000;
/// What a log entry kept in memory costs beyond its command's bytes: the
/// entry itself and its command's allocation. It counts toward the bytes
/// applied since the last snapshot, so that a log of small commands (lease
/// grants of about 20 bytes) is compacted once it holds about as much
/// memory as the snapshot, not several times that.
pub const ENTRY_BYTES_IN_MEMORY: u64 =
    std::mem::size_of::<bellwether_core::raft::Entry>() as u64 + 16;
/// A log that grows slowly is snapshotted sooner: after this many entries
/// (and the bytes rule) once [`SNAPSHOT_SLOW_LOG_AFTER`] has passed since
/// the last snapshot. One client writing 256-byte values fills 10,000
/// entries in about five seconds, and that log, about 4 MiB, was most of a
/// member's memory; a busy log still reaches the 10,000 first, so its
/// snapshots stay as rare as before.
pub const SNAPSHOT_SLOW_LOG_ENTRIES_MIN: u64 = 1_000;
/// ... at most one such early snapshot per this much time, which bounds
/// the loop time they take.
pub const SNAPSHOT_SLOW_LOG_AFTER: Duration = Duration::from_secs(1);
/// ... and always after this many, whatever their size: bounds the log
/// kept in memory and replayed on restart.
pub const SNAPSHOT_EVERY_ENTRIES_MAX: u64 = 1_000_000;
/// A member that has applied nothing for this long takes a snapshot
/// once the log since the last one holds at least a quarter of that
/// snapshot's size (and [`SNAPSHOT_SLOW_LOG_ENTRIES_MIN`] entries): a load
/// that stopped short of the bytes rule left up to a snapshot's size of
/// applied log in memory, and to replay at a restart (about 180 MB and
/// 0.8 s at a million keys), for as long as nothing more was written. The
/// snapshot runs while the member has nothing else to do.
pub const SNAPSHOT_IDLE_AFTER: Duration = Duration::from_secs(2);
/// ... the log must then hold at least this part of the last snapshot's
/// size (its inverse), so that a store written in small bursts with
/// pauses between is not snapshotted whole after each burst.
pub const SNAPSHOT_IDLE_FRACTION_INVERSE: u64 = 4;
/// A leader holds a snapshot back from compacting its log until every
/// follower has the entries it covers, so a follower a few in-flight
/// appends behind is not sent a whole snapshot (and its clients' forwarded
/// writes are not lost with the entries). A follower this many entries
/// behind, or gone, no longer holds compaction back.
pub const SNAPSHOT_HOLD_ENTRIES_MAX: u64 = 10_000;

/// When snapshots are taken and how long a leader holds one back. The
/// server runs [`SnapshotSchedule::default`], the constants above; the
/// simulator runs a shorter one, so that its short runs take snapshots and
/// send them to followers that fell behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotSchedule {
    /// See [`SNAPSHOT_EVERY_ENTRIES_MIN`].
    pub every_entries_min: u64,
    /// See [`SNAPSHOT_SLOW_LOG_ENTRIES_MIN`].
    pub slow_log_entries_min: u64,
    /// See [`SNAPSHOT_SLOW_LOG_AFTER`].
    pub slow_log_after: Duration,
    /// See [`SNAPSHOT_EVERY_ENTRIES_MAX`].
    pub every_entries_max: u64,
    /// See [`SNAPSHOT_HOLD_ENTRIES_MAX`].
    pub hold_entries_max: u64,
    /// See [`SNAPSHOT_IDLE_AFTER`].
    pub idle_after: Duration,
}

impl Default for SnapshotSchedule {
    fn default() -> Self {
        SnapshotSchedule {
            every_entries_min: SNAPSHOT_EVERY_ENTRIES_MIN,
            slow_log_entries_min: SNAPSHOT_SLOW_LOG_ENTRIES_MIN,
            slow_log_after: SNAPSHOT_SLOW_LOG_AFTER,
            every_entries_max: SNAPSHOT_EVERY_ENTRIES_MAX,
            hold_entries_max: SNAPSHOT_HOLD_ENTRIES_MAX,
            idle_after: SNAPSHOT_IDLE_AFTER,
        }
    }
}

/// The snapshot schedule and the one snapshot in progress.
#[derive(Debug)]
pub struct Snapshots {
    /// When snapshots are due.
    pub schedule: SnapshotSchedule,
    /// Index of the last snapshot taken here (or restored).
    pub index: LogIndex,
    /// Size of its data, bytes.
    pub bytes: u64,
    /// Memory of the entries applied since, bytes (see
    /// [`ENTRY_BYTES_IN_MEMORY`]).
    pub applied_bytes: u64,
    /// When the last one was taken (or the member started), on the
    /// member's clock.
    pub taken_at: Duration,
    /// When the last entry was applied (or the member started).
    pub applied_at: Duration,
    /// Being encoded on another thread: the index it covers.
    pub encoding: Option<LogIndex>,
    /// Encoded, waiting for the followers: its index and data.
    pub held: Option<(LogIndex, SnapshotData)>,
    /// Being written beside the log.
    pub writing: Option<SnapshotMeta>,
    /// Written, for the log to record at its next persist.
    pub to_record: Option<SnapshotMeta>,
}

impl Snapshots {
    /// The schedule of a member whose last snapshot covers `index` and
    /// holds `bytes`, started at `now`.
    pub fn new(index: LogIndex, bytes: u64, now: Duration, schedule: SnapshotSchedule) -> Self {
        Snapshots {
            schedule,
            index,
            bytes,
            applied_bytes: 0,
            taken_at: now,
            applied_at: now,
            encoding: None,
            held: None,
            writing: None,
            to_record: None,
        }
    }

    /// An entry with a command of `command_bytes` was applied at `now`.
    pub fn note_applied(&mut self, command_bytes: usize, now: Duration) {
        self.applied_bytes += ENTRY_BYTES_IN_MEMORY + command_bytes as u64;
        self.applied_at = now;
    }

    /// The state machine was replaced by a snapshot of `bytes` at `index`.
    pub fn restored(&mut self, index: LogIndex, bytes: u64) {
        self.index = index;
        self.bytes = bytes;
        self.applied_bytes = 0;
    }

    /// True while a snapshot is being encoded, written or waits to be
    /// recorded: no other is taken meanwhile.
    pub fn busy(&self) -> bool {
        self.encoding.is_some() || self.writing.is_some() || self.to_record.is_some()
    }

    /// Whether a new snapshot is due with `applied` entries applied at
    /// `now` (see the module doc).
    pub fn due(&self, applied: LogIndex, now: Duration) -> bool {
        let entries = applied.0.saturating_sub(self.index.0);
        let enough_bytes = self.applied_bytes >= self.bytes;
        let schedule = &self.schedule;
        let slow_log = entries >= schedule.slow_log_entries_min
            && now.saturating_sub(self.taken_at) >= schedule.slow_log_after;
        let idle = entries >= schedule.slow_log_entries_min
            && now.saturating_sub(self.applied_at) >= schedule.idle_after
            && self
                .applied_bytes
                .saturating_mul(SNAPSHOT_IDLE_FRACTION_INVERSE)
                >= self.bytes;
        entries >= schedule.every_entries_max
            || idle
            || (enough_bytes && (entries >= schedule.every_entries_min || slow_log))
    }

    /// A snapshot of `applied` is being taken at `now`.
    pub fn start(&mut self, applied: LogIndex, now: Duration) {
        assert!(
            !self.busy() && self.held.is_none(),
            "one snapshot at a time"
        );
        self.taken_at = now;
        self.applied_bytes = 0;
        self.encoding = Some(applied);
    }

    /// The snapshot being encoded is in: it is held.
    pub fn encoded(&mut self, data: SnapshotData) {
        let index = self.encoding.take().expect("a snapshot was being encoded");
        assert!(self.held.is_none(), "one snapshot at a time");
        self.held = Some((index, data));
    }

    /// The snapshot being written is on disk: the next persist records it.
    pub fn written(&mut self) {
        let meta = self.writing.take().expect("a snapshot was being written");
        assert!(self.to_record.is_none(), "one snapshot at a time");
        self.to_record = Some(meta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_due_by_entries_and_bytes_or_by_the_slow_log_rule() {
        let mut snapshots = Snapshots::new(
            LogIndex(0),
            1_000_000,
            Duration::ZERO,
            SnapshotSchedule::default(),
        );
        let busy_log = LogIndex(SNAPSHOT_EVERY_ENTRIES_MIN);
        assert!(!snapshots.due(busy_log, Duration::ZERO), "too few bytes");
        for _ in 0..SNAPSHOT_EVERY_ENTRIES_MIN {
            snapshots.note_applied(100, Duration::ZERO);
        }
        assert!(snapshots.due(busy_log, Duration::ZERO));
        let slow_log = LogIndex(SNAPSHOT_SLOW_LOG_ENTRIES_MIN);
        assert!(!snapshots.due(slow_log, Duration::ZERO), "too soon");
        assert!(snapshots.due(slow_log, SNAPSHOT_SLOW_LOG_AFTER));
        // Idle: a quarter of the last snapshot's size, applied 2 s ago.
        let mut idle = Snapshots::new(
            LogIndex(0),
            400_000,
            Duration::ZERO,
            SnapshotSchedule::default(),
        );
        let entries = LogIndex(SNAPSHOT_SLOW_LOG_ENTRIES_MIN);
        let applied_at = Duration::from_secs(10);
        let each = 100_000 / SNAPSHOT_SLOW_LOG_ENTRIES_MIN as usize;
        for _ in 0..SNAPSHOT_SLOW_LOG_ENTRIES_MIN {
            idle.note_applied(each, applied_at);
        }
        assert!(idle.applied_bytes * 4 >= 400_000, "a quarter");
        let just_before = applied_at + SNAPSHOT_IDLE_AFTER - Duration::from_millis(1);
        assert!(!idle.due(entries, just_before), "not idle long enough");
        assert!(idle.due(entries, applied_at + SNAPSHOT_IDLE_AFTER));
        let short = LogIndex(SNAPSHOT_SLOW_LOG_ENTRIES_MIN - 1);
        assert!(!idle.due(short, Duration::from_secs(60)), "too few entries");
        let mut big = Snapshots::new(
            LogIndex(0),
            4_000_000,
            Duration::ZERO,
            SnapshotSchedule::default(),
        );
        for _ in 0..SNAPSHOT_SLOW_LOG_ENTRIES_MIN {
            big.note_applied(each, applied_at);
        }
        assert!(
            !big.due(entries, Duration::from_secs(60)),
            "less than a quarter of the last snapshot: not even when idle"
        );
        let fresh = Snapshots::new(
            LogIndex(0),
            u64::MAX,
            Duration::ZERO,
            SnapshotSchedule::default(),
        );
        assert!(
            fresh.due(LogIndex(SNAPSHOT_EVERY_ENTRIES_MAX), Duration::ZERO),
            "always after the most entries"
        );
    }

    #[test]
    fn one_snapshot_goes_through_its_stages_at_a_time() {
        let mut snapshots =
            Snapshots::new(LogIndex(0), 0, Duration::ZERO, SnapshotSchedule::default());
        snapshots.start(LogIndex(5), Duration::from_secs(2));
        assert!(snapshots.busy());
        snapshots.encoded(vec![1].into());
        assert_eq!(snapshots.held, Some((LogIndex(5), vec![1].into())));
        assert!(!snapshots.busy(), "held: the log may compact it");
    }
}

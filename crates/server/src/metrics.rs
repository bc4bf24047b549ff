//! Prometheus metrics, kept with atomics and rendered by hand in the text
//! exposition format (no registry crate: the set is small and fixed).
//!
//! The five figures of any election system are here: election duration,
//! leadership changes, leader uptime, failover time, and messages sent by
//! type; plus term, role, commit and applied index, proposal latency and
//! refused peers.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Histogram bucket upper bounds, in seconds.
const BUCKETS_SECONDS: [f64; 14] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

/// A fixed-bucket histogram of durations.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Count per bucket (not cumulative), plus one overflow bucket.
    counts: [AtomicU64; 15],
    /// Sum of observations in microseconds.
    sum_us: AtomicU64,
}

impl Histogram {
    /// Records one duration.
    pub fn observe_us(&self, us: u64) {
        let seconds = us as f64 / 1e6;
        let bucket = BUCKETS_SECONDS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS_SECONDS.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, bound) in BUCKETS_SECONDS.iter().enumerate() {
            cumulative += self.counts[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.counts[BUCKETS_SECONDS.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {cumulative}");
    }
}

/// Every metric a node exports.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Time from losing a leader to knowing a new one.
    pub election_duration: Histogram,
    /// Time from losing a leader to the first commit in the new term.
    pub failover: Histogram,
    /// Time from a proposal to its application on this (leader) node.
    pub proposal_latency: Histogram,
    /// Times the leader this node follows changed.
    pub leader_changes: AtomicU64,
    /// Current term.
    pub term: AtomicU64,
    /// 0 follower, 1 pre-candidate, 2 candidate, 3 leader.
    pub role: AtomicU64,
    /// Commit index.
    pub commit: AtomicU64,
    /// Applied index.
    pub applied: AtomicU64,
    /// Milliseconds this node has been leader (0 when not leading).
    pub leader_uptime_ms: AtomicU64,
    /// Messages sent, by type.
    pub messages_sent: Mutex<BTreeMap<&'static str, u64>>,
    /// Peer connections refused, by reason.
    pub refused_peers: Mutex<BTreeMap<&'static str, u64>>,
    /// Log writes fsynced on the node's loop (see `Node::persists_inline`),
    /// counted as they start, like the next.
    pub wal_syncs_on_loop: AtomicU64,
    /// Log writes fsynced on a blocking thread.
    pub wal_syncs_on_thread: AtomicU64,
    /// Leader polls for followers' answers after a lone write's fsync
    /// (see `Node::poll_for_answers`) that ended with the entry committed.
    pub answer_polls_answered: AtomicU64,
    /// ... and those that ended without it: the time ran out, something
    /// else arrived to be carried out, or the member stopped leading.
    pub answer_polls_expired: AtomicU64,
    /// Applications' elections and locks served by this member.
    pub app_elections: std::sync::Arc<crate::app_elections::AppElections>,
    /// Applications' task queues in this member's store.
    pub app_tasks: std::sync::Arc<crate::app_tasks::AppTasks>,
}

impl bellwether_transport::Observer for Metrics {
    fn sent(&self, _peer: u64, kind: &'static str) {
        self.count_sent(kind);
    }

    fn refused(&self, reason: &'static str) {
        self.count_refused(reason);
    }
}

impl Metrics {
    /// Counts one message of `kind` sent.
    pub fn count_sent(&self, kind: &'static str) {
        *self
            .messages_sent
            .lock()
            .expect("metrics lock")
            .entry(kind)
            .or_default() += 1;
    }

    /// Counts one refused peer connection.
    pub fn count_refused(&self, reason: &'static str) {
        *self
            .refused_peers
            .lock()
            .expect("metrics lock")
            .entry(reason)
            .or_default() += 1;
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        self.election_duration.render(
            &mut out,
            "bellwether_election_duration_seconds",
            "Time from losing a leader to knowing a new one.",
        );
        self.failover.render(
            &mut out,
            "bellwether_failover_seconds",
            "Time from losing a leader to the first commit under the new one.",
        );
        self.proposal_latency.render(
            &mut out,
            "bellwether_proposal_latency_seconds",
            "Time from proposal to application on the leader.",
        );
        let gauges = [
            (
                "bellwether_leader_changes_total",
                "counter",
                "Leader changes seen by this node.",
                &self.leader_changes,
            ),
            ("bellwether_term", "gauge", "Current Raft term.", &self.term),
            (
                "bellwether_role",
                "gauge",
                "0 follower, 1 pre-candidate, 2 candidate, 3 leader.",
                &self.role,
            ),
            (
                "bellwether_commit_index",
                "gauge",
                "Commit index.",
                &self.commit,
            ),
            (
                "bellwether_applied_index",
                "gauge",
                "Applied index.",
                &self.applied,
            ),
            (
                "bellwether_leader_uptime_seconds",
                "gauge",
                "Seconds this node has led without interruption.",
                &self.leader_uptime_ms,
            ),
        ];
        for (name, kind, help, value) in gauges {
            let mut value = value.load(Ordering::Relaxed) as f64;
            if name == "bellwether_leader_uptime_seconds" {
                value /= 1000.0;
            }
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        write_labelled_counter(
            &mut out,
            "bellwether_messages_sent_total",
            "Peer messages sent, by type.",
            "type",
            self.messages_sent
                .lock()
                .expect("metrics lock")
                .iter()
                .map(|(value, count)| (*value, *count)),
        );
        write_labelled_counter(
            &mut out,
            "bellwether_refused_peers_total",
            "Peer connections refused, by reason.",
            "reason",
            self.refused_peers
                .lock()
                .expect("metrics lock")
                .iter()
                .map(|(value, count)| (*value, *count)),
        );
        write_labelled_counter(
            &mut out,
            "bellwether_wal_syncs_total",
            "Log writes fsynced, by the thread that waits on them: the node's loop (small appends of a member serving one writer at a time, or of a follower with no client work of its own) or a blocking thread.",
            "thread",
            [
                ("loop", self.wal_syncs_on_loop.load(Ordering::Relaxed)),
                ("blocking", self.wal_syncs_on_thread.load(Ordering::Relaxed)),
            ]
            .into_iter(),
        );
        write_labelled_counter(
            &mut out,
            "bellwether_answer_polls_total",
            "Times a leader, having fsynced a lone client's write on its loop, polled for the followers' answers instead of sleeping, by outcome: the entry committed within answer_poll_us, or the poll ended without it (time up, other work arrived, or no longer leader).",
            "result",
            [
                ("answered", self.answer_polls_answered.load(Ordering::Relaxed)),
                ("expired", self.answer_polls_expired.load(Ordering::Relaxed)),
            ]
            .into_iter(),
        );
        self.app_elections.render(&mut out);
        self.app_tasks.render(&mut out);
        out
    }
}

/// Writes one counter family with a value per label value, in Prometheus'
/// text format.
fn write_labelled_counter(
    out: &mut String,
    name: &str,
    help: &str,
    label: &str,
    values: impl Iterator<Item = (&'static str, u64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (value, count) in values {
        let _ = writeln!(out, "{name}{{{label}=\"{value}\"}} {count}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_counted() {
        let metrics = Metrics::default();
        metrics.failover.observe_us(1_500);
        metrics.failover.observe_us(150_000);
        metrics.count_sent("heartbeat");
        metrics.count_refused("foreign_cluster");
        metrics.wal_syncs_on_loop.fetch_add(3, Ordering::Relaxed);
        let text = metrics.render();
        assert!(text.contains("bellwether_failover_seconds_bucket{le=\"0.002\"} 1"));
        assert!(text.contains("bellwether_failover_seconds_bucket{le=\"0.2\"} 2"));
        assert!(text.contains("bellwether_failover_seconds_count 2"));
        assert!(text.contains("bellwether_messages_sent_total{type=\"heartbeat\"} 1"));
        assert!(text.contains("bellwether_refused_peers_total{reason=\"foreign_cluster\"} 1"));
        assert!(text.contains("bellwether_wal_syncs_total{thread=\"loop\"} 3"));
        assert!(text.contains("bellwether_wal_syncs_total{thread=\"blocking\"} 0"));
        assert!(text.contains("bellwether_answer_polls_total{result=\"expired\"} 0"));
    }
}

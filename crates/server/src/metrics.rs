//! Prometheus metrics for `/metrics`.
//!
//! The values are atomics: prometheus-client's `Counter` and `Gauge`, and
//! the client crate's `LatencyHistogram`, fixed buckets of atomic counts
//! (the crate's own histogram takes a lock on every observation, and the
//! proposal latency is observed once per write). A prometheus-client `Registry` names them and writes the
//! OpenMetrics text format when `/metrics` is read. Nothing but that read
//! takes a lock: the messages-sent counters are made up front, one per kind
//! a member sends ([`PeerMessage::all_kinds`]), and found without one. Only
//! refused peer connections, which are rare, go through a labelled family
//! (a read-write lock inside the crate).
//!
//! The five figures of any election system are here: election duration,
//! leadership changes, leader uptime, failover time, and messages sent by
//! type; plus term, role, commit and applied index, proposal latency and
//! refused peers.

use crate::app_elections::AppElections;
use crate::app_tasks::AppTasks;
use crate::peer_message::PeerMessage;
use bellwether_metrics::LatencyHistogram as Histogram;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// A gauge of a non-negative integer (an index, a term, a role).
pub type IndexGauge = Gauge<u64, AtomicU64>;

/// One label, such as `type="heartbeat"`.
type Label = [(&'static str, &'static str); 1];

/// Every metric a node exports.
#[derive(Debug)]
pub struct Metrics {
    /// Time from losing a leader to knowing a new one.
    pub election_duration: Histogram,
    /// Time from losing a leader to the first commit in the new term.
    pub failover: Histogram,
    /// Time from a proposal to its application on this (leader) node.
    pub proposal_latency: Histogram,
    /// Times the leader this node follows changed.
    pub leader_changes: Counter,
    /// Current term.
    pub term: IndexGauge,
    /// 0 follower, 1 pre-candidate, 2 candidate, 3 leader.
    pub role: IndexGauge,
    /// Commit index.
    pub commit: IndexGauge,
    /// Applied index.
    pub applied: IndexGauge,
    /// 1 while this member repairs a log that lost what it had acknowledged
    /// (it neither campaigns nor votes for a less up-to-date candidate).
    pub repairing: IndexGauge,
    /// The silence after which the adaptive detector suspects the leader.
    pub detector_threshold_seconds: Gauge<f64, AtomicU64>,
    /// The mean gap between the leader's messages the detector learned.
    pub detector_mean_gap_seconds: Gauge<f64, AtomicU64>,
    /// Times the detector suspected the leader since start.
    pub detector_suspicions: IndexGauge,
    /// The longest gap between the leader's messages since start.
    pub leader_gap_max_seconds: Gauge<f64, AtomicU64>,
    /// Seconds this node has been leader (0 when not leading).
    pub leader_uptime_seconds: Gauge<f64, AtomicU64>,
    /// The longest one turn of the node's loop took since it started
    /// (see [`Metrics::loop_turn`]).
    pub loop_turn_max_seconds: Gauge<f64, AtomicU64>,
    /// Messages sent, one counter per kind a member sends, made up front.
    sent_by_kind: Vec<(&'static str, Counter)>,
    /// Messages sent, by type: the family `sent_by_kind` belongs to.
    messages_sent: Family<Label, Counter>,
    /// Peer connections refused, by reason.
    refused_peers: Family<Label, Counter>,
    /// Log writes fsynced on the node's loop (see `Node::persists_inline`),
    /// counted as they start, like the next.
    pub wal_syncs_on_loop: Counter,
    /// Log writes fsynced on a blocking thread.
    pub wal_syncs_on_thread: Counter,
    /// Leader polls for followers' answers after a lone write's fsync
    /// (see `Node::poll_for_answers`) that ended with the entry committed.
    pub answer_polls_answered: Counter,
    /// ... and those that ended without it: the time ran out, something
    /// else arrived to be carried out, or the member stopped leading.
    pub answer_polls_expired: Counter,
    /// Applications' elections and locks served by this member.
    pub app_elections: Arc<AppElections>,
    /// Applications' task queues in this member's store.
    pub app_tasks: Arc<AppTasks>,
    /// The ZooKeeper endpoint's figures (all zero when it is not served).
    pub zookeeper: Arc<crate::zookeeper::stats::ZkStats>,
    /// Names, help texts and types of all the above, for `render`.
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
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
    /// One turn of the node's loop took `took`: raises the longest turn.
    pub fn loop_turn(&self, took: std::time::Duration) {
        let seconds = took.as_secs_f64();
        if seconds > self.loop_turn_max_seconds.get() {
            self.loop_turn_max_seconds.set(seconds);
        }
    }

    /// Every metric at zero, registered under its name.
    pub fn new() -> Metrics {
        let messages_sent = Family::<Label, Counter>::default();
        let sent_by_kind = PeerMessage::all_kinds()
            .map(|kind| (kind, child(&messages_sent, ("type", kind))))
            .collect();
        let wal_syncs = Family::<Label, Counter>::default();
        let answer_polls = Family::<Label, Counter>::default();
        let mut metrics = Metrics {
            election_duration: Histogram::default(),
            failover: Histogram::default(),
            proposal_latency: Histogram::default(),
            leader_changes: Counter::default(),
            term: IndexGauge::default(),
            role: IndexGauge::default(),
            commit: IndexGauge::default(),
            applied: IndexGauge::default(),
            repairing: IndexGauge::default(),
            leader_uptime_seconds: Gauge::default(),
            detector_threshold_seconds: Gauge::default(),
            detector_mean_gap_seconds: Gauge::default(),
            detector_suspicions: IndexGauge::default(),
            leader_gap_max_seconds: Gauge::default(),
            loop_turn_max_seconds: Gauge::default(),
            sent_by_kind,
            messages_sent,
            refused_peers: Family::default(),
            wal_syncs_on_loop: child(&wal_syncs, ("thread", "loop")),
            wal_syncs_on_thread: child(&wal_syncs, ("thread", "blocking")),
            answer_polls_answered: child(&answer_polls, ("result", "answered")),
            answer_polls_expired: child(&answer_polls, ("result", "expired")),
            app_elections: Arc::default(),
            app_tasks: Arc::default(),
            zookeeper: Arc::default(),
            registry: Registry::default(),
        };
        metrics.register(wal_syncs, answer_polls);
        metrics
    }

    /// Names every metric in the registry.
    fn register(
        &mut self,
        wal_syncs: Family<Label, Counter>,
        answer_polls: Family<Label, Counter>,
    ) {
        let registry = &mut self.registry;
        self.zookeeper.register(registry);
        for (name, help, histogram) in [
            (
                "bellwether_election_duration_seconds",
                "Time from losing a leader to knowing a new one.",
                &self.election_duration,
            ),
            (
                "bellwether_failover_seconds",
                "Time from losing a leader to the first commit under the new one.",
                &self.failover,
            ),
            (
                "bellwether_proposal_latency_seconds",
                "Time from proposal to application on the leader.",
                &self.proposal_latency,
            ),
        ] {
            registry.register(name, help, histogram.clone());
        }
        registry.register(
            "bellwether_leader_changes",
            "Leader changes seen by this node.",
            self.leader_changes.clone(),
        );
        for (name, help, gauge) in [
            ("bellwether_term", "Current Raft term.", &self.term),
            (
                "bellwether_role",
                "0 follower, 1 pre-candidate, 2 candidate, 3 leader.",
                &self.role,
            ),
            ("bellwether_commit_index", "Commit index.", &self.commit),
            ("bellwether_applied_index", "Applied index.", &self.applied),
            (
                "bellwether_repairing",
                "1 while this member's log lacks entries it had acknowledged (lost or damaged) and it repairs from the leader; it then neither campaigns nor votes for a candidate behind what it had.",
                &self.repairing,
            ),
        ] {
            registry.register(name, help, gauge.clone());
        }
        registry.register(
            "bellwether_detector_suspicions",
            "Times this member's adaptive detector suspected a silent leader since it started \
             (each followed by a pre-vote that the others refuse while they still hear it).",
            self.detector_suspicions.clone(),
        );
        registry.register(
            "bellwether_detector_threshold_seconds",
            "The leader's silence after which this member suspects it now: learned from the \
             gaps between the leader's messages, between the floor (detector_heartbeats) and \
             the election timeout.",
            self.detector_threshold_seconds.clone(),
        );
        registry.register(
            "bellwether_detector_mean_gap_seconds",
            "The mean gap between the leader's messages over the detector's window.",
            self.detector_mean_gap_seconds.clone(),
        );
        registry.register(
            "bellwether_leader_gap_max_seconds",
            "Longest gap between two messages of the leader this member followed, since it \
             started, tick-grained (kept by the adaptive detector; 0 when it is off): how long \
             a stall of the leader, the network or this member went unheard.",
            self.leader_gap_max_seconds.clone(),
        );
        registry.register(
            "bellwether_loop_turn_max_seconds",
            "Longest one turn of the member's loop took since it started (its input handled, \
             its output carried out, an fsync on the loop included): the longest it answered \
             no heartbeat, append or client",
            self.loop_turn_max_seconds.clone(),
        );
        registry.register(
            "bellwether_leader_uptime_seconds",
            "Seconds this node has led without interruption.",
            self.leader_uptime_seconds.clone(),
        );
        registry.register(
            "bellwether_messages_sent",
            "Peer messages sent, by type.",
            self.messages_sent.clone(),
        );
        registry.register(
            "bellwether_refused_peers",
            "Peer connections refused, by reason.",
            self.refused_peers.clone(),
        );
        registry.register(
            "bellwether_wal_syncs",
            "Log writes fsynced, by the thread that waits on them: the node's loop (small appends of a member serving one writer at a time, or of a follower with no client work of its own) or a blocking thread.",
            wal_syncs,
        );
        registry.register(
            "bellwether_answer_polls",
            "Times a leader, having fsynced a lone client's write on its loop, polled for the followers' answers instead of sleeping, by outcome: the entry committed within answer_poll_us, or the poll ended without it (time up, other work arrived, or no longer leader).",
            answer_polls,
        );
        registry.register_collector(Box::new(self.app_elections.clone()));
        registry.register_collector(Box::new(self.app_tasks.clone()));
    }

    /// Counts one message of `kind` sent.
    pub fn count_sent(&self, kind: &'static str) {
        match self.sent_by_kind.iter().find(|(known, _)| *known == kind) {
            Some((_, counter)) => counter.inc(),
            None => self.messages_sent.get_or_create(&[("type", kind)]).inc(),
        };
    }

    /// Counts one refused peer connection.
    pub fn count_refused(&self, reason: &'static str) {
        self.refused_peers
            .get_or_create(&[("reason", reason)])
            .inc();
    }

    /// Every metric in the OpenMetrics text format, or why it could not
    /// be written (see `bellwether_metrics::openmetrics`).
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        bellwether_metrics::openmetrics::render(&self.registry)
    }
}

/// The counter of `family` for `label`, made now and shared with it.
///
/// The family's read guard ends here: one held while the next label is
/// made would deadlock on the family's write lock.
fn child(family: &Family<Label, Counter>, label: (&'static str, &'static str)) -> Counter {
    let counter = family.get_or_create(&[label]);
    counter.clone()
}

/// What one collector writes, alone in a registry (for tests).
#[cfg(test)]
pub(crate) fn render_collector(collector: impl prometheus_client::collector::Collector) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    bellwether_metrics::openmetrics::render(&registry).expect("every value fits the format")
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
        metrics.count_sent("append_entries");
        metrics.count_refused("foreign_cluster");
        metrics.wal_syncs_on_loop.inc_by(3);
        let text = metrics.render().unwrap();
        assert!(text.contains("bellwether_failover_seconds_bucket{le=\"0.002\"} 1\n"));
        assert!(text.contains("bellwether_failover_seconds_bucket{le=\"0.2\"} 2\n"));
        assert!(text.contains("bellwether_failover_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("bellwether_failover_seconds_count 2\n"));
        assert!(text.contains("bellwether_failover_seconds_sum 0.1515\n"));
        assert!(text.contains("bellwether_messages_sent_total{type=\"heartbeat\"} 1\n"));
        assert!(text.contains("bellwether_messages_sent_total{type=\"append_entries\"} 1\n"));
        assert!(text.contains("bellwether_messages_sent_total{type=\"vote_request\"} 0\n"));
        assert!(text.contains("bellwether_refused_peers_total{reason=\"foreign_cluster\"} 1\n"));
        assert!(text.contains("bellwether_wal_syncs_total{thread=\"loop\"} 3\n"));
        assert!(text.contains("bellwether_wal_syncs_total{thread=\"blocking\"} 0\n"));
        assert!(text.contains("bellwether_answer_polls_total{result=\"expired\"} 0\n"));
        assert!(text.contains("# TYPE bellwether_leader_changes counter\n"));
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn every_kind_a_member_sends_has_a_counter_made_up_front() {
        let metrics = Metrics::default();
        for kind in PeerMessage::all_kinds() {
            assert!(
                metrics.sent_by_kind.iter().any(|(known, _)| *known == kind),
                "{kind}"
            );
        }
        assert!(metrics
            .sent_by_kind
            .iter()
            .any(|(k, _)| *k == "forward_propose"));
    }
}

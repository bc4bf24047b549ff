//! [`StatusTracker`]: turns the Raft core's state into what a member
//! reports about itself: the `/status` snapshot (published on a watch
//! channel for the HTTP side and the etcd services), the leadership
//! history the dashboard draws, and the election, failover and role
//! metrics. The member's loop calls [`StatusTracker::publish`] after
//! every batch of work; it sends a new snapshot when something changed,
//! or every 50 ms so that lags and uptimes stay fresh.

use crate::config::NodeConfig;
use crate::metrics::Metrics;
use crate::status::{
    DetectorStatus, LeadershipChange, MemberStatus, NodeStatus, LEADERSHIP_HISTORY_MAX,
};
use bellwether_core::raft::RaftNode;
use bellwether_core::{NodeId, Protocol, Role, Status};
use bellwether_member::Roster;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// Longest a member goes without publishing a fresh snapshot.
const PUBLISH_INTERVAL: Duration = Duration::from_millis(50);

/// What identifies a change worth logging and recording: the leader, the
/// term, the role, and whether the leader has committed in its term.
type StateKey = (Option<NodeId>, u64, Role, bool);

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A member's report before its Raft core has said anything.
pub(crate) fn empty_status(config: &NodeConfig, http_address: std::net::SocketAddr) -> NodeStatus {
    NodeStatus {
        id: config.id,
        cluster: config.cluster.clone(),
        version: crate::status::BELLWETHER_VERSION.to_owned(),
        peer_address: config.peer_listen.to_string(),
        http_address: http_address.to_string(),
        role: Role::Follower,
        term: 0,
        leader: None,
        commit: 0,
        applied: 0,
        last_index: 0,
        committed_in_term: false,
        uptime_ms: 0,
        leader_uptime_ms: 0,
        learner: false,
        repairing: false,
        detector: None,
        outside: false,
        members: Vec::new(),
        leadership: Vec::new(),
    }
}

/// Turns core state into status, metrics and leadership history.
pub(crate) struct StatusTracker {
    /// This member.
    me: NodeId,
    /// Milliseconds per core tick, for the detector's figures.
    tick_ms: u64,
    template: NodeStatus,
    started: Instant,
    last: Option<StateKey>,
    leader_since: Option<Instant>,
    lost_at: Option<Instant>,
    failover_pending: bool,
    history: Vec<LeadershipChange>,
    last_publish: Option<Instant>,
}

impl StatusTracker {
    /// A tracker for the member `config` describes, serving HTTP on
    /// `http_address`; it counts the time to a first leader as a failover.
    pub(crate) fn new(config: &NodeConfig, http_address: std::net::SocketAddr) -> Self {
        StatusTracker {
            me: config.id,
            tick_ms: config.tick_ms(),
            template: empty_status(config, http_address),
            started: Instant::now(),
            last: None,
            leader_since: None,
            lost_at: Some(Instant::now()),
            failover_pending: true,
            history: Vec::new(),
            last_publish: None,
        }
    }

    /// Records what changed in `raft` since the last call, updates the
    /// metrics, and sends a new snapshot on `sender` when something changed
    /// or the last one is older than [`PUBLISH_INTERVAL`].
    pub(crate) fn publish(
        &mut self,
        raft: &RaftNode,
        roster: &Roster,
        metrics: &Metrics,
        sender: &watch::Sender<NodeStatus>,
    ) {
        let status = raft.status();
        let now = Instant::now();
        let committed_in_term = raft.log().term(raft.commit_index()) == Some(status.term);
        let key = (status.leader, status.term.0, status.role, committed_in_term);
        let changed = self.last.as_ref() != Some(&key);
        if changed {
            self.record_change(key, now, metrics);
        }
        if self.failover_pending && key.0.is_some() && committed_in_term {
            self.record_failover(metrics);
        }
        let leader_uptime = self
            .leader_since
            .map_or(Duration::ZERO, |since| now.duration_since(since));
        set_gauges(raft, &status, leader_uptime, metrics);
        let detector = self.detector(raft);
        if let Some(d) = &detector {
            metrics
                .detector_threshold_seconds
                .set(d.threshold_ms as f64 / 1000.0);
            metrics
                .detector_mean_gap_seconds
                .set(d.mean_gap_ms as f64 / 1000.0);
            metrics.detector_suspicions.set(d.suspicions);
            metrics
                .leader_gap_max_seconds
                .set(d.longest_gap_ms as f64 / 1000.0);
        }
        let due = self
            .last_publish
            .is_none_or(|at| now.duration_since(at) >= PUBLISH_INTERVAL);
        if !changed && !due {
            return;
        }
        self.last_publish = Some(now);
        sender.send_replace(self.snapshot(raft, roster, &status, key, now, leader_uptime));
    }

    /// The adaptive detector's figures in ms, when it is on.
    fn detector(&self, raft: &RaftNode) -> Option<DetectorStatus> {
        raft.detector_state().map(|d| DetectorStatus {
            threshold_ms: d.threshold_ticks * self.tick_ms,
            mean_gap_ms: d.mean_gap_ticks * self.tick_ms,
            samples: d.samples,
            suspicions: d.suspicions,
            longest_gap_ms: d.longest_gap_ticks * self.tick_ms,
        })
    }

    /// Logs a change of leader, term, role or commitment, and when the
    /// leader changed, adds it to the history and times the election.
    fn record_change(&mut self, key: StateKey, now: Instant, metrics: &Metrics) {
        let (leader, term, role, committed_in_term) = key;
        tracing::info!(term, role = role.as_str(), leader = ?leader.map(|l| l.0), committed_in_term, "raft state changed");
        if let Some((_, last_term, last_role, _)) = self.last {
            match (last_role, role) {
                (Role::Leader, Role::Follower) if last_term == term => tracing::info!(
                    term,
                    "stopped acting as leader in this term: no quorum answered within its \
                     term of office, or leadership was handed over"
                ),
                // Raft takes office only as a candidate of a new term, so
                // this is a leader whose term of office had run out
                // (`keeps_role` in the core) and that a quorum answered.
                (Role::Follower, Role::Leader) if last_term == term => {
                    tracing::info!(
                        term,
                        "acting as leader again in the same term: a quorum answered"
                    )
                }
                _ => {}
            }
        }
        let previous_leader = self.last.as_ref().and_then(|(l, _, _, _)| *l);
        if leader != previous_leader {
            if leader.is_none() {
                self.lost_at = Some(now);
            } else {
                if let Some(lost) = self.lost_at.take() {
                    metrics
                        .election_duration
                        .observe_us(now.duration_since(lost).as_micros() as u64);
                }
                metrics.leader_changes.inc();
            }
            self.failover_pending = true;
            // Raft's term never goes back (the core asserts it when it
            // raises it), so neither does the history's.
            assert!(
                self.history.last().is_none_or(|last| last.term <= term),
                "leadership history terms never go back"
            );
            if self.history.len() >= LEADERSHIP_HISTORY_MAX {
                self.history.remove(0);
            }
            self.history.push(LeadershipChange {
                at_unix_ms: unix_ms(),
                term,
                leader,
            });
            assert!(
                self.history.len() <= LEADERSHIP_HISTORY_MAX,
                "the leadership history is bounded"
            );
        }
        self.leader_since = (role == Role::Leader).then_some(now);
        self.last = Some(key);
    }

    /// A leader committed in its term: the failover since the leader was
    /// last lost is over.
    fn record_failover(&mut self, metrics: &Metrics) {
        self.failover_pending = false;
        if let Some(lost) = self
            .history
            .iter()
            .rev()
            .find(|c| c.leader.is_none())
            .map(|c| c.at_unix_ms)
        {
            metrics
                .failover
                .observe_us(unix_ms().saturating_sub(lost) * 1000);
        }
    }

    /// The report to publish now.
    fn snapshot(
        &self,
        raft: &RaftNode,
        roster: &Roster,
        status: &Status,
        key: StateKey,
        now: Instant,
        leader_uptime: Duration,
    ) -> NodeStatus {
        let cluster = raft.cluster();
        let me = self.me;
        NodeStatus {
            role: status.role,
            term: status.term.0,
            leader: key.0,
            commit: raft.commit_index().0,
            applied: raft.applied_index().0,
            last_index: raft.log().last_index().0,
            committed_in_term: key.3,
            uptime_ms: now.duration_since(self.started).as_millis() as u64,
            leader_uptime_ms: leader_uptime.as_millis() as u64,
            learner: cluster.learners.contains(&me),
            repairing: raft.repair().is_some(),
            detector: self.detector(raft),
            outside: !cluster.members().any(|id| id == me),
            members: other_members(raft, roster, me),
            leadership: self.history.clone(),
            ..self.template.clone()
        }
    }
}

/// The term, role, indexes and leader uptime gauges.
fn set_gauges(raft: &RaftNode, status: &Status, leader_uptime: Duration, metrics: &Metrics) {
    metrics.term.set(status.term.0);
    metrics.role.set(status.role as u64);
    metrics.commit.set(raft.commit_index().0);
    metrics.applied.set(raft.applied_index().0);
    metrics.repairing.set(u64::from(raft.repair().is_some()));
    metrics
        .leader_uptime_seconds
        .set(leader_uptime.as_secs_f64());
}

/// Every member of the configuration but `me`, with its addresses and, on
/// a leader, how far it has matched the log.
fn other_members(raft: &RaftNode, roster: &Roster, me: NodeId) -> Vec<MemberStatus> {
    let cluster = raft.cluster();
    let last_index = raft.log().last_index().0;
    cluster
        .members()
        .filter(|id| *id != me)
        .map(|id| {
            let matched = raft.progress(id).map(|p| p.match_index.0);
            MemberStatus {
                id,
                peer_address: roster
                    .peer_address(id)
                    .map_or_else(String::new, |a| a.to_string()),
                http_address: roster.http_address(id).map(|a| a.to_string()),
                client_address: roster.client_address(id).map(|a| a.to_string()),
                learner: cluster.learners.contains(&id),
                match_index: matched,
                lag: matched.map(|m| last_index.saturating_sub(m)),
            }
        })
        .collect()
}

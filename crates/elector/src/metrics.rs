//! The elector's counters, under the same names a member uses with an
//! `elector` prefix: elections, leadership changes, messages by type,
//! failover time. Plain atomics, indexed by the algorithm's fixed list of
//! message kinds: counting a message takes no lock. prometheus-client
//! writes them in the OpenMetrics text format when they are read.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The content type of what [`ElectorMetrics::render`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Counters of one elector.
#[derive(Debug)]
pub struct ElectorMetrics {
    algorithm: &'static str,
    kinds: &'static [&'static str],
    sent: Vec<AtomicU64>,
    sent_to: Vec<(u64, AtomicU64)>,
    received: Vec<AtomicU64>,
    refused: Mutex<Vec<(&'static str, u64)>>,
    elections: AtomicU64,
    leadership_changes: AtomicU64,
    failovers: AtomicU64,
    failover_micros_total: AtomicU64,
    last_failover_micros: AtomicU64,
    token: AtomicU64,
    leader: AtomicU64,
    is_leader: AtomicU64,
}

impl ElectorMetrics {
    /// Counters for an algorithm whose messages are `kinds`, sent to
    /// `peers`.
    pub fn new(
        algorithm: &'static str,
        kinds: &'static [&'static str],
        peers: &[u64],
    ) -> ElectorMetrics {
        let zeros = || kinds.iter().map(|_| AtomicU64::new(0)).collect();
        ElectorMetrics {
            algorithm,
            kinds,
            sent: zeros(),
            sent_to: peers.iter().map(|p| (*p, AtomicU64::new(0))).collect(),
            received: zeros(),
            refused: Mutex::new(Vec::new()),
            elections: AtomicU64::new(0),
            leadership_changes: AtomicU64::new(0),
            failovers: AtomicU64::new(0),
            failover_micros_total: AtomicU64::new(0),
            last_failover_micros: AtomicU64::new(0),
            token: AtomicU64::new(0),
            leader: AtomicU64::new(0),
            is_leader: AtomicU64::new(0),
        }
    }

    fn slot(&self, kind: &str) -> Option<usize> {
        self.kinds.iter().position(|k| *k == kind)
    }

    /// One message of `kind` arrived.
    pub fn count_received(&self, kind: &str) {
        if let Some(i) = self.slot(kind) {
            self.received[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Messages of `kind` sent so far.
    pub fn sent(&self, kind: &str) -> u64 {
        self.slot(kind)
            .map_or(0, |i| self.sent[i].load(Ordering::Relaxed))
    }

    /// Messages sent so far, all kinds.
    pub fn sent_total(&self) -> u64 {
        self.sent.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Messages sent so far to `peer`, all kinds: what the idle-traffic
    /// bound (one message per peer per heartbeat) is checked against.
    pub fn sent_to(&self, peer: u64) -> u64 {
        self.sent_to
            .iter()
            .find(|(p, _)| *p == peer)
            .map_or(0, |(_, c)| c.load(Ordering::Relaxed))
    }

    /// This node started an election (became a candidate).
    pub fn count_election(&self) {
        self.elections.fetch_add(1, Ordering::Relaxed);
    }

    /// Elections this node started.
    pub fn elections(&self) -> u64 {
        self.elections.load(Ordering::Relaxed)
    }

    /// The leader this node follows changed to `leader` (0: none).
    pub fn set_leader(&self, leader: u64, token: u64, is_leader: bool) {
        if leader != 0 {
            self.leadership_changes.fetch_add(1, Ordering::Relaxed);
        }
        self.leader.store(leader, Ordering::Relaxed);
        self.token.store(token, Ordering::Relaxed);
        self.is_leader
            .store(u64::from(is_leader), Ordering::Relaxed);
    }

    /// Leaders this node came to follow (or became).
    pub fn leadership_changes(&self) -> u64 {
        self.leadership_changes.load(Ordering::Relaxed)
    }

    /// A leader was found `micros` after this node lost the previous one.
    pub fn record_failover(&self, micros: u64) {
        self.failovers.fetch_add(1, Ordering::Relaxed);
        self.failover_micros_total
            .fetch_add(micros, Ordering::Relaxed);
        self.last_failover_micros.store(micros, Ordering::Relaxed);
    }

    /// The most recent failover, in microseconds (0: none yet).
    pub fn last_failover_micros(&self) -> u64 {
        self.last_failover_micros.load(Ordering::Relaxed)
    }

    /// Every counter in the OpenMetrics text format ([`CONTENT_TYPE`]).
    pub fn render(self: &Arc<Self>) -> String {
        let mut registry = Registry::with_prefix("bellwether_elector");
        registry.register_collector(Box::new(self.clone()));
        let mut out = String::with_capacity(4096);
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("every value here is one the text format holds");
        out
    }

    /// Name, type, help and value of each figure with no label but the
    /// algorithm.
    fn figures(&self) -> [(&'static str, MetricType, &'static str, Figure); 8] {
        let load = |c: &AtomicU64| Figure::Count(c.load(Ordering::Relaxed));
        let seconds = |c: &AtomicU64| Figure::Seconds(c.load(Ordering::Relaxed) as f64 / 1e6);
        [
            (
                "elections",
                MetricType::Counter,
                "Elections this node started.",
                load(&self.elections),
            ),
            (
                "leadership_changes",
                MetricType::Counter,
                "Leaders this node came to follow or became.",
                load(&self.leadership_changes),
            ),
            (
                "failovers",
                MetricType::Counter,
                "Times this node found a new leader after losing one.",
                load(&self.failovers),
            ),
            (
                "failover_seconds",
                MetricType::Counter,
                "Time without a leader, summed over failovers.",
                seconds(&self.failover_micros_total),
            ),
            (
                "last_failover_seconds",
                MetricType::Gauge,
                "The most recent failover.",
                seconds(&self.last_failover_micros),
            ),
            (
                "token",
                MetricType::Gauge,
                "The current term or epoch.",
                load(&self.token),
            ),
            (
                "leader",
                MetricType::Gauge,
                "The leader this node follows (0: none).",
                load(&self.leader),
            ),
            (
                "is_leader",
                MetricType::Gauge,
                "1 while this node leads.",
                load(&self.is_leader),
            ),
        ]
    }
}

/// One value: a count, or seconds.
enum Figure {
    Count(u64),
    Seconds(f64),
}

impl Collector for ElectorMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let algorithm = [("algorithm", self.algorithm)];
        for (name, kind, help, value) in self.figures() {
            let counter = matches!(kind, MetricType::Counter);
            let mut descriptor = encoder.encode_descriptor(name, help, None, kind)?;
            let mut metric = descriptor.encode_family(&algorithm)?;
            match (counter, value) {
                (true, Figure::Count(v)) => {
                    metric.encode_counter::<NoLabelSet, _, u64>(&v, None)?
                }
                (true, Figure::Seconds(v)) => {
                    metric.encode_counter::<NoLabelSet, _, f64>(&v, None)?
                }
                // A gauge is written as a signed integer; an id past
                // i64::MAX is written as a float (what Prometheus reads
                // every value as) rather than failing the whole page.
                (false, Figure::Count(v)) => match i64::try_from(v) {
                    Ok(v) => metric.encode_gauge(&v)?,
                    Err(_) => metric.encode_gauge(&(v as f64))?,
                },
                (false, Figure::Seconds(v)) => metric.encode_gauge(&v)?,
            }
        }
        for (name, values) in [
            ("messages_sent", &self.sent),
            ("messages_received", &self.received),
        ] {
            let mut metric = encoder.encode_descriptor(
                name,
                "Peer messages by type.",
                None,
                MetricType::Counter,
            )?;
            for (kind, value) in self.kinds.iter().zip(values.iter()) {
                let labels = [("algorithm", self.algorithm), ("type", kind)];
                metric
                    .encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(&value.load(Ordering::Relaxed), None)?;
            }
        }
        let mut metric = encoder.encode_descriptor(
            "peer_messages_sent",
            "Peer messages by destination.",
            None,
            MetricType::Counter,
        )?;
        for (peer, value) in &self.sent_to {
            let labels = [
                ("algorithm", self.algorithm.to_string()),
                ("peer", peer.to_string()),
            ];
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&value.load(Ordering::Relaxed), None)?;
        }
        let mut metric = encoder.encode_descriptor(
            "refused_connections",
            "Peer connections refused, by reason.",
            None,
            MetricType::Counter,
        )?;
        for (reason, value) in self.refused.lock().expect("metrics lock").iter() {
            metric
                .encode_family(&[("reason", *reason)])?
                .encode_counter::<NoLabelSet, _, u64>(value, None)?;
        }
        Ok(())
    }
}

impl bellwether_transport::Observer for ElectorMetrics {
    fn sent(&self, peer: u64, kind: &'static str) {
        if let Some(i) = self.slot(kind) {
            self.sent[i].fetch_add(1, Ordering::Relaxed);
        }
        if let Some((_, count)) = self.sent_to.iter().find(|(p, _)| *p == peer) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn refused(&self, reason: &'static str) {
        let mut refused = self.refused.lock().expect("metrics lock");
        match refused.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, count)) => *count += 1,
            None => refused.push((reason, 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_transport::Observer;

    #[test]
    fn counts_render_under_their_labels() {
        let metrics = Arc::new(ElectorMetrics::new(
            "bully",
            &["election", "heartbeat"],
            &[2, 3],
        ));
        Observer::sent(&*metrics, 2, "heartbeat");
        Observer::sent(&*metrics, 3, "heartbeat");
        metrics.count_received("election");
        metrics.count_election();
        metrics.set_leader(3, 4, false);
        metrics.record_failover(25_000);
        Observer::refused(&*metrics, "settings_differ");
        let text = metrics.render();
        for line in [
            "bellwether_elector_messages_sent_total{algorithm=\"bully\",type=\"heartbeat\"} 2",
            "bellwether_elector_messages_received_total{algorithm=\"bully\",type=\"election\"} 1",
            "bellwether_elector_elections_total{algorithm=\"bully\"} 1",
            "bellwether_elector_leadership_changes_total{algorithm=\"bully\"} 1",
            "bellwether_elector_leader{algorithm=\"bully\"} 3",
            "bellwether_elector_token{algorithm=\"bully\"} 4",
            "bellwether_elector_last_failover_seconds{algorithm=\"bully\"} 0.025",
            "# TYPE bellwether_elector_elections counter",
            "# EOF",
            "bellwether_elector_failover_seconds_total{algorithm=\"bully\"} 0.025",
            "bellwether_elector_refused_connections_total{reason=\"settings_differ\"} 1",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        assert_eq!(metrics.sent_total(), 2);
        assert_eq!((metrics.sent_to(2), metrics.sent_to(3)), (1, 1));
        let per_peer =
            "bellwether_elector_peer_messages_sent_total{algorithm=\"bully\",peer=\"2\"} 1";
        assert!(text.contains(per_peer), "missing {per_peer} in\n{text}");
        metrics.set_leader(u64::MAX, 4, false);
        let text = metrics.render();
        let past_i64 = "bellwether_elector_leader{algorithm=\"bully\"} 18446744073709553000.0";
        assert!(text.contains(past_i64), "missing {past_i64} in\n{text}");
    }
}

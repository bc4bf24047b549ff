//! A worker's counters and the leader's latency histograms for a
//! `/metrics` endpoint (`bellwether tasks worker --metrics`), labelled with
//! the queue's name and written by prometheus-client.

use super::worker_stats::WorkerStats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One worker's figures, as a collector read on each scrape.
#[derive(Debug)]
struct WorkerCollector {
    stats: Arc<WorkerStats>,
    /// The queue's name, escaped for a label value.
    queue: String,
}

/// The worker's counters and histograms in the OpenMetrics text format,
/// labelled `queue="<queue>"` (see [`crate::openmetrics`]).
pub fn render(stats: Arc<WorkerStats>, queue: &str) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(WorkerCollector {
        stats,
        queue: queue.replace('\\', "\\\\").replace('"', "\\\""),
    }));
    crate::openmetrics::render(&registry)
}

impl WorkerCollector {
    /// Name, help and value of each counter.
    fn counters(&self) -> [(&'static str, &'static str, &AtomicU64); 11] {
        let stats = &self.stats;
        [
            ("executed", "Handler runs started.", &stats.executed),
            (
                "cancelled",
                "Handler runs cancelled before they returned (session lost or worker stopping).",
                &stats.cancelled,
            ),
            ("done", "Results accepted as done.", &stats.done),
            (
                "failed",
                "Failures accepted (retried or dead-lettered).",
                &stats.failed,
            ),
            (
                "refused_stale_results",
                "Results refused: the task had moved to another assignment.",
                &stats.refused,
            ),
            (
                "skipped",
                "Assignments no longer current on arrival.",
                &stats.skipped,
            ),
            (
                "assigned",
                "As leader: first assignments written.",
                &stats.assigned,
            ),
            (
                "reassigned",
                "As leader: tasks moved from workers that were gone.",
                &stats.reassigned,
            ),
            (
                "dead_lettered",
                "As leader: tasks moved to the dead letters.",
                &stats.dead_lettered,
            ),
            (
                "aggregated",
                "As leader: group aggregators created.",
                &stats.aggregated,
            ),
            ("sessions", "Sessions started.", &stats.sessions),
        ]
    }
}

impl Collector for WorkerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let labels = [("queue", self.queue.as_str())];
        for (name, help, value) in self.counters() {
            let name = format!("bellwether_tasks_worker_{name}");
            encoder
                .encode_descriptor(&name, help, None, MetricType::Counter)?
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&value.load(Ordering::Relaxed), None)?;
        }
        let leading = u64::from(self.stats.leading.load(Ordering::Relaxed));
        encoder
            .encode_descriptor(
                "bellwether_tasks_worker_leading",
                "Whether this worker leads the queue.",
                None,
                MetricType::Gauge,
            )?
            .encode_family(&labels)?
            .encode_gauge(&leading)?;
        let stats = &self.stats;
        for (name, help, histogram) in [
            (
                "assignment",
                "As leader: waiting task seen to assignment written.",
                &stats.assignment_latency,
            ),
            (
                "reassignment",
                "As leader: worker seen gone to its task moved.",
                &stats.reassignment_latency,
            ),
            (
                "group_completion",
                "As leader: last member seen done to aggregator created.",
                &stats.group_completion_latency,
            ),
        ] {
            let name = format!("bellwether_tasks_leader_{name}_seconds");
            let mut metric = encoder.encode_descriptor(&name, help, None, MetricType::Histogram)?;
            histogram.encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counters_gauge_and_histograms_carry_the_queue_label() {
        let stats = Arc::new(WorkerStats::default());
        stats.done.fetch_add(2, Ordering::Relaxed);
        stats.leading.store(true, Ordering::Relaxed);
        stats.assignment_latency.record(Duration::from_millis(3));
        let text = render(stats, "jobs \"a\"").unwrap();
        for line in [
            "# TYPE bellwether_tasks_worker_done counter\n",
            "bellwether_tasks_worker_done_total{queue=\"jobs \\\"a\\\"\"} 2\n",
            "bellwether_tasks_worker_leading{queue=\"jobs \\\"a\\\"\"} 1\n",
            "bellwether_tasks_leader_assignment_seconds_bucket{le=\"0.005\",queue=\"jobs \\\"a\\\"\"} 1\n",
            "bellwether_tasks_leader_assignment_seconds_count{queue=\"jobs \\\"a\\\"\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}

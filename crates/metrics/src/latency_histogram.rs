//! [`LatencyHistogram`]: fixed buckets of durations, counted with atomics
//! and written by prometheus-client as an OpenMetrics histogram.
//!
//! One type serves the task leader's reaction times and a member's
//! election, failover and proposal latencies. prometheus-client's own
//! histogram takes a lock on every observation; a member observes one per
//! write, so this one counts with atomics and only borrows the crate's
//! encoder.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Upper bounds of the buckets, in seconds (a last bucket takes the rest).
pub const BUCKETS_SECONDS: [f64; 14] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

/// Counts of durations by bucket, and their sum; clones share them.
#[derive(Debug, Default, Clone)]
pub struct LatencyHistogram {
    counts: Arc<Counts>,
}

/// What a [`LatencyHistogram`]'s clones share.
#[derive(Debug, Default)]
struct Counts {
    /// One count per bucket of [`BUCKETS_SECONDS`], then the overflow.
    per_bucket: [AtomicU64; BUCKETS_SECONDS.len() + 1],
    /// The sum, in microseconds.
    sum_us: AtomicU64,
}

impl LatencyHistogram {
    /// Counts one duration.
    pub fn record(&self, duration: Duration) {
        self.observe_us(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX));
    }

    /// Counts one duration of `us` microseconds.
    pub fn observe_us(&self, us: u64) {
        let seconds = us as f64 / 1e6;
        let bucket = BUCKETS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BUCKETS_SECONDS.len());
        self.counts.per_bucket[bucket].fetch_add(1, Ordering::Relaxed);
        self.counts.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.counts
            .per_bucket
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let mut buckets = [(f64::MAX, 0); BUCKETS_SECONDS.len() + 1];
        for (i, (bound, count)) in buckets.iter_mut().enumerate() {
            if let Some(upper) = BUCKETS_SECONDS.get(i) {
                *bound = *upper;
            }
            *count = self.counts.per_bucket[i].load(Ordering::Relaxed);
        }
        let count = buckets.iter().map(|(_, count)| count).sum();
        let sum = self.counts.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    #[test]
    fn durations_land_in_cumulative_buckets() {
        let histogram = LatencyHistogram::default();
        histogram.record(Duration::from_micros(500));
        histogram.record(Duration::from_millis(7));
        histogram.record(Duration::from_secs(60));
        assert_eq!(histogram.count(), 3);
        let mut registry = Registry::default();
        registry.register("x_seconds", "A test histogram.", histogram.clone());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE x_seconds histogram\n",
            "x_seconds_bucket{le=\"0.001\"} 1\n",
            "x_seconds_bucket{le=\"0.01\"} 2\n",
            "x_seconds_bucket{le=\"30.0\"} 2\n",
            "x_seconds_bucket{le=\"+Inf\"} 3\n",
            "x_seconds_count 3\n",
            "x_seconds_sum 60.0075\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}

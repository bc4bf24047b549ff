//! [`LatencyHistogram`]: a fixed-bucket histogram of durations that
//! renders in Prometheus' text format, for the leader's reaction times.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in milliseconds (a last bucket takes the
/// rest).
pub const BUCKETS_MS: [u64; 12] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

/// Counts of durations by bucket, and their sum.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    /// One count per bucket of [`BUCKETS_MS`], then the overflow.
    counts: [AtomicU64; BUCKETS_MS.len() + 1],
    /// The sum, in microseconds.
    sum_us: AtomicU64,
}

impl LatencyHistogram {
    /// Counts one duration.
    pub fn record(&self, duration: Duration) {
        let ms = duration.as_secs_f64() * 1000.0;
        let bucket = BUCKETS_MS
            .iter()
            .position(|bound| ms <= *bound as f64)
            .unwrap_or(BUCKETS_MS.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        self.sum_us.fetch_add(micros, Ordering::Relaxed);
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Appends the histogram `name` (seconds) with `labels` (`key="value"`
    /// pairs, already escaped) in Prometheus' text format, without the
    /// HELP and TYPE lines.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let separator = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, bound) in BUCKETS_MS.iter().enumerate() {
            cumulative += self.counts[i].load(Ordering::Relaxed);
            let le = *bound as f64 / 1000.0;
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{separator}le=\"{le}\"}} {cumulative}"
            );
        }
        cumulative += self.counts[BUCKETS_MS.len()].load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{separator}le=\"+Inf\"}} {cumulative}"
        );
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_cumulative_buckets() {
        let histogram = LatencyHistogram::default();
        histogram.record(Duration::from_micros(500));
        histogram.record(Duration::from_millis(7));
        histogram.record(Duration::from_secs(60));
        assert_eq!(histogram.count(), 3);
        let mut text = String::new();
        histogram.render(&mut text, "x_seconds", "queue=\"q\"");
        assert!(
            text.contains("x_seconds_bucket{queue=\"q\",le=\"0.001\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{queue=\"q\",le=\"0.01\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{queue=\"q\",le=\"5\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{queue=\"q\",le=\"+Inf\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("x_seconds_count{queue=\"q\"} 3\n"), "{text}");
    }
}

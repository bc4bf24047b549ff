//! [`Latencies`]: the benchmarks' latency samples, kept in an HDR histogram
//! (the `hdrhistogram` crate) instead of a vector sorted at the end.
//!
//! A histogram records a sample in constant time and memory whatever the
//! run's length (a closed-loop client at 30,000 operations a second used to
//! keep every sample, bounded at 4 million per client), merges across
//! clients by adding counts, and reads any quantile without sorting. It
//! keeps three significant digits: a 1.234 ms sample reads back within
//! 0.001 ms, far finer than the run-to-run spread of any figure we report.

use hdrhistogram::Histogram;
use std::time::Duration;

/// Significant decimal digits the histogram keeps.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Latency samples, in microseconds.
#[derive(Clone, Debug)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            histogram: Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits are valid"),
        }
    }
}

impl Latencies {
    /// Records one sample.
    pub fn record(&mut self, latency: Duration) {
        self.record_us(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
    }

    /// Records one sample of `us` microseconds.
    pub fn record_us(&mut self, us: u64) {
        // The histogram grows as larger values come; past what it can ever
        // hold (about 2^63), a value is counted as the largest it holds.
        if self.histogram.record(us).is_err() {
            self.histogram.saturating_record(us);
        }
    }

    /// Records one sample of `ms` milliseconds (rounded to the microsecond).
    pub fn record_ms(&mut self, ms: f64) {
        assert!(ms >= 0.0, "a latency is not negative: {ms}");
        self.record_us((ms * 1000.0).round() as u64);
    }

    /// A histogram of `ms` samples.
    pub fn of_ms(samples: impl IntoIterator<Item = f64>) -> Latencies {
        let mut latencies = Latencies::default();
        for ms in samples {
            latencies.record_ms(ms);
        }
        latencies
    }

    /// Adds `other`'s samples to these.
    pub fn merge(&mut self, other: &Latencies) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms that grow take any sample");
    }

    /// How many samples were recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The `q` quantile in ms: the smallest recorded value that at least a
    /// fraction `q` of the samples do not exceed; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        assert!((0.0..=1.0).contains(&q), "a quantile is within [0, 1]");
        if self.histogram.is_empty() {
            return 0.0;
        }
        self.histogram.value_at_quantile(q) as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_read_within_three_significant_digits() {
        let mut latencies = Latencies::default();
        for ms in 1..=100u64 {
            latencies.record(Duration::from_millis(ms));
        }
        assert_eq!(latencies.count(), 100);
        let close = |got: f64, want: f64| (got - want).abs() <= want / 1000.0;
        assert!(
            close(latencies.quantile_ms(0.5), 50.0),
            "{}",
            latencies.quantile_ms(0.5)
        );
        assert!(close(latencies.quantile_ms(0.99), 99.0));
        assert!(close(latencies.quantile_ms(1.0), 100.0));
        assert!(close(latencies.quantile_ms(0.0), 1.0));
        assert_eq!(Latencies::default().quantile_ms(0.5), 0.0);
    }

    #[test]
    fn merged_histograms_count_every_sample() {
        let mut fast = Latencies::of_ms([1.0, 1.0, 1.0]);
        let slow = Latencies::of_ms([250.0]);
        fast.merge(&slow);
        assert_eq!(fast.count(), 4);
        assert!((fast.quantile_ms(1.0) - 250.0).abs() <= 0.25);
        assert!((fast.quantile_ms(0.5) - 1.0).abs() <= 0.001);
    }
}

//! A small seeded pseudo-random generator (SplitMix64), injected into every
//! state machine so that the same seed always replays the same run.
//!
//! The core never reads a global RNG or the wall clock: determinism is what
//! lets the simulator print one seed that reproduces a failure exactly.

/// Deterministic 64-bit generator. Not cryptographic; used only for timeouts,
/// jitter and fault schedules.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose whole output is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// Derives an independent stream, e.g. one per node, from this seed and a
    /// stream number, without consuming values from `self`.
    pub fn derive(seed: u64, stream: u64) -> Self {
        let mut mixer = Rng::new(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        Rng::new(mixer.next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high)`; `high` must be greater than `low`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        assert!(high > low, "empty range [{low}, {high})");
        let span = high - low;
        // Multiply-shift keeps the bias below 2^-64 per draw, far below what
        // any timeout distribution could show.
        low + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn range_stays_in_bounds_and_covers_it() {
        let mut rng = Rng::new(1);
        let mut seen = [false; 10];
        for _ in 0..10_000 {
            let v = rng.range(10, 20);
            assert!((10..20).contains(&v));
            seen[(v - 10) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s), "every value in the range is drawn");
    }

    #[test]
    fn derived_streams_differ() {
        let mut a = Rng::derive(5, 1);
        let mut b = Rng::derive(5, 2);
        assert_ne!(a.next_u64(), b.next_u64());
    }
}

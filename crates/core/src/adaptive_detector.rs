//! [`AdaptiveDetector`]: when to suspect a leader that went silent.
//!
//! A follower that only waits out a fixed election timeout notices a silent
//! leader (a cut cable, a hung host) no sooner than that timeout, which must
//! cover the worst pause ever seen. This detector learns how the leader's
//! messages actually arrive and suspects it once the silence is far past
//! that pattern: `mean + k × deviation` of the recent gaps, the rule the
//! phi-accrual detector (Hayashibara et al.) applies under its normal model.
//! The result is held between a floor, set in heartbeats so that a few lost
//! heartbeats never look like a failure, and a ceiling, the fixed election
//! timeout, so it is never slower than the timer it improves on.
//!
//! A suspicion is only a reason to *ask*: the algorithms let it start a
//! pre-vote (Raft, Paxos) or an election round whose success still needs
//! the others to agree, so a wrong suspicion costs a refused request, not a
//! leader. It works in the caller's ticks and does no IO, so the simulator
//! runs it exactly as production does.

use std::collections::VecDeque;

/// Gaps remembered, at most: enough for a stable mean, few enough that the
/// pattern follows a change of load within seconds.
pub const WINDOW: usize = 64;

/// Gaps needed before the learned threshold is used; until then the
/// ceiling holds.
pub const SAMPLES_MIN: usize = 8;

/// Deviations past the mean at which silence is suspected.
pub const DEVIATIONS: u64 = 4;

/// The settings of one detector, in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DetectorBounds {
    /// It never suspects a silence shorter than this.
    pub floor_ticks: u64,
    /// It always suspects a silence this long (the fixed timeout).
    pub ceiling_ticks: u64,
}

impl DetectorBounds {
    /// The bounds every algorithm uses: a floor of `floor_heartbeats`
    /// heartbeats of `heartbeat_ticks` and a ceiling of the algorithm's
    /// fixed timeout, `timeout_ticks`; `None` (the detector off) for a
    /// floor of 0. A floor above the timeout is held at it (configurations
    /// refuse one).
    pub fn of(floor_heartbeats: u64, heartbeat_ticks: u64, timeout_ticks: u64) -> Option<Self> {
        (floor_heartbeats != 0).then(|| DetectorBounds {
            floor_ticks: floor_heartbeats
                .saturating_mul(heartbeat_ticks)
                .clamp(1, timeout_ticks.max(1)),
            ceiling_ticks: timeout_ticks.max(1),
        })
    }
}

/// What the detector knows, for `/metrics` and `/status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DetectorState {
    /// The silence, in ticks, past which it suspects now.
    pub threshold_ticks: u64,
    /// Mean gap between arrivals in the window, in ticks.
    pub mean_gap_ticks: u64,
    /// Gaps in the window.
    pub samples: usize,
    /// Suspicions raised since start.
    pub suspicions: u64,
    /// The longest gap between two of the watched peer's messages since
    /// start, in ticks: what a stalled leader (or a stalled member) cost.
    pub longest_gap_ticks: u64,
}

/// Learns the gaps between a peer's messages and says when its silence is
/// past what those gaps make likely.
#[derive(Clone, Debug)]
pub struct AdaptiveDetector {
    bounds: DetectorBounds,
    /// The newest gaps, oldest first.
    gaps: VecDeque<u64>,
    /// Sum of `gaps`.
    sum: u64,
    /// Sum of the squares of `gaps`.
    sum_squares: u128,
    /// When the watched peer was last heard, if since the last `forget`.
    last_heard: Option<u64>,
    /// Whether the current silence was already counted as a suspicion.
    suspected: bool,
    /// Suspicions raised since start.
    suspicions: u64,
    /// The longest gap since start (see [`DetectorState`]).
    longest_gap_ticks: u64,
}

impl AdaptiveDetector {
    /// A detector that suspects between `bounds.floor_ticks` and
    /// `bounds.ceiling_ticks` of silence.
    pub fn new(bounds: DetectorBounds) -> AdaptiveDetector {
        assert!(
            bounds.floor_ticks >= 1 && bounds.floor_ticks <= bounds.ceiling_ticks,
            "detector bounds out of order: {bounds:?}"
        );
        AdaptiveDetector {
            bounds,
            gaps: VecDeque::with_capacity(WINDOW),
            sum: 0,
            sum_squares: 0,
            last_heard: None,
            suspected: false,
            suspicions: 0,
            longest_gap_ticks: 0,
        }
    }

    /// The watched peer was heard at `now`.
    pub fn heard(&mut self, now: u64) {
        if let Some(last) = self.last_heard {
            let gap = now.saturating_sub(last);
            // Messages in one burst say nothing about the pattern.
            if gap > 0 {
                if self.gaps.len() == WINDOW {
                    let old = self.gaps.pop_front().expect("a full window");
                    self.sum -= old;
                    self.sum_squares -= u128::from(old) * u128::from(old);
                }
                self.gaps.push_back(gap);
                self.sum += gap;
                self.sum_squares += u128::from(gap) * u128::from(gap);
                self.longest_gap_ticks = self.longest_gap_ticks.max(gap);
            }
        }
        self.last_heard = Some(now);
        self.suspected = false;
        assert!(self.gaps.len() <= WINDOW, "the window is bounded");
    }

    /// The peer watched changed (a new leader, or none): the silence
    /// starts over; the gaps learned stay, as they describe the cluster's
    /// heartbeat, not one leader.
    pub fn forget(&mut self) {
        self.last_heard = None;
        self.suspected = false;
    }

    /// The silence, in ticks, past which it suspects.
    pub fn threshold(&self) -> u64 {
        let n = self.gaps.len() as u64;
        if self.gaps.len() < SAMPLES_MIN {
            return self.bounds.ceiling_ticks;
        }
        let mean = self.sum / n;
        let mean_squares = self.sum_squares / u128::from(n);
        let variance = mean_squares.saturating_sub(u128::from(mean) * u128::from(mean));
        // A perfectly regular peer has no deviation; a tenth of the mean
        // keeps one late message from looking like a failure anyway (the
        // floor usually covers it).
        let deviation = (variance as f64).sqrt() as u64;
        let deviation = deviation.max(mean / 10).max(1);
        mean.saturating_add(DEVIATIONS * deviation)
            .clamp(self.bounds.floor_ticks, self.bounds.ceiling_ticks)
    }

    /// Whether, at `now`, the silence is past the threshold. Counts each
    /// silence once in [`DetectorState::suspicions`].
    pub fn suspects(&mut self, now: u64) -> bool {
        let Some(last) = self.last_heard else {
            return false;
        };
        let silent = now.saturating_sub(last) > self.threshold();
        if silent && !self.suspected {
            self.suspected = true;
            self.suspicions += 1;
        }
        silent
    }

    /// What it knows now.
    pub fn state(&self) -> DetectorState {
        DetectorState {
            threshold_ticks: self.threshold(),
            mean_gap_ticks: if self.gaps.is_empty() {
                0
            } else {
                self.sum / self.gaps.len() as u64
            },
            samples: self.gaps.len(),
            suspicions: self.suspicions,
            longest_gap_ticks: self.longest_gap_ticks,
        }
    }

    /// Its bounds.
    pub fn bounds(&self) -> DetectorBounds {
        self.bounds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detector() -> AdaptiveDetector {
        AdaptiveDetector::new(DetectorBounds {
            floor_ticks: 30,
            ceiling_ticks: 100,
        })
    }

    #[test]
    fn until_it_has_learned_it_waits_the_whole_timeout() {
        let mut d = detector();
        assert!(!d.suspects(1_000), "never heard: nothing to suspect");
        d.heard(0);
        d.heard(10);
        assert_eq!(d.threshold(), 100);
        assert!(!d.suspects(110));
        assert!(d.suspects(111));
    }

    #[test]
    fn a_regular_heartbeat_brings_it_down_to_the_floor() {
        let mut d = detector();
        for i in 0..20 {
            d.heard(i * 10);
        }
        assert_eq!(d.threshold(), 30, "10 + 4 × 1 is below the floor");
        assert!(!d.suspects(190 + 30));
        assert!(d.suspects(190 + 31));
        assert_eq!(d.state().suspicions, 1);
        assert!(d.suspects(190 + 40));
        assert_eq!(d.state().suspicions, 1, "one silence, one suspicion");
        d.heard(240);
        assert!(!d.suspects(241));
    }

    #[test]
    fn irregular_arrivals_raise_it_up_to_the_ceiling() {
        let mut d = detector();
        let mut now = 0;
        for i in 0..40 {
            now += if i % 2 == 0 { 2 } else { 30 };
            d.heard(now);
        }
        let t = d.threshold();
        assert!(t > 30 && t < 100, "mean 16, deviation 14: {t}");
        for _ in 0..40 {
            now += 90;
            d.heard(now);
        }
        assert_eq!(d.threshold(), 100, "mean 90 + 4 deviations is capped");
    }

    #[test]
    fn the_window_forgets_old_gaps() {
        let mut d = detector();
        let mut now = 0;
        for _ in 0..WINDOW {
            now += 90;
            d.heard(now);
        }
        assert_eq!(d.threshold(), 100);
        for _ in 0..WINDOW {
            now += 5;
            d.heard(now);
        }
        assert_eq!(d.state().samples, WINDOW);
        assert_eq!(d.state().mean_gap_ticks, 5);
        assert_eq!(d.threshold(), 30);
        assert_eq!(
            d.state().longest_gap_ticks,
            90,
            "the longest gap outlives the window"
        );
    }

    #[test]
    fn a_new_peer_starts_a_new_silence_but_keeps_the_pattern() {
        let mut d = detector();
        for i in 0..20 {
            d.heard(i * 10);
        }
        d.forget();
        assert!(!d.suspects(10_000), "no one to suspect yet");
        d.heard(10_000);
        assert_eq!(d.threshold(), 30);
        assert!(d.suspects(10_031));
    }
}

//! When `bellwether up` starts an exited member again, and when it stops
//! trying.
//!
//! A member that cannot start (its port taken, its data directory
//! refused, its config wrong) exits at once. Restarting it at once, as
//! `up` used to, restarted every member about 14 times a second forever
//! and buried the cause in the member's log. Here a member that exits
//! soon after it started waits longer before each new start (doubling
//! from [`FIRST_DELAY`] to [`DELAY_MAX`]), and after [`FAILED_STARTS_MAX`]
//! such exits in a row `up` gives up and says why. A member that ran for
//! [`STABLE_RUN`] before it exited starts again at the shortest delay: it
//! crashed, it did not fail to start.
//!
//! Pure: the caller passes the time, so the rule is tested without
//! waiting.

use std::time::{Duration, Instant};

/// A run at least this long counts as a start that worked.
pub const STABLE_RUN: Duration = Duration::from_secs(10);
/// The wait before the first restart.
pub const FIRST_DELAY: Duration = Duration::from_millis(200);
/// The longest wait between restarts.
pub const DELAY_MAX: Duration = Duration::from_secs(5);
/// Exits soon after a start, in a row, after which `up` gives up.
pub const FAILED_STARTS_MAX: u32 = 5;

/// What to do about a member that exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterExit {
    /// Start it again at this time.
    RestartAt(Instant),
    /// It failed to start this many times in a row: stop trying.
    GiveUp(u32),
}

/// One member's starts and exits.
#[derive(Debug, Clone)]
pub struct RestartBackoff {
    started_at: Instant,
    failed_starts: u32,
}

impl RestartBackoff {
    /// A member started at `now`.
    pub fn started(now: Instant) -> RestartBackoff {
        RestartBackoff {
            started_at: now,
            failed_starts: 0,
        }
    }

    /// The member exited at `now`.
    pub fn exited(&mut self, now: Instant) -> AfterExit {
        let ran = now.saturating_duration_since(self.started_at);
        self.failed_starts = if ran >= STABLE_RUN {
            1
        } else {
            self.failed_starts + 1
        };
        if self.failed_starts >= FAILED_STARTS_MAX {
            return AfterExit::GiveUp(self.failed_starts);
        }
        AfterExit::RestartAt(now + delay_after(self.failed_starts))
    }

    /// The member was started again at `now`.
    pub fn restarted(&mut self, now: Instant) {
        self.started_at = now;
    }
}

/// The wait before the next start after `failed_starts` (≥ 1) exits in a
/// row.
fn delay_after(failed_starts: u32) -> Duration {
    let doublings = failed_starts.saturating_sub(1).min(16);
    FIRST_DELAY.saturating_mul(1 << doublings).min(DELAY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_that_keeps_failing_to_start_waits_longer_each_time_then_is_given_up() {
        let mut now = Instant::now();
        let mut backoff = RestartBackoff::started(now);
        let mut delays = Vec::new();
        let outcome = loop {
            now += Duration::from_millis(30); // exits soon after starting
            match backoff.exited(now) {
                AfterExit::RestartAt(at) => {
                    delays.push(at - now);
                    now = at;
                    backoff.restarted(now);
                }
                given_up => break given_up,
            }
        };
        assert_eq!(outcome, AfterExit::GiveUp(FAILED_STARTS_MAX));
        assert_eq!(delays.len() as u32, FAILED_STARTS_MAX - 1);
        assert_eq!(delays[0], FIRST_DELAY);
        assert!(delays.windows(2).all(|w| w[1] == (w[0] * 2).min(DELAY_MAX)));
        // Well within the 10 s, even with each start's own time.
        assert!(delays.iter().sum::<Duration>() < Duration::from_secs(5));
    }

    #[test]
    fn a_member_that_ran_a_while_starts_again_at_once_however_often_it_failed_before() {
        let mut now = Instant::now();
        let mut backoff = RestartBackoff::started(now);
        for _ in 0..FAILED_STARTS_MAX - 2 {
            now += Duration::from_millis(10);
            let AfterExit::RestartAt(at) = backoff.exited(now) else {
                panic!("given up too early");
            };
            now = at;
            backoff.restarted(now);
        }
        now += STABLE_RUN;
        assert_eq!(backoff.exited(now), AfterExit::RestartAt(now + FIRST_DELAY));
    }

    #[test]
    fn delays_double_up_to_the_cap() {
        assert_eq!(delay_after(1), FIRST_DELAY);
        assert_eq!(delay_after(2), FIRST_DELAY * 2);
        assert_eq!(delay_after(5), FIRST_DELAY * 16);
        assert_eq!(delay_after(6), DELAY_MAX);
        assert_eq!(delay_after(u32::MAX), DELAY_MAX);
    }
}

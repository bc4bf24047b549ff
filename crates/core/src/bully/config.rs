//! Bully settings: the winner rule and the four timeouts of Garcia-Molina's
//! algorithm, plus the takeover delay that keeps two leaders from overlapping.
//!
//! The defaults assume one tick = 1 ms and a network whose one-way latency is
//! at most 5 ms, so a request/response round trip takes at most about 10 ms.

use super::config_error::{check_below, check_detector_floor, check_timeout, ConfigError};
use super::winner::Winner;

/// Largest cluster a Bully node accepts. Broadcasts and per-call output are
/// bounded by it.
pub const MEMBERS_MAX: usize = 128;

/// Static configuration of a [`super::BullyNode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BullyConfig {
    /// Which end of the id order wins. Must be the same on every member.
    pub winner: Winner,
    /// How often a leader sends `Heartbeat` to every other member, so that
    /// followers can tell a live leader from a dead one.
    pub heartbeat_ticks: u64,
    /// Lower end of a follower's leader timeout; the actual timeout is drawn
    /// uniformly from `[min, 2 * min)` so that followers do not all start an
    /// election on the same tick. Must exceed `heartbeat_ticks`.
    pub leader_timeout_ticks_min: u64,
    /// How long a candidate waits for an `Answer` from a better node before it
    /// concludes that none is alive. Must exceed the network round trip, or a
    /// worse node could win while a better one is alive.
    pub answer_timeout_ticks: u64,
    /// How long a candidate that got an `Answer` waits for the better node's
    /// `Coordinator` before it starts over (the better node may have died).
    pub coordinator_timeout_ticks: u64,
    /// How long a winner waits between sending `Coordinator` to everyone and
    /// taking the Leader role. Not in the paper: it lets any old leader
    /// receive the `Coordinator` and step down first, so that even a takeover
    /// never has two leaders at one instant. Must exceed the one-way latency
    /// bound; 0 gives the paper's behaviour.
    pub takeover_delay_ticks: u64,
    /// The adaptive detector (`crate::adaptive_detector`): a follower
    /// starts an election once its leader's silence is past the learned
    /// arrival pattern, at least this many heartbeats, instead of waiting
    /// out the leader timeout. A wrong suspicion costs an election round
    /// the live leader wins again. 0 turns it off.
    pub detector_floor_heartbeats: u64,
}

impl Default for BullyConfig {
    fn default() -> Self {
        BullyConfig {
            winner: Winner::Highest,
            heartbeat_ticks: 50,
            leader_timeout_ticks_min: 150,
            answer_timeout_ticks: 15,
            coordinator_timeout_ticks: 60,
            takeover_delay_ticks: 10,
            detector_floor_heartbeats: 0,
        }
    }
}

impl BullyConfig {
    /// Checks that every timer can fire and that a healthy leader's heartbeats
    /// arrive before its followers give up on it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_timeout("heartbeat_ticks", self.heartbeat_ticks)?;
        check_timeout("leader_timeout_ticks_min", self.leader_timeout_ticks_min)?;
        check_timeout("answer_timeout_ticks", self.answer_timeout_ticks)?;
        check_timeout("coordinator_timeout_ticks", self.coordinator_timeout_ticks)?;
        check_below(
            "heartbeat_ticks",
            self.heartbeat_ticks,
            "leader_timeout_ticks_min",
            self.leader_timeout_ticks_min,
        )?;
        if self.takeover_delay_ticks > 0 {
            check_timeout("takeover_delay_ticks", self.takeover_delay_ticks)?;
        }
        check_detector_floor(
            self.detector_floor_heartbeats,
            self.heartbeat_ticks,
            self.leader_timeout_ticks_min,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        assert_eq!(BullyConfig::default().validate(), Ok(()));
    }

    #[test]
    fn zero_and_inverted_timeouts_are_rejected() {
        let zero = BullyConfig {
            answer_timeout_ticks: 0,
            ..BullyConfig::default()
        };
        assert_eq!(
            zero.validate(),
            Err(ConfigError::Zero {
                field: "answer_timeout_ticks"
            })
        );
        let slow_heartbeat = BullyConfig {
            heartbeat_ticks: 200,
            ..BullyConfig::default()
        };
        assert!(matches!(
            slow_heartbeat.validate(),
            Err(ConfigError::NotBelow {
                field: "heartbeat_ticks",
                ..
            })
        ));
    }
}

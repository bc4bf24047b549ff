//! Ring settings: the winner rule, the leader heartbeat, and the two timeouts
//! that make a ring survive dead members (the acknowledgement timeout that
//! skips a dead successor and the round timeout that restarts a lost
//! election).
//!
//! The defaults assume one tick = 1 ms and a network whose one-way latency is
//! at most 5 ms, so an acknowledgement returns within about 10 ms.

use crate::bully::{check_below, check_detector_floor, check_timeout, ConfigError, Winner};

/// Largest ring a node accepts. Id lists in messages, broadcasts and
/// per-call output are bounded by it.
pub const MEMBERS_MAX: usize = 128;

/// Most forwarded messages a node tracks while waiting for their `Ack`.
/// Beyond it a message is still sent, but not retransmitted; the round
/// timeout recovers if it is lost.
pub const PENDING_MAX: usize = 2 * MEMBERS_MAX;

/// Static configuration of a [`super::RingNode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Which end of the id order wins. Must be the same on every member.
    pub winner: Winner,
    /// How often the leader sends `Heartbeat` to every other member.
    pub heartbeat_ticks: u64,
    /// Lower end of a follower's leader timeout; the actual timeout is drawn
    /// uniformly from `[min, 2 * min)` so that followers do not all start an
    /// election on the same tick. Must exceed `heartbeat_ticks`.
    pub leader_timeout_ticks_min: u64,
    /// How long a node waits for its successor's `Ack` before it declares the
    /// successor dead and sends to the next one. Must exceed the round trip,
    /// or live nodes get skipped.
    pub ack_timeout_ticks: u64,
    /// How long an election, or the `Coordinator` round that ends it, may
    /// take before a node that took part starts a new one. Must leave room
    /// for a trip around the whole ring, with an `ack_timeout_ticks` for each
    /// dead member skipped.
    pub round_timeout_ticks: u64,
    /// The adaptive detector (`crate::adaptive_detector`): a follower
    /// starts an election once its leader's silence is past the learned
    /// arrival pattern, at least this many heartbeats, instead of waiting
    /// out the leader timeout. As with the hint, the election still passes
    /// through the leader, which ends it if alive. 0 turns it off.
    pub detector_floor_heartbeats: u64,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            winner: Winner::Highest,
            heartbeat_ticks: 50,
            leader_timeout_ticks_min: 150,
            ack_timeout_ticks: 15,
            round_timeout_ticks: 1000,
            detector_floor_heartbeats: 0,
        }
    }
}

impl RingConfig {
    /// Checks that every timer can fire, that a healthy leader's heartbeats
    /// arrive before its followers give up on it, and that a round outlasts
    /// an acknowledgement.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_timeout("heartbeat_ticks", self.heartbeat_ticks)?;
        check_timeout("leader_timeout_ticks_min", self.leader_timeout_ticks_min)?;
        check_timeout("ack_timeout_ticks", self.ack_timeout_ticks)?;
        check_timeout("round_timeout_ticks", self.round_timeout_ticks)?;
        check_below(
            "heartbeat_ticks",
            self.heartbeat_ticks,
            "leader_timeout_ticks_min",
            self.leader_timeout_ticks_min,
        )?;
        check_detector_floor(
            self.detector_floor_heartbeats,
            self.heartbeat_ticks,
            self.leader_timeout_ticks_min,
        )?;
        check_below(
            "ack_timeout_ticks",
            self.ack_timeout_ticks,
            "round_timeout_ticks",
            self.round_timeout_ticks,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        assert_eq!(RingConfig::default().validate(), Ok(()));
    }

    #[test]
    fn zero_and_inverted_timeouts_are_rejected() {
        let zero = RingConfig {
            round_timeout_ticks: 0,
            ..RingConfig::default()
        };
        assert_eq!(
            zero.validate(),
            Err(ConfigError::Zero {
                field: "round_timeout_ticks"
            })
        );
        let slow_ack = RingConfig {
            ack_timeout_ticks: 2000,
            ..RingConfig::default()
        };
        assert!(matches!(
            slow_ack.validate(),
            Err(ConfigError::NotBelow {
                field: "ack_timeout_ticks",
                ..
            })
        ));
    }
}

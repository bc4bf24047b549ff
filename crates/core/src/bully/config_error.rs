//! Why a Bully or Ring configuration was rejected, and the checks that find
//! out.
//!
//! Both algorithms are driven only by timeouts, so a bad timeout is not a
//! tuning problem but a liveness or safety bug: a zero timeout fires on every
//! tick, and a heartbeat slower than the leader timeout makes every follower
//! depose a healthy leader. `new` refuses such a configuration loudly.

use std::fmt;

/// Upper bound on every timeout, in ticks (about 50 days at 1 ms per tick).
/// Bounding it keeps `2 * leader_timeout_ticks_min` and deadline arithmetic
/// far from overflow.
pub const TIMEOUT_TICKS_MAX: u64 = 1 << 32;

/// A configuration that cannot work, naming the field to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// A timeout was zero. Every timer must wait at least one tick.
    Zero {
        /// The offending field.
        field: &'static str,
    },
    /// A timeout exceeded [`TIMEOUT_TICKS_MAX`].
    TooLarge {
        /// The offending field.
        field: &'static str,
        /// Its value, in ticks.
        value_ticks: u64,
    },
    /// `field` must be strictly smaller than `bound_field`.
    NotBelow {
        /// The field that is too large.
        field: &'static str,
        /// Its value, in ticks.
        value_ticks: u64,
        /// The field it must stay below.
        bound_field: &'static str,
        /// That field's value, in ticks.
        bound_ticks: u64,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Zero { field } => {
                write!(f, "{field} is 0; set it to at least 1 tick")
            }
            ConfigError::TooLarge { field, value_ticks } => write!(
                f,
                "{field} is {value_ticks} ticks; the limit is {TIMEOUT_TICKS_MAX}"
            ),
            ConfigError::NotBelow {
                field,
                value_ticks,
                bound_field,
                bound_ticks,
            } => write!(
                f,
                "{field} ({value_ticks} ticks) must be below {bound_field} ({bound_ticks} ticks)"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Checks that a timeout is in `1..=TIMEOUT_TICKS_MAX`.
pub(crate) fn check_timeout(field: &'static str, value_ticks: u64) -> Result<(), ConfigError> {
    if value_ticks == 0 {
        return Err(ConfigError::Zero { field });
    }
    if value_ticks > TIMEOUT_TICKS_MAX {
        return Err(ConfigError::TooLarge { field, value_ticks });
    }
    Ok(())
}

/// Checks that `value_ticks` is strictly below `bound_ticks`.
pub(crate) fn check_below(
    field: &'static str,
    value_ticks: u64,
    bound_field: &'static str,
    bound_ticks: u64,
) -> Result<(), ConfigError> {
    if value_ticks >= bound_ticks {
        return Err(ConfigError::NotBelow {
            field,
            value_ticks,
            bound_field,
            bound_ticks,
        });
    }
    Ok(())
}

/// Checks that the adaptive detector's floor, `floor_heartbeats`
/// heartbeats of `heartbeat_ticks`, does not exceed the leader timeout
/// (0: the detector is off).
pub(crate) fn check_detector_floor(
    floor_heartbeats: u64,
    heartbeat_ticks: u64,
    leader_timeout_ticks_min: u64,
) -> Result<(), ConfigError> {
    if floor_heartbeats == 0 {
        return Ok(());
    }
    check_below(
        "detector floor (detector_floor_heartbeats × heartbeat_ticks)",
        floor_heartbeats.saturating_mul(heartbeat_ticks),
        "leader_timeout_ticks_min",
        leader_timeout_ticks_min + 1,
    )
}

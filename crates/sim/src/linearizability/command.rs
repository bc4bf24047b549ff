//! What a client asked the key-value store to do, and what it was told.
//!
//! Keys and values are `u64` rather than strings: the checker hashes and
//! compares model states millions of times in a bad case, and a `u64` is
//! `Copy`, hashes in one step and never allocates. Simulated clients are free
//! to map their own names onto numbers.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A key of the store. Operations on different keys never interact, which is
/// what lets the checker split a history per key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Key(pub u64);

/// A value stored under a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Value(pub u64);

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "k{}", self.0)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The request a client sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    /// Unconditionally store `value` under `key`.
    Put {
        /// The key written.
        key: Key,
        /// The value written.
        value: Value,
    },
    /// Read the value under `key`.
    Get {
        /// The key read.
        key: Key,
    },
    /// Store `new` under `key` only if the current value is `expected`.
    CompareAndSet {
        /// The key compared and maybe written.
        key: Key,
        /// The value the key must hold; `None` means "the key is absent".
        expected: Option<Value>,
        /// The value written when the comparison holds.
        new: Value,
    },
    /// Grant a lease whose id is `value` and store `value` under `key`
    /// attached to it (etcd: LeaseGrant, then a put with the lease).
    LeasedPut {
        /// The key written.
        key: Key,
        /// The value written, which is also its lease's id.
        value: Value,
    },
    /// Revoke the lease whose id is `lease`: a key attached to it goes.
    /// The workload's leases each carry one key, the one their
    /// [`Command::LeasedPut`] wrote, so the revoke touches only `key`.
    /// `lease` must be a value only a leased put of `key` writes (the
    /// model takes "the key holds `lease`" for "the key is attached to
    /// it").
    Revoke {
        /// The key the lease was granted for.
        key: Key,
        /// The lease, named by the value its put wrote.
        lease: Value,
    },
}

impl Command {
    /// The key the command touches (every command touches exactly one).
    pub fn key(&self) -> Key {
        match *self {
            Command::Put { key, .. }
            | Command::Get { key }
            | Command::CompareAndSet { key, .. }
            | Command::LeasedPut { key, .. }
            | Command::Revoke { key, .. } => key,
        }
    }

    /// True if `response` is the kind of answer this command can get: a Put
    /// is answered by `Response::Put`, and so on.
    pub fn accepts(&self, response: &Response) -> bool {
        matches!(
            (self, response),
            (
                Command::Put { .. } | Command::LeasedPut { .. },
                Response::Put
            ) | (Command::Get { .. }, Response::Get(_))
                | (Command::CompareAndSet { .. }, Response::CompareAndSet(_))
                | (Command::Revoke { .. }, Response::Revoked)
        )
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Put { key, value } => write!(f, "put({key}, {value})"),
            Command::Get { key } => write!(f, "get({key})"),
            Command::CompareAndSet { key, expected, new } => {
                write!(f, "cas({key}, {}, {new})", DisplayValue(expected))
            }
            Command::LeasedPut { key, value } => write!(f, "leased_put({key}, {value})"),
            Command::Revoke { key, lease } => write!(f, "revoke({key}, lease {lease})"),
        }
    }
}

/// The answer a client received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", content = "result", rename_all = "snake_case")]
pub enum Response {
    /// The put was applied.
    Put,
    /// The value read; `None` means the key was absent.
    Get(Option<Value>),
    /// Whether the compare-and-set found `expected` and wrote `new`.
    CompareAndSet(bool),
    /// The revoke was applied (whether the lease was still there is not
    /// told: a lease outlives the key a later put detached from it).
    Revoked,
}

impl fmt::Display for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Response::Put => write!(f, "ok"),
            Response::Get(value) => write!(f, "{}", DisplayValue(value)),
            Response::CompareAndSet(succeeded) => write!(f, "{succeeded}"),
            Response::Revoked => write!(f, "revoked"),
        }
    }
}

/// Shows an optional value as the value or `absent`.
pub(super) struct DisplayValue<'a>(pub(super) &'a Option<Value>);

impl fmt::Display for DisplayValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(value) => write!(f, "{value}"),
            None => write!(f, "absent"),
        }
    }
}

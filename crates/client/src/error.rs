//! The errors of the client crate: one enum, so that callers can tell a
//! lost session from a refused write from an unreachable cluster.

use std::time::Duration;

/// What can go wrong in a client call.
///
/// ```
/// use bellwether_client::{Client, Error};
/// assert!(matches!(Client::connect(Vec::<String>::new()), Err(Error::NoEndpoints)));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No endpoint was given.
    #[error("no endpoints given: pass at least one host:port of a member")]
    NoEndpoints,
    /// An endpoint could not be parsed as a URL.
    #[error("bad endpoint {endpoint:?}: {reason}")]
    BadEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// Why it was refused.
        reason: String,
    },
    /// Every endpoint failed as unavailable until the retry deadline.
    #[error("no member answered within {waited:?} (tried {endpoints}): {last}")]
    Unavailable {
        /// The endpoints tried, comma-separated.
        endpoints: String,
        /// How long the call was retried.
        waited: Duration,
        /// The last failure seen.
        last: String,
    },
    /// The server refused the call (shown by its message alone: tonic's
    /// own form repeats the code and lists empty details and metadata).
    #[error("the server refused the call: {}", .0.message())]
    Status(#[from] tonic::Status),
    /// A name or value breaks a limit.
    #[error("{0}")]
    InvalidArgument(String),
    /// The session's lease is gone, or its local deadline passed.
    #[error("the session is lost: its lease expired or was revoked")]
    SessionLost,
    /// The caller no longer holds the leadership or lock it acted on.
    #[error("not the leader any more: the leader key is gone or was replaced")]
    NotLeader,
    /// `try_lock` found the lock held.
    #[error("the lock is held by another session")]
    Locked,
    /// A long-lived watch ended; read again and watch again.
    #[error("the watch ended: {0}")]
    WatchEnded(&'static str),
    /// No task, group or queue of that name.
    #[error("{0}")]
    NotFound(String),
    /// The server's answer lacked something etcd always sends.
    #[error("malformed answer from the server: {0}")]
    Malformed(&'static str),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl From<bellwether_task_layout::LayoutError> for Error {
    fn from(error: bellwether_task_layout::LayoutError) -> Self {
        match error {
            bellwether_task_layout::LayoutError::InvalidArgument(why) => {
                Error::InvalidArgument(why)
            }
            bellwether_task_layout::LayoutError::Malformed(what) => Error::Malformed(what),
        }
    }
}

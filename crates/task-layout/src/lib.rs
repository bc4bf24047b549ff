//! How a task queue (`bellwether_client::tasks`, the Leader-Followers
//! pattern) lives in the keyspace: the keys ([`layout`]), the records of
//! tasks and workers ([`record`]), and one look at a queue counted from its
//! keys ([`status`]). No IO: the client reads and writes these keys over
//! the etcd API, and a member reads them from its own store for its
//! dashboard and `/metrics`, so both count a queue the same way without
//! the member depending on the application client.

pub mod layout;
pub mod record;
pub mod status;

pub use layout::{
    check_data, check_id, check_task_id, leader_prefix, state_prefix, Layout, StateKey,
    DATA_BYTES_MAX, ID_BYTES_MAX, QUEUE_REGISTRY_PREFIX, RESERVED_ID_START,
};
pub use status::{QueueStatus, WorkerLoad, DEAD_LETTERS_LISTED_MAX};

/// A queue name, task id or record that breaks the layout's rules.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// A name, id or payload the layout does not allow.
    #[error("{0}")]
    InvalidArgument(String),
    /// A stored record that does not decode.
    #[error("malformed record: {0}")]
    Malformed(&'static str),
}

/// A layout result.
pub type Result<T> = std::result::Result<T, LayoutError>;

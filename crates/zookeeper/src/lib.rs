//! ZooKeeper's semantics without IO, beside the etcd layer
//! (`bellwether-etcd`), which applies its entries from the same log.
//!
//! - [`jute`], [`request`], [`connect`], [`stat`]: the wire records.
//! - [`znode`]: how the tree is kept in the kv store, so that it shares
//!   the etcd keyspace's log, revisions and snapshots.
//! - [`tree`]: the writes (and sessions' begin and end) as the log applies
//!   them; [`read`]: the reads a member answers from its store.
//! - [`watches`]: one session's watches and the changes that fire them.
//!
//! No sockets, no clock, no runtime: the server and the simulator run this
//! same code.

pub mod acl;
pub mod batch;
pub mod codes;
pub mod config;
pub mod connect;
pub mod entry;
pub mod jute;
pub mod overview;
pub mod read;
pub mod request;
pub mod stat;
pub mod tree;
pub mod watches;
pub mod znode;

pub use batch::{ZkBatch, ZkBatchAnswer};
pub use codes::ErrorCode;
pub use entry::{SessionRecord, ZkEntry};
pub use request::Request;
pub use tree::{apply, end_session, Applied, LeaseChange};

//! bellwether's key-value state machine: the deterministic store behind the
//! etcd v3 compatible API.
//!
//! Raft (Ongaro and Ousterhout, §5.3, §7) replicates a log of commands; this
//! crate is what those commands are applied to. It does no IO and reads no
//! clock, so every replica that applies the same commands in the same order
//! holds the same state, byte for byte ([`KvStore::snapshot`]).
//!
//! The data model is etcd v3's, because the server speaks etcd's wire
//! protocol and clients rely on its rules:
//!
//! - a global revision, advanced once by every write that changes something;
//! - per key: create revision, mod revision, version and lease;
//! - range reads at any retained revision, with etcd's `range_end`
//!   conventions ([`KeyRange`]), limits, sorting and revision filters;
//! - txns guarded by compares on version, create, mod, value or lease;
//! - leases whose revoke deletes their keys in one revision;
//! - watch events from a bounded log, and compaction.
//!
//! # Example
//!
//! ```
//! use bellwether_kv::{KvStore, PutRequest, RangeRequest, KeyRange};
//!
//! let mut store = KvStore::new();
//! let put = store.put(&PutRequest::new("leader", "node-1"))?;
//! assert_eq!(put.revision, 2); // the store starts at 1, like etcd
//! let prefix = KeyRange::prefix("lead");
//! let read = store.range(&RangeRequest::new(prefix.key, prefix.range_end))?;
//! assert_eq!(read.kvs[0].create_revision, 2);
//! # Ok::<(), bellwether_kv::KvError>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod alarm;
mod auth;
mod codec;
mod compare;
mod delete_range;
mod error;
mod event;
mod event_log;
mod id_map;
mod key_history;
mod key_range;
mod key_value;
mod lease;
mod limits;
mod member;
mod put;
mod range;
mod store;
mod txn;
mod txn_check;

pub use alarm::{Alarm, AlarmKind};
pub use auth::{
    AuthError, AuthImage, AuthState, KeyPermission, Permission, User, AUTH_NAME_BYTES_MAX,
    AUTH_ROLES_MAX, AUTH_USERS_MAX, ROLE_PERMISSIONS_MAX, ROOT_ROLE, ROOT_USER, USER_ROLES_MAX,
};
pub use compare::{Compare, CompareResult, CompareTarget};
pub use delete_range::{DeleteRangeRequest, DeleteRangeResponse};
pub use error::KvError;
pub use event::{Event, EventKind};
pub use id_map::{IdMap, PAGE_ENTRIES_MAX};
pub use key_range::KeyRange;
pub use key_value::KeyValue;
pub use lease::Lease;
pub use limits::{
    EVENT_LOG_EVENTS_MAX, LEASES_MAX, LEASE_TTL_SECONDS_MAX, LEASE_TTL_SECONDS_MIN,
    REQUEST_BYTES_MAX, TXN_DEPTH_MAX, TXN_OPS_MAX,
};
pub use member::{MemberError, MemberIntent, MemberRecord, MEMBER_RECORDS_MAX};
pub use put::{PutRequest, PutResponse};
pub use range::{RangeRequest, RangeResponse, SortOrder, SortTarget};
pub use store::{
    ImageWrite, KvStore, PendingImage, PendingSnapshot, RetainedWrite, StoreImage,
    REVISION_INITIAL, REVISION_OVERHEAD_BYTES, SNAPSHOT_VERSION, STREAM_CHUNK_BYTES,
};
pub use txn::{RequestOp, ResponseOp, TxnRequest, TxnResponse};

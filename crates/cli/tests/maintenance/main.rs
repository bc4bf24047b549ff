//! etcd's maintenance calls against real member processes, one test
//! binary (each binary links the whole member): alarms and the storage
//! quota, Hash and HashKV, snapshots and restore, and the leader's
//! consistency check, each beside a real etcd 3.4 where the behaviour can
//! be compared.

#[path = "../common/mod.rs"]
mod common;

mod alarm;
mod corruption_check;
mod hash;
mod snapshot;

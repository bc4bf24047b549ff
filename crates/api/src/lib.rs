//! bellwether's client API in etcd v3's wire format.
//!
//! The `.proto` files under `proto/` were written by the bellwether authors.
//! They exist so that unmodified etcd clients (`etcdctl` 3.4, the
//! `etcd-client` crate) can talk to bellwether: the package, service, method
//! and message names and every field number and type follow etcd v3.4,
//! because those are facts of etcd's wire format rather than anything we are
//! free to choose. Comments, field names and the subset declared are our own.
//!
//! `build.rs` compiles the files with `protox`, a pure-Rust protobuf compiler,
//! so building never needs `protoc`. The same generated code gives the server
//! its service traits (`*_server`) and gives tests and tools their clients
//! (`*_client`).
//!
//! gRPC method paths come from the package and service names, for example
//! `/etcdserverpb.KV/Range` and `/v3lockpb.Lock/Lock`.

/// Stored key-value records and watch events (etcd's `mvccpb`).
#[allow(missing_docs, clippy::all)]
pub mod mvccpb {
    include!(concat!(env!("OUT_DIR"), "/mvccpb.rs"));
}

/// Auth records: permissions and user options (etcd's `authpb`).
#[allow(missing_docs, clippy::all)]
pub mod authpb {
    include!(concat!(env!("OUT_DIR"), "/authpb.rs"));
}

/// Leases as etcd's backend stores them (etcd's `leasepb`).
#[allow(missing_docs, clippy::all)]
pub mod leasepb {
    include!(concat!(env!("OUT_DIR"), "/leasepb.rs"));
}

/// KV, Watch, Lease, Cluster, Maintenance and Auth services (etcd's
/// `etcdserverpb`).
#[allow(missing_docs, clippy::all)]
pub mod etcdserverpb {
    include!(concat!(env!("OUT_DIR"), "/etcdserverpb.rs"));
}

/// The Election service (etcd's `v3electionpb`).
#[allow(missing_docs, clippy::all)]
pub mod v3electionpb {
    include!(concat!(env!("OUT_DIR"), "/v3electionpb.rs"));
}

/// The Lock service (etcd's `v3lockpb`).
#[allow(missing_docs, clippy::all)]
pub mod v3lockpb {
    include!(concat!(env!("OUT_DIR"), "/v3lockpb.rs"));
}

/// The encoded `FileDescriptorSet` of every `.proto` file above: message,
/// field and method names at run time (the JSON gateway uses them).
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));

//! The workload's operations as the etcd commands a client of the server
//! sends (`bellwether_etcd::Command`), and the production state machine's
//! answers read back into the history's responses.
//!
//! A put is `KV/Put`, a compare-and-set a `KV/Txn` comparing the value (or
//! that the key was never created), a revoke `Lease/LeaseRevoke`. A leased
//! put is what an etcd client does: `Lease/LeaseGrant`, then a put under
//! the lease once the grant is answered. Clients' writes go in as the
//! server logs them (checked, for no user while auth is off); a lease
//! clock's expiry revokes as the member's own.
//!
//! Every write's entry has a tag, a hash of its bytes, which the simulated
//! member adds to the answer ([`TaggedMachine`](super::tagged_machine)):
//! a client answered from another operation's entry is caught at once.

use super::zk_entries::{self, ZkWrite};
use crate::linearizability::{Command, Key, Response, Value};
use bellwether_api::etcdserverpb as pb;
use bellwether_etcd::{read_answer, Checked, Code, Command as EtcdCommand, Refusal};
use bellwether_kv::KvStore;
use std::sync::{Arc, Mutex};

/// The store, shared between the member's state machine and the workload,
/// which reads it once a read barrier is answered.
pub type SharedStore = Arc<Mutex<KvStore>>;

/// The TTL of the workload's leases: the shortest the store grants, so
/// that leases left without keep-alives expire within a run.
pub const LEASE_TTL_SECONDS: i64 = bellwether_kv::LEASE_TTL_SECONDS_MIN;

/// Which request an answer is for, to read it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// `KV/Put` (a plain put, or a leased put's second step).
    Put,
    /// `KV/Txn`.
    CompareAndSet,
    /// A leased put's first step: the grant of its lease.
    Grant,
    /// `Lease/LeaseRevoke`.
    Revoke,
    /// A ZooKeeper step, on an odd key (see `zk_entries.rs`).
    Zk(ZkWrite),
    /// A ZooKeeper step logged as the last write of a batch.
    ZkBatched(ZkWrite),
}

/// A write's answer, as the workload reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The operation took effect with this response.
    Done(Response),
    /// A leased put's lease exists: its put may go.
    Granted,
    /// The state machine refused it: nothing changed.
    Refused(Refusal),
}

/// The bytes of `key` in the store: an etcd key, or an odd key's znode.
pub fn key_bytes(key: Key) -> Vec<u8> {
    if zk_entries::is_znode(key) {
        return bellwether_zookeeper::znode::node_key(&zk_entries::path(key));
    }
    format!("k{}", key.0).into_bytes()
}

/// The key whose bytes are `bytes` (see [`key_bytes`]); `None` for a
/// store key that is no workload key (a ZooKeeper session's record).
pub fn key_of(bytes: &[u8]) -> Option<Key> {
    if let Some(path) = bellwether_zookeeper::znode::path_of(bytes) {
        return zk_entries::key_of_path(&path);
    }
    let digits = bytes.strip_prefix(b"k")?;
    let text = std::str::from_utf8(digits).expect("digits");
    Some(Key(text.parse().expect("a key number")))
}

/// The store's id of the lease a leased put of `value` grants: the value
/// itself, which is unique and positive.
pub fn lease_id(value: Value) -> i64 {
    let id = i64::try_from(value.0).expect("workload values fit a lease id");
    assert!(id > 0, "lease id 0 means no lease");
    id
}

/// The value of `key` in `store`, as the workload's model sees it.
pub fn read(store: &SharedStore, key: Key) -> Option<Value> {
    let store = store.lock().expect("the simulation runs on one thread");
    if zk_entries::is_znode(key) {
        return zk_entries::read(&store, key);
    }
    let kv = store.get(&key_bytes(key))?;
    let bytes: [u8; 8] = kv.value.as_slice().try_into().expect("values are 8 bytes");
    Some(Value(u64::from_le_bytes(bytes)))
}

fn put(key: Key, value: Value, lease: i64) -> EtcdCommand {
    EtcdCommand::Put(pb::PutRequest {
        key: key_bytes(key),
        value: value.0.to_le_bytes().to_vec(),
        lease,
        ..Default::default()
    })
}

fn compare_and_set(key: Key, expected: Option<Value>, new: Value) -> EtcdCommand {
    use pb::compare::{CompareResult, CompareTarget, TargetUnion};
    let (target, union) = match expected {
        Some(value) => (
            CompareTarget::Value,
            TargetUnion::Value(value.0.to_le_bytes().to_vec()),
        ),
        None => (CompareTarget::Create, TargetUnion::CreateRevision(0)),
    };
    let compare = pb::Compare {
        result: CompareResult::Equal as i32,
        target: target as i32,
        key: key_bytes(key),
        target_union: Some(union),
        ..Default::default()
    };
    let EtcdCommand::Put(put) = put(key, new, 0) else {
        unreachable!("put builds a put")
    };
    EtcdCommand::Txn(pb::TxnRequest {
        compare: vec![compare],
        success: vec![pb::RequestOp {
            request: Some(pb::request_op::Request::RequestPut(put)),
        }],
        failure: Vec::new(),
    })
}

/// The log entry of a client's write `command` (for a leased put: its
/// first step, the grant), and which request it is.
pub fn client_entry(command: Command) -> (Vec<u8>, Write) {
    let (command, write) = match command {
        Command::Put { key, value } => (put(key, value, 0), Write::Put),
        Command::CompareAndSet { key, expected, new } => {
            (compare_and_set(key, expected, new), Write::CompareAndSet)
        }
        Command::LeasedPut { value, .. } => {
            let grant = pb::LeaseGrantRequest {
                ttl: LEASE_TTL_SECONDS,
                id: lease_id(value),
            };
            (EtcdCommand::LeaseGrant(grant), Write::Grant)
        }
        Command::Revoke { lease, .. } => (revoke(lease_id(lease)), Write::Revoke),
        Command::Get { .. } => panic!("reads are never logged"),
    };
    (checked(&command), write)
}

/// The entry of a leased put's second step, once its lease is granted.
pub fn leased_put_entry(key: Key, value: Value) -> Vec<u8> {
    checked(&put(key, value, lease_id(value)))
}

/// The entry of a lease clock's expiry revoke of lease `id`.
pub fn expiry_entry(id: i64) -> Vec<u8> {
    revoke(id).encode()
}

fn revoke(id: i64) -> EtcdCommand {
    EtcdCommand::LeaseRevoke(pb::LeaseRevokeRequest { id })
}

/// A client's entry, as the server logs it while auth is off.
fn checked(command: &EtcdCommand) -> Vec<u8> {
    command.encode_checked(&Checked {
        auth_revision: 0,
        user: String::new(),
    })
}

/// The tag of an entry: FNV-1a over its bytes.
pub fn entry_tag(entry: &[u8]) -> u64 {
    entry.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Reads the state machine's `answer` to a `write`.
pub fn outcome(write: Write, answer: &[u8]) -> Outcome {
    let refused = Outcome::Refused;
    match write {
        Write::Zk(zk) => zk_entries::outcome(zk, answer),
        Write::ZkBatched(zk) => zk_entries::batch_outcome(zk, answer),
        Write::Put => match read_answer::<pb::PutResponse>(answer) {
            Ok(_) => Outcome::Done(Response::Put),
            Err(refusal) => refused(refusal),
        },
        Write::CompareAndSet => match read_answer::<pb::TxnResponse>(answer) {
            Ok(txn) => Outcome::Done(Response::CompareAndSet(txn.succeeded)),
            Err(refusal) => refused(refusal),
        },
        // A lease that exists already (this grant applied twice, or an
        // earlier attempt's) is as good for the put that follows.
        Write::Grant => match read_answer::<pb::LeaseGrantResponse>(answer) {
            Ok(_) => Outcome::Granted,
            Err(refusal) if refusal.code == Code::FailedPrecondition => Outcome::Granted,
            Err(refusal) => refused(refusal),
        },
        // Not found: revoked before, or never granted (its put was never
        // applied). Either way nothing is attached to it.
        Write::Revoke => match read_answer::<pb::LeaseRevokeResponse>(answer) {
            Ok(_) => Outcome::Done(Response::Revoked),
            Err(refusal) if refusal.code == Code::NotFound => Outcome::Done(Response::Revoked),
            Err(refusal) => refused(refusal),
        },
    }
}

//! The etcd state machine of the `kv` crate behind a simulated member: the
//! workload's puts and compare-and-sets become the store's puts and txns,
//! a leased put a lease grant and a put under the lease, a revoke the
//! store's lease revoke; its reads read the store.

use crate::kv::codec::{decode, LoggedWrite};
use crate::linearizability::{Command, Key, Response, Value};
use bellwether_core::LogIndex;
use bellwether_kv::{
    Compare, CompareResult, CompareTarget, KvStore, PutRequest, RequestOp, TxnRequest,
};
use bellwether_member::StateMachine;
use std::sync::{Arc, Mutex};

/// The store, shared between the member's state machine and the workload,
/// which reads it once a read barrier is answered.
pub type SharedStore = Arc<Mutex<KvStore>>;

/// The bytes of `key` in the store.
pub fn key_bytes(key: Key) -> Vec<u8> {
    format!("k{}", key.0).into_bytes()
}

/// The key whose bytes are `bytes` (see [`key_bytes`]).
pub fn key_of(bytes: &[u8]) -> Key {
    let digits = bytes.strip_prefix(b"k").expect("the workload's keys");
    let text = std::str::from_utf8(digits).expect("digits");
    Key(text.parse().expect("a key number"))
}

/// The TTL of the workload's leases: the shortest the store grants, so
/// that leases left without keep-alives expire within a run.
pub const LEASE_TTL_SECONDS: i64 = bellwether_kv::LEASE_TTL_SECONDS_MIN;

/// Client ids from here up name lease clocks, whose expiry revokes are
/// operations too (one client id per member incarnation).
pub const LESSOR_CLIENT_BASE: u64 = 1 << 20;

/// Whether operation `op_id` is an expiry revoke of a lease clock.
pub fn is_expiry(op_id: u64) -> bool {
    op_id >> 32 >= LESSOR_CLIENT_BASE
}

/// What the store applied that its member's lease clock must hear of, in
/// order (the server's state machine tells its lessor the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseEvent {
    /// A lease was granted with this TTL.
    Granted(i64, i64),
    /// A client's revoke removed a lease.
    Revoked(i64),
    /// A lease clock's expiry revoke removed a lease.
    Expired(i64),
    /// The store was replaced by a snapshot.
    Restored,
}

/// Lease events, shared between the state machine and its member.
pub type LeaseEvents = Arc<Mutex<Vec<LeaseEvent>>>;

/// The store's id of the lease a leased put of `value` grants: the value
/// itself, which is unique and positive.
fn lease_id(value: Value) -> i64 {
    let id = i64::try_from(value.0).expect("workload values fit a lease id");
    assert!(id > 0, "lease id 0 means no lease");
    id
}

/// The value of `key` in `store`, as the workload's model sees it.
pub fn read(store: &SharedStore, key: Key) -> Option<Value> {
    let store = store.lock().expect("the simulation runs on one thread");
    let kv = store.get(&key_bytes(key))?;
    let bytes: [u8; 8] = kv.value.as_slice().try_into().expect("values are 8 bytes");
    Some(Value(u64::from_le_bytes(bytes)))
}

/// A write's answer: the id of the operation whose entry was applied, and
/// what the client sees.
pub fn encode_answer(op_id: u64, response: Response) -> Vec<u8> {
    let tag = match response {
        Response::Put => 1u8,
        Response::CompareAndSet(false) => 2,
        Response::CompareAndSet(true) => 3,
        Response::Revoked => 4,
        Response::Get(_) => panic!("reads are never applied"),
    };
    let mut out = op_id.to_le_bytes().to_vec();
    out.push(tag);
    out
}

/// The operation id and response [`encode_answer`] wrote.
pub fn decode_answer(bytes: &[u8]) -> Option<(u64, Response)> {
    let (id, tag) = bytes.split_at_checked(8)?;
    let response = match tag {
        [1] => Response::Put,
        [2] => Response::CompareAndSet(false),
        [3] => Response::CompareAndSet(true),
        [4] => Response::Revoked,
        _ => return None,
    };
    Some((u64::from_le_bytes(id.try_into().ok()?), response))
}

/// A member's state machine: the `kv` crate's store.
pub struct StoreMachine {
    /// The store, also read by the workload.
    pub store: SharedStore,
    /// Where it tells its member's lease clock what it applied.
    pub lease_events: LeaseEvents,
}

impl StoreMachine {
    fn note(&self, event: LeaseEvent) {
        self.lease_events.lock().expect("one thread").push(event);
    }
}

impl StateMachine for StoreMachine {
    fn apply(&mut self, _index: LogIndex, command: &[u8]) -> Vec<u8> {
        let Some(LoggedWrite { op_id, command }) = decode(command) else {
            return Vec::new();
        };
        let mut store = self.store.lock().expect("one thread");
        let response = match command {
            Command::Put { key, value } => {
                let put = PutRequest::new(key_bytes(key), value.0.to_le_bytes().to_vec());
                store.put(&put).expect("a small put applies");
                Response::Put
            }
            Command::CompareAndSet { key, expected, new } => {
                let guard = match expected {
                    Some(value) => Compare::new(
                        key_bytes(key),
                        CompareResult::Equal,
                        CompareTarget::Value(value.0.to_le_bytes().to_vec()),
                    ),
                    None => Compare::new(
                        key_bytes(key),
                        CompareResult::Equal,
                        CompareTarget::Create(0),
                    ),
                };
                let put = PutRequest::new(key_bytes(key), new.0.to_le_bytes().to_vec());
                let txn = TxnRequest {
                    compare: vec![guard],
                    success: vec![RequestOp::Put(put)],
                    failure: Vec::new(),
                };
                let answer = store.txn(&txn).expect("a small txn applies");
                Response::CompareAndSet(answer.succeeded)
            }
            Command::LeasedPut { key, value } => {
                let lease = lease_id(value);
                // Exists only if this entry is applied a second time: the
                // put then goes under it again and the history shows the
                // value back, as for a plain put applied twice.
                if store.lease_grant(lease, LEASE_TTL_SECONDS).is_ok() {
                    self.note(LeaseEvent::Granted(lease, LEASE_TTL_SECONDS));
                }
                let mut put = PutRequest::new(key_bytes(key), value.0.to_le_bytes().to_vec());
                put.lease = lease;
                store
                    .put(&put)
                    .expect("a small put under a live lease applies");
                Response::Put
            }
            Command::Revoke { lease, .. } => {
                // Not found: revoked before, or never granted (its put was
                // never applied). Either way nothing is attached to it.
                let id = lease_id(lease);
                if store.lease_revoke(id).is_ok() {
                    match is_expiry(op_id) {
                        true => self.note(LeaseEvent::Expired(id)),
                        false => self.note(LeaseEvent::Revoked(id)),
                    }
                }
                Response::Revoked
            }
            Command::Get { .. } => panic!("reads are never logged"),
        };
        encode_answer(op_id, response)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.store.lock().expect("one thread").snapshot()
    }

    fn restore(&mut self, _applied: LogIndex, data: &[u8]) {
        let restored = KvStore::restore(data).expect("a snapshot this store wrote");
        *self.store.lock().expect("one thread") = restored;
        self.note(LeaseEvent::Restored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::codec::encode;

    #[test]
    fn writes_apply_to_the_store_and_answers_name_their_operation() {
        let store = SharedStore::default();
        let mut machine = StoreMachine {
            store: store.clone(),
            lease_events: LeaseEvents::default(),
        };
        let (key, one, two) = (Key(3), Value(1), Value(2));
        let cas = |expected, new| LoggedWrite {
            op_id: 9,
            command: Command::CompareAndSet { key, expected, new },
        };
        let answer = machine.apply(LogIndex(1), &encode(&cas(None, one)));
        assert_eq!(
            decode_answer(&answer),
            Some((9, Response::CompareAndSet(true)))
        );
        let answer = machine.apply(LogIndex(2), &encode(&cas(None, two)));
        assert_eq!(
            decode_answer(&answer),
            Some((9, Response::CompareAndSet(false)))
        );
        assert_eq!(read(&store, key), Some(one));
        let put = LoggedWrite {
            op_id: 10,
            command: Command::Put { key, value: two },
        };
        let answer = machine.apply(LogIndex(3), &encode(&put));
        assert_eq!(decode_answer(&answer), Some((10, Response::Put)));
        assert_eq!(read(&store, key), Some(two));
        let mut copy = StoreMachine {
            store: SharedStore::default(),
            lease_events: LeaseEvents::default(),
        };
        copy.restore(LogIndex(3), &machine.snapshot());
        assert_eq!(read(&copy.store, key), Some(two));
    }

    #[test]
    fn a_revoke_removes_its_key_only_while_the_key_is_attached_to_it() {
        let store = SharedStore::default();
        let mut machine = StoreMachine {
            store: store.clone(),
            lease_events: LeaseEvents::default(),
        };
        let key = Key(1);
        let apply = |machine: &mut StoreMachine, index: u64, command| {
            let write = LoggedWrite { op_id: 1, command };
            decode_answer(&machine.apply(LogIndex(index), &encode(&write)))
        };
        let leased = |n: u64| Value(1 << 62 | n);
        let revoke = |n: u64| Command::Revoke {
            key,
            lease: leased(n),
        };
        let (w1, w2) = (Value(1), Value(2));
        apply(
            &mut machine,
            1,
            Command::LeasedPut {
                key,
                value: leased(1),
            },
        );
        apply(&mut machine, 2, Command::Put { key, value: w1 });
        assert_eq!(
            apply(&mut machine, 3, revoke(1)),
            Some((1, Response::Revoked))
        );
        assert_eq!(read(&store, key), Some(w1), "a plain put detached the key");
        apply(
            &mut machine,
            4,
            Command::LeasedPut {
                key,
                value: leased(2),
            },
        );
        apply(
            &mut machine,
            5,
            Command::LeasedPut {
                key,
                value: leased(3),
            },
        );
        apply(&mut machine, 6, revoke(2));
        assert_eq!(
            read(&store, key),
            Some(leased(3)),
            "moved to the later lease"
        );
        let mut copy = StoreMachine {
            store: SharedStore::default(),
            lease_events: LeaseEvents::default(),
        };
        copy.restore(LogIndex(6), &machine.snapshot());
        let cas = Command::CompareAndSet {
            key,
            expected: Some(leased(3)),
            new: w2,
        };
        apply(&mut machine, 7, cas);
        apply(&mut machine, 8, revoke(3));
        assert_eq!(read(&store, key), Some(w2), "a compare-and-set detached it");
        apply(&mut copy, 7, revoke(3));
        assert_eq!(
            read(&copy.store, key),
            None,
            "a restored store revokes alike"
        );
    }
}

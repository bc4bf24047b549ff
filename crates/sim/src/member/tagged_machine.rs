//! [`TaggedMachine`]: the production etcd state machine
//! ([`bellwether_etcd::EtcdMachine`]) behind a simulated member, with two
//! things only the simulation needs around it:
//!
//! - each answer starts with the tag of the entry it was applied from
//!   ([`entry_tag`]), so the workload can tell a client answered from
//!   another operation's entry (the member driver routes answers; the
//!   tag checks it does so rightly);
//! - what the machine tells its observer of leases goes into a queue the
//!   member's lease clock reads, as the server's lessor hears it, and the
//!   workload learns from it which expiry revokes removed a lease;
//! - a client's put or transaction that takes effect twice stops the
//!   member. Each operation writes a value of its own, so two entries with
//!   the same bytes are one operation proposed twice: its client was told
//!   the first had not applied ("not applied", "busy", "not the leader")
//!   and sent it again, and both reached the log.

use super::etcd_entries::{entry_tag, SharedStore};
use bellwether_core::raft::SnapshotData;
use bellwether_core::LogIndex;
use bellwether_etcd::{Command, EtcdMachine, LeaseApplied, Mutation, Observer};
use bellwether_kv::{KvStore, MemberRecord};
use bellwether_member::{DecodedSnapshot, RestoreJob, StateMachine};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Lease events, shared between the state machine and its member.
pub type LeaseEvents = Arc<Mutex<Vec<LeaseApplied>>>;

/// The observer that queues what the machine applied of the leases.
struct LeaseQueue(LeaseEvents);

impl Observer for LeaseQueue {
    fn published(&self, _store: &KvStore) {}

    fn lease(&self, applied: LeaseApplied) {
        self.0.lock().expect("one thread").push(applied);
    }
}

/// The production state machine, its answers tagged (see the module doc).
pub struct TaggedMachine {
    inner: EtcdMachine,
    /// Tags of the client puts and transactions that took effect here.
    writes_applied: HashSet<u64>,
}

impl TaggedMachine {
    /// An empty store whose lease changes go to `events`, broken on
    /// purpose if `mutation` says so.
    pub fn new(events: LeaseEvents, mutation: Option<Mutation>) -> Self {
        let inner = EtcdMachine::new(Box::new(LeaseQueue(events)));
        TaggedMachine {
            inner: match mutation {
                Some(mutation) => inner.mutated(mutation),
                None => inner,
            },
            writes_applied: HashSet::new(),
        }
    }

    /// The store, for the workload's reads.
    pub fn store(&self) -> SharedStore {
        self.inner.store.clone()
    }
}

/// Splits a tagged answer into the tag and the machine's own answer.
pub fn untag(answer: &[u8]) -> Option<(u64, &[u8])> {
    let (tag, rest) = answer.split_at_checked(8)?;
    Some((u64::from_le_bytes(tag.try_into().ok()?), rest))
}

impl StateMachine for TaggedMachine {
    fn apply(&mut self, index: LogIndex, command: &[u8]) -> Vec<u8> {
        let answer = self.inner.apply(index, command);
        let tag = entry_tag(command);
        let client_write = matches!(
            Command::decode_entry(command),
            Some((Some(_), Command::Put(_) | Command::Txn(_)))
        );
        if client_write && answer.first() == Some(&0) {
            assert!(
                self.writes_applied.insert(tag),
                "a client's write applied twice: entry {tag:#x}, again at index {}",
                index.0
            );
        }
        let mut tagged = tag.to_le_bytes().to_vec();
        tagged.extend_from_slice(&answer);
        tagged
    }

    fn snapshot(&self) -> Vec<u8> {
        self.inner.snapshot()
    }

    fn snapshot_later(&self) -> bellwether_member::SnapshotJob {
        self.inner.snapshot_later()
    }

    fn restore(&mut self, applied: LogIndex, data: &[u8]) {
        self.inner.restore(applied, data)
    }

    fn restore_later(&self, data: SnapshotData) -> RestoreJob {
        self.inner.restore_later(data)
    }

    fn restore_decoded(&mut self, applied: LogIndex, decoded: DecodedSnapshot) {
        self.inner.restore_decoded(applied, decoded)
    }

    fn directory_version(&self) -> u64 {
        self.inner.directory_version()
    }

    fn directory(&self) -> Vec<MemberRecord> {
        self.inner.directory()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linearizability::{Command, Key, Response, Value};
    use crate::member::etcd_entries::{
        client_entry, expiry_entry, leased_put_entry, outcome, read, Outcome, Write,
    };

    /// Applies entries one after another, as the member does.
    struct Applier {
        machine: TaggedMachine,
        index: u64,
    }

    impl Applier {
        fn new() -> Self {
            Applier {
                machine: TaggedMachine::new(LeaseEvents::default(), None),
                index: 0,
            }
        }

        fn entry(&mut self, entry: Vec<u8>, write: Write) -> Outcome {
            self.index += 1;
            let answer = self.machine.apply(LogIndex(self.index), &entry);
            let (tag, answer) = untag(&answer).expect("a tagged answer");
            assert_eq!(tag, entry_tag(&entry), "tagged with its own entry");
            outcome(write, answer)
        }

        fn client(&mut self, command: Command) -> Outcome {
            let (entry, write) = client_entry(command);
            self.entry(entry, write)
        }

        fn leased_put(&mut self, key: Key, value: Value) {
            let granted = self.client(Command::LeasedPut { key, value });
            assert_eq!(granted, Outcome::Granted);
            let put = self.entry(leased_put_entry(key, value), Write::Put);
            assert_eq!(put, Outcome::Done(Response::Put));
        }
    }

    #[test]
    fn the_workloads_writes_apply_as_etcd_requests_and_answers_name_their_entry() {
        let mut log = Applier::new();
        let (key, one, two) = (Key(2), Value(1), Value(2));
        let cas = |expected, new| Command::CompareAndSet { key, expected, new };
        let set = Outcome::Done(Response::CompareAndSet(true));
        let unset = Outcome::Done(Response::CompareAndSet(false));
        assert_eq!(log.client(cas(None, one)), set);
        assert_eq!(log.client(cas(None, two)), unset, "the key exists");
        assert_eq!(log.client(cas(Some(two), two)), unset, "value is one");
        assert_eq!(read(&log.machine.store(), key), Some(one));
        let put = log.client(Command::Put { key, value: two });
        assert_eq!(put, Outcome::Done(Response::Put));
        assert_eq!(log.client(cas(Some(two), one)), set);
        let mut copy = TaggedMachine::new(LeaseEvents::default(), None);
        copy.restore(LogIndex(log.index), &log.machine.snapshot());
        assert_eq!(read(&copy.store(), key), Some(one));
    }

    #[test]
    fn a_revoke_removes_its_key_only_while_the_key_is_attached_to_it() {
        let mut log = Applier::new();
        let key = Key(4);
        let leased = |n: u64| Value(1 << 62 | n);
        let revoke = |n: u64| Command::Revoke {
            key,
            lease: leased(n),
        };
        let revoked = Outcome::Done(Response::Revoked);
        let (w1, w2) = (Value(1), Value(2));
        log.leased_put(key, leased(1));
        log.client(Command::Put { key, value: w1 });
        assert_eq!(log.client(revoke(1)), revoked);
        let store = log.machine.store();
        assert_eq!(read(&store, key), Some(w1), "a plain put detached the key");
        assert_eq!(log.client(revoke(1)), revoked, "gone already: revoked");
        log.leased_put(key, leased(2));
        log.leased_put(key, leased(3));
        assert_eq!(log.client(revoke(2)), revoked);
        assert_eq!(
            read(&store, key),
            Some(leased(3)),
            "moved to the later lease"
        );
        let index = log.index;
        let mut copy = TaggedMachine::new(LeaseEvents::default(), None);
        copy.restore(LogIndex(index), &log.machine.snapshot());
        log.client(Command::CompareAndSet {
            key,
            expected: Some(leased(3)),
            new: w2,
        });
        assert_eq!(log.client(revoke(3)), revoked);
        assert_eq!(read(&store, key), Some(w2), "a compare-and-set detached it");
        let entry = expiry_entry(lease_id_of(leased(3)));
        copy.apply(LogIndex(index + 1), &entry);
        assert_eq!(
            read(&copy.store(), key),
            None,
            "a restored store revokes alike"
        );
    }

    fn lease_id_of(value: Value) -> i64 {
        crate::member::etcd_entries::lease_id(value)
    }

    #[test]
    fn the_lease_clock_hears_grants_client_revokes_and_expiries_apart() {
        let events = LeaseEvents::default();
        let mut machine = TaggedMachine::new(events.clone(), None);
        let (key, lease) = (Key(4), Value(9));
        let (grant, _) = client_entry(Command::LeasedPut { key, value: lease });
        machine.apply(LogIndex(1), &grant);
        machine.apply(LogIndex(2), &expiry_entry(9));
        machine.apply(LogIndex(3), &grant);
        let (revoke, _) = client_entry(Command::Revoke { key, lease });
        machine.apply(LogIndex(4), &revoke);
        machine.apply(LogIndex(5), &revoke);
        let ttl_seconds = crate::member::etcd_entries::LEASE_TTL_SECONDS;
        let granted = LeaseApplied::Granted { id: 9, ttl_seconds };
        let revoked = |by_client, existed| LeaseApplied::Revoked {
            id: 9,
            by_client,
            existed,
        };
        assert_eq!(
            *events.lock().expect("one thread"),
            vec![
                granted,
                revoked(false, true),
                granted,
                revoked(true, true),
                revoked(true, false),
            ],
            "an expiry, a client's revoke, and a revoke that found nothing"
        );
    }
}

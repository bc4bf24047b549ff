//! The state machine's own rules, applied entry by entry as the member
//! applies them: auth at apply, the lease changes told to the observer,
//! and refusals that leave the store as it was.

use super::*;
use crate::answer::read_answer;
use std::sync::Mutex as StdMutex;

/// An observer that records what it is told.
#[derive(Clone, Default)]
struct Recorder(Arc<StdMutex<Vec<LeaseApplied>>>, Arc<StdMutex<Vec<i64>>>);

impl Observer for Recorder {
    fn published(&self, store: &KvStore) {
        self.1.lock().expect("test").push(store.revision());
    }
    fn lease(&self, applied: LeaseApplied) {
        self.0.lock().expect("test").push(applied);
    }
}

struct Log {
    machine: EtcdMachine,
    index: u64,
}

impl Log {
    fn new(observer: Recorder) -> Log {
        Log {
            machine: EtcdMachine::new(Box::new(observer)),
            index: 0,
        }
    }

    fn apply(&mut self, entry: Vec<u8>) -> Vec<u8> {
        self.index += 1;
        self.machine.apply(LogIndex(self.index), &entry)
    }

    fn auth(&mut self, op: AuthOp, name: &str, role: &str) {
        let change = AuthChange {
            op: op as i32,
            name: name.into(),
            role: role.into(),
            secret: b"secret".to_vec(),
            ..Default::default()
        };
        let answer = self.apply(Command::Auth(change).encode());
        read_answer::<pb::AuthEnableResponse>(&answer).expect("an auth change applies");
    }

    fn put_as(&mut self, user: &str, auth_revision: u64) -> Result<pb::PutResponse, Refusal> {
        let put = Command::Put(pb::PutRequest {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        });
        let checked = Checked {
            auth_revision,
            user: user.into(),
        };
        read_answer(&self.apply(put.encode_checked(&checked)))
    }
}

#[test]
fn a_write_checked_before_auth_changed_is_checked_again_at_apply() {
    let mut log = Log::new(Recorder::default());
    assert!(log.put_as("", 0).is_ok(), "auth off: any caller writes");
    log.auth(AuthOp::UserAdd, "root", "");
    log.auth(AuthOp::UserGrantRole, "root", "root");
    log.auth(AuthOp::UserAdd, "alice", "");
    let revision = log.machine.store.lock().expect("test").auth().revision();
    log.auth(AuthOp::Enable, "", "");
    let refused = log.put_as("alice", revision).unwrap_err();
    assert_eq!(refused.code, Code::PermissionDenied, "{refused}");
    assert!(log.put_as("root", revision).is_ok(), "root may write");
    let store = log.machine.store.lock().expect("test");
    let value = store.get(b"k").map(|kv| kv.version);
    assert_eq!(value, Some(2), "alice's refused put left the key alone");
}

#[test]
fn leases_granted_and_revoked_are_told_with_who_revoked_them() {
    let recorder = Recorder::default();
    let mut log = Log::new(recorder.clone());
    let grant = |id| Command::LeaseGrant(pb::LeaseGrantRequest { ttl: 10, id });
    let revoke = |id| Command::LeaseRevoke(pb::LeaseRevokeRequest { id });
    let client = Checked {
        auth_revision: 0,
        user: String::new(),
    };
    log.apply(grant(7).encode());
    log.apply(grant(8).encode());
    log.apply(revoke(7).encode_checked(&client));
    let expired = log.apply(revoke(8).encode());
    assert!(read_answer::<pb::LeaseRevokeResponse>(&expired).is_ok());
    let again = log.apply(revoke(8).encode());
    let refused = read_answer::<pb::LeaseRevokeResponse>(&again).unwrap_err();
    assert_eq!(refused.code, Code::NotFound);
    let snapshot = log.machine.snapshot();
    log.machine.restore(LogIndex(10), &snapshot);
    let told = recorder.0.lock().expect("test").clone();
    let granted = |id| LeaseApplied::Granted {
        id,
        ttl_seconds: 10,
    };
    let revoked = |id, by_client, existed| LeaseApplied::Revoked {
        id,
        by_client,
        existed,
    };
    assert_eq!(
        told,
        vec![
            granted(7),
            granted(8),
            revoked(7, true, true),
            revoked(8, false, true),
            revoked(8, false, false),
            LeaseApplied::Restored,
        ]
    );
    let revisions = recorder.1.lock().expect("test").clone();
    assert!(
        revisions.windows(2).all(|w| w[0] <= w[1]),
        "published revisions never go back: {revisions:?}"
    );
}

#[test]
fn an_entry_no_client_wrote_is_refused_and_changes_nothing() {
    let mut log = Log::new(Recorder::default());
    let before = log.machine.snapshot();
    let answer = log.apply(vec![0xEE, 1, 2, 3]);
    let refused = read_answer::<pb::PutResponse>(&answer).unwrap_err();
    assert_eq!(refused.code, Code::InvalidArgument);
    assert_eq!(log.machine.snapshot(), before);
    assert_eq!(log.machine.last_applied(), LogIndex(1));
}

#[test]
#[should_panic(expected = "applied after entry")]
fn an_entry_applied_twice_is_an_invariant_failure() {
    let mut log = Log::new(Recorder::default());
    log.apply(Command::Compact(pb::CompactionRequest::default()).encode());
    log.machine.apply(LogIndex(1), &[]);
}

/// A ZooKeeper entry through the machine: its answer is ZooKeeper's.
fn zk(log: &mut Log, session: i64, request: bellwether_zookeeper::Request) -> (i64, i32) {
    let entry = ZkEntry {
        session,
        time_ms: 5,
        op: request.op(),
        body: request.encode(),
        auth: Vec::new(),
    };
    let answer = log.apply(Command::ZooKeeper(entry).encode());
    let (zxid, err, _) = bellwether_zookeeper::entry::read_answer(&answer).expect("a zk answer");
    (zxid, err)
}

fn zk_session(log: &mut Log, session: i64) {
    let record = bellwether_zookeeper::SessionRecord {
        timeout_ms: 4_000,
        password: vec![7; 16],
    };
    let entry = ZkEntry {
        session,
        time_ms: 1,
        op: bellwether_zookeeper::codes::op::CREATE_SESSION,
        body: prost::Message::encode_to_vec(&record),
        auth: Vec::new(),
    };
    log.apply(Command::ZooKeeper(entry).encode());
}

fn ephemeral(path: &str) -> bellwether_zookeeper::Request {
    bellwether_zookeeper::Request::Create(bellwether_zookeeper::request::Create {
        op: bellwether_zookeeper::codes::op::CREATE,
        path: path.into(),
        data: Some(Vec::new()),
        acl: vec![bellwether_zookeeper::stat::Acl::open()],
        flags: bellwether_zookeeper::codes::create_mode::EPHEMERAL,
        ttl: 0,
    })
}

#[test]
fn a_zookeeper_session_is_a_lease_and_its_expiry_removes_its_nodes_in_one_revision() {
    let recorder = Recorder::default();
    let mut log = Log::new(recorder.clone());
    zk_session(&mut log, 41);
    assert_eq!(
        recorder.0.lock().unwrap().last(),
        Some(&LeaseApplied::Granted {
            id: 41,
            ttl_seconds: 4
        }),
        "the lease clock counts the session down"
    );
    assert_eq!(zk(&mut log, 41, ephemeral("/a")).1, 0);
    assert_eq!(zk(&mut log, 41, ephemeral("/b")).1, 0);
    let before = log.machine.store.lock().unwrap().revision();
    // The leader's lease clock expires the session as it expires any lease.
    let revoke = Command::LeaseRevoke(pb::LeaseRevokeRequest { id: 41 });
    log.apply(revoke.encode());
    let store = log.machine.store.lock().unwrap();
    assert_eq!(
        store.revision(),
        before + 1,
        "one zxid for the session's end"
    );
    // Only the system node /zookeeper is left; the root's cversion went
    // from ZooKeeper's -1 through two creates and two deletes.
    assert_eq!(
        bellwether_zookeeper::read::children(&store, "/"),
        ["zookeeper"]
    );
    let root = bellwether_zookeeper::tree::read_node(&store, "/").unwrap();
    assert_eq!((root.num_children, root.stat().cversion), (1, 3));
    assert!(!bellwether_zookeeper::tree::session_alive(&store, 41));
}

#[test]
fn zookeeper_writes_are_refused_while_etcd_auth_is_on_but_the_leaders_own_entries_land() {
    use bellwether_zookeeper::codes::{create_mode, op};
    let mut log = Log::new(Recorder::default());
    zk_session(&mut log, 9);
    let ttl_node = bellwether_zookeeper::Request::Create(bellwether_zookeeper::request::Create {
        op: op::CREATE_TTL,
        path: "/t".into(),
        data: Some(Vec::new()),
        acl: vec![bellwether_zookeeper::stat::Acl::open()],
        flags: create_mode::PERSISTENT_WITH_TTL,
        ttl: 1,
    });
    assert_eq!(zk(&mut log, 9, ttl_node).1, 0);
    log.auth(AuthOp::UserAdd, "root", "");
    log.auth(AuthOp::RoleAdd, "root", "");
    log.auth(AuthOp::UserGrantRole, "root", "root");
    log.auth(AuthOp::Enable, "", "");
    let (_, err) = zk(&mut log, 9, ephemeral("/x"));
    assert_eq!(err, ZkError::NoAuth.code());
    // The leader's record of the members is not a client's write: it
    // lands, or the leader would log it again and again.
    let mut w = bellwether_zookeeper::jute::JuteWriter::new();
    w.string("server.1=127.0.0.1:7001:7001:participant\n");
    let reconfig = ZkEntry {
        session: 0,
        time_ms: 5,
        op: bellwether_zookeeper::codes::op::RECONFIG,
        body: w.into_bytes(),
        auth: Vec::new(),
    };
    log.apply(Command::ZooKeeper(reconfig).encode());
    // So is its deletion of a due TTL node.
    let mut w = bellwether_zookeeper::jute::JuteWriter::new();
    w.string("/t");
    let reap = ZkEntry {
        session: 0,
        time_ms: 1_000,
        op: op::DELETE_CONTAINER,
        body: w.into_bytes(),
        auth: Vec::new(),
    };
    log.apply(Command::ZooKeeper(reap).encode());
    let store = log.machine.store.lock().unwrap();
    assert!(bellwether_zookeeper::tree::read_node(&store, "/t").is_none());
    assert!(bellwether_zookeeper::tree::read_node(&store, "/x").is_none());
    let config = bellwether_zookeeper::tree::read_node(&store, "/zookeeper/config").unwrap();
    assert!(config.data.starts_with(b"server.1="), "{config:?}");
}

fn persistent(path: &str) -> bellwether_zookeeper::Request {
    let mut create = ephemeral(path);
    if let bellwether_zookeeper::Request::Create(create) = &mut create {
        create.flags = bellwether_zookeeper::codes::create_mode::PERSISTENT;
    }
    create
}

fn zk_entry(session: i64, request: bellwether_zookeeper::Request) -> ZkEntry {
    ZkEntry {
        session,
        time_ms: 5,
        op: request.op(),
        body: request.encode(),
        auth: Vec::new(),
    }
}

#[test]
fn a_zookeeper_batch_applies_each_write_in_order_with_its_own_zxid_and_answer() {
    let recorder = Recorder::default();
    let mut log = Log::new(recorder.clone());
    zk_session(&mut log, 7);
    let before = log.machine.store.lock().unwrap().revision();
    // The child needs its parent, made just before it in the same batch;
    // the third write fails and leaves the others applied.
    let batch = bellwether_zookeeper::ZkBatch {
        entries: vec![
            zk_entry(7, persistent("/p")),
            zk_entry(7, ephemeral("/p/child")),
            zk_entry(7, ephemeral("/missing/child")),
            zk_entry(7, ephemeral("/q")),
        ],
    };
    let answer = log.apply(Command::ZooKeeperBatch(batch).encode());
    let answers = bellwether_zookeeper::ZkBatchAnswer::decode(answer.as_slice())
        .expect("a batch answer")
        .answers;
    let read: Vec<(i64, i32)> = answers
        .iter()
        .map(|a| {
            let (zxid, err, _) = bellwether_zookeeper::entry::read_answer(a).unwrap();
            (zxid, err)
        })
        .collect();
    assert_eq!(
        read,
        vec![
            (before + 1, 0),
            (before + 2, 0),
            (before + 2, ZkError::NoNode.code()),
            (before + 3, 0),
        ],
        "each write is answered as if alone, in order"
    );
    let store = log.machine.store.lock().unwrap();
    assert_eq!(store.revision(), before + 3);
    assert!(bellwether_zookeeper::tree::read_node(&store, "/p/child").is_some());
    assert!(bellwether_zookeeper::tree::read_node(&store, "/q").is_some());
    assert_eq!(
        recorder.1.lock().unwrap().last(),
        Some(&(before + 3)),
        "the batch's end is published"
    );
}

/// An observer that takes the stores a restore replaces, checking that the
/// store's lock is free by then.
struct Retirer {
    store: Arc<Mutex<KvStore>>,
    retired: Arc<StdMutex<Vec<i64>>>,
}

impl Observer for Retirer {
    fn published(&self, _store: &KvStore) {}
    fn lease(&self, _applied: LeaseApplied) {}
    fn retired(&self, store: KvStore) {
        assert!(
            self.store.try_lock().is_ok(),
            "a replaced store is handed over after the lock is released"
        );
        self.retired.lock().expect("test").push(store.revision());
    }
}

#[test]
fn a_restore_hands_the_replaced_store_to_the_observer_outside_the_lock() {
    let mut source = EtcdMachine::new(Box::new(NoObserver));
    let put = |key: &[u8]| {
        Command::Put(pb::PutRequest {
            key: key.to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        })
        .encode()
    };
    for (i, key) in [b"a", b"b", b"c"].iter().enumerate() {
        source.apply(LogIndex(i as u64 + 1), &put(*key));
    }
    let snapshot = source.snapshot();
    let store = Arc::new(Mutex::new(KvStore::new()));
    let retired = Arc::new(StdMutex::new(Vec::new()));
    let observer = Retirer {
        store: store.clone(),
        retired: retired.clone(),
    };
    let mut machine = EtcdMachine::new(Box::new(observer));
    machine.store = store;
    machine.apply(LogIndex(1), &put(b"x"));
    let before = machine.store.lock().expect("test").revision();
    machine.restore(LogIndex(3), &snapshot);
    assert_eq!(*retired.lock().expect("test"), [before], "the old store");
    assert_eq!(
        machine.store.lock().expect("test").revision(),
        source.store.lock().expect("test").revision(),
        "the restored one serves"
    );
}

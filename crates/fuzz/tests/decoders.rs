//! Every decoder that reads bytes from outside the process (peers, disk,
//! snapshot files), fed valid encodings mutated at random (bit flips, cuts,
//! length fields overwritten, bytes inserted) and plain garbage. Each must
//! return a value or an error: never panic, and never allocate more at
//! once than [`allocation_bound`] of its input, which a decoder that
//! trusted a length field would. A budget of cases runs in the test suite
//! (`BELLWETHER_FUZZ_CASES`, default 300); `scripts/fuzz.sh` runs more.

use bellwether_core::raft::{ClusterConfig, Entry, HardState, Payload, RaftMessage, SnapshotMeta};
use bellwether_core::{LogIndex, NodeId, Term};
use bellwether_fuzz::{allocation_bound, cases, largest_allocation, LargestAllocation};
use bellwether_transport::WireMessage;
use proptest::prelude::*;

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

/// One change to an encoding.
#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize),
    Cut(usize),
    /// Overwrite four bytes with a value, often a huge length.
    Overwrite(usize, u32),
    Insert(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::FlipBit),
        any::<usize>().prop_map(Mutation::Cut),
        (
            any::<usize>(),
            prop_oneof![Just(u32::MAX), Just(1 << 31), any::<u32>()]
        )
            .prop_map(|(at, value)| Mutation::Overwrite(at, value)),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
    ]
}

fn apply(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for mutation in mutations {
        let len = bytes.len().max(1);
        match mutation {
            Mutation::FlipBit(at) if !bytes.is_empty() => bytes[at % len] ^= 1 << (at % 8),
            Mutation::Cut(at) => bytes.truncate(at % len),
            Mutation::Overwrite(at, value) if bytes.len() >= 4 => {
                let at = at % (bytes.len() - 3);
                bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
            }
            Mutation::Insert(at, extra) => {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, extra.iter().copied());
            }
            _ => {}
        }
    }
    bytes
}

/// Valid encodings mutated, or garbage that starts like one.
fn inputs(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let count = seeds.len();
    prop_oneof![
        4 => (0..count, proptest::collection::vec(mutation(), 1..4))
            .prop_map(move |(i, mutations)| apply(seeds[i].clone(), &mutations)),
        1 => (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..256)).prop_map(|(first, rest)| {
            let mut bytes = vec![first % 40];
            bytes.extend(rest);
            bytes
        }),
    ]
}

/// Runs `decode` on `input` and checks the allocation bound.
fn decodes_within_bounds<T>(input: &[u8], decode: impl FnOnce(&[u8]) -> T) -> T {
    let (result, largest) = largest_allocation(|| decode(input));
    assert!(
        largest <= allocation_bound(input.len()),
        "decoding {} bytes allocated {largest} bytes at once",
        input.len()
    );
    result
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn entries() -> Vec<Entry> {
    vec![
        Entry {
            term: Term(3),
            index: LogIndex(7),
            payload: Payload::Noop,
        },
        Entry {
            term: Term(3),
            index: LogIndex(8),
            payload: Payload::Command(b"put k v".to_vec()),
        },
        Entry {
            term: Term(4),
            index: LogIndex(9),
            payload: Payload::Membership(ClusterConfig::voters([NodeId(1), NodeId(2), NodeId(3)])),
        },
    ]
}

fn raft_seeds() -> Vec<Vec<u8>> {
    let meta = SnapshotMeta {
        last_index: LogIndex(9),
        last_term: Term(4),
        config: ClusterConfig::voters([NodeId(1), NodeId(2)]),
    };
    let messages = [
        RaftMessage::AppendEntries {
            term: Term(4),
            prev_log_index: LogIndex(6),
            prev_log_term: Term(3),
            entries: entries(),
            leader_commit: LogIndex(8),
        },
        RaftMessage::InstallSnapshot {
            term: Term(4),
            meta,
            offset: 0,
            total_bytes: 5,
            data: b"store".to_vec(),
        },
        RaftMessage::VoteRequest {
            term: Term(5),
            last_log_index: LogIndex(9),
            last_log_term: Term(4),
            leadership_transfer: true,
        },
        RaftMessage::AppendResponse {
            term: Term(4),
            success: false,
            match_index: LogIndex(6),
            hint_index: LogIndex(5),
            hint_term: Some(Term(2)),
        },
        RaftMessage::Heartbeat {
            term: Term(4),
            commit: LogIndex(8),
            round: 77,
        },
    ];
    encoded(&messages)
}

/// Most characters a refusal's message may take: it says what is wrong,
/// it does not echo the input back.
const ERROR_MESSAGE_CHARS_MAX: usize = 400;

/// A refusal is a clear error: a message of its own, short, on one line.
fn clear<T, E: std::fmt::Display>(result: Result<T, E>) -> Result<T, E> {
    if let Err(error) = &result {
        let message = error.to_string();
        assert!(!message.trim().is_empty(), "a refusal without a message");
        assert!(
            message.chars().count() <= ERROR_MESSAGE_CHARS_MAX,
            "a refusal of {} characters: {message:.200}",
            message.chars().count()
        );
        assert!(
            !message.contains('\n'),
            "a refusal over several lines: {message}"
        );
    }
    result
}

/// A decoder that gives a value back must give the same value for the
/// value's own encoding: what is accepted is what was meant.
fn stable<M: WireMessage + PartialEq + std::fmt::Debug>(input: &[u8]) {
    if let Ok(message) = clear(decodes_within_bounds(input, M::decode)) {
        let mut again = Vec::new();
        message.encode(&mut again);
        assert_eq!(M::decode(&again).ok(), Some(message));
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn raft_messages(input in inputs(raft_seeds())) {
        stable::<RaftMessage>(&input);
    }

    #[test]
    fn paxos_messages(input in inputs(encoded(&paxos_seed_messages()))) {
        stable::<bellwether_core::paxos::PaxosMessage>(&input);
    }

    #[test]
    fn bully_and_ring_messages(input in inputs(bully_and_ring_seeds())) {
        stable::<bellwether_core::bully::BullyMessage>(&input);
        stable::<bellwether_core::ring::RingMessage>(&input);
    }

    #[test]
    fn member_messages(input in inputs(raft_seeds())) {
        let _ = clear(decodes_within_bounds(&input, bellwether_server::peer_message::decode));
    }

    #[test]
    fn handshakes(input in inputs(vec![bellwether_transport::Hello {
        cluster: "prod".into(),
        from: 2,
        to: 3,
        fingerprint: 0xdead_beef,
    }.encode()])) {
        let _ = clear(decodes_within_bounds(&input, bellwether_transport::Hello::decode));
    }

    #[test]
    fn wal_entries_and_hard_state(input in inputs(wal_seeds())) {
        let _ = clear(decodes_within_bounds(&input, bellwether_storage::codec::decode_entries));
        let _ = clear(decodes_within_bounds(&input, bellwether_storage::codec::decode_hard_state));
    }

    /// Log entries: what decodes encodes back to the same entry.
    #[test]
    fn log_commands(input in inputs(command_seeds())) {
        use bellwether_etcd::command::Command;
        if let Some((checked, command)) = decodes_within_bounds(&input, Command::decode_entry) {
            let again = match &checked {
                Some(checked) => command.encode_checked(checked),
                None => command.encode(),
            };
            prop_assert_eq!(Command::decode_entry(&again), Some((checked, command)));
        }
    }

    /// ZooKeeper's handshake and requests, as a client sends them: no
    /// panic, no allocation past the bound, and what decodes encodes back
    /// to what decodes the same.
    #[test]
    fn zookeeper_requests(input in inputs(zookeeper_seeds())) {
        use bellwether_zookeeper::Request;
        use bellwether_zookeeper::connect::ConnectRequest;
        if let Ok(connect) = decodes_within_bounds(&input, ConnectRequest::decode) {
            prop_assert_eq!(ConnectRequest::decode(&connect.encode()), Ok(connect));
        }
        // The first four bytes pick the operation, as a request header's do.
        if input.len() >= 4 {
            let op = i32::from_be_bytes([input[0], input[1], input[2], input[3]]);
            let body = &input[4..];
            if let Ok(request) = decodes_within_bounds(body, |b| Request::decode(op, b)) {
                let again = Request::decode(request.op(), &request.encode());
                prop_assert_eq!(again, Ok(request));
            }
        }
    }

    /// A ZooKeeper entry from the log applied to a store with a session:
    /// never a panic, whatever the request's bytes.
    #[test]
    fn zookeeper_entries_apply(input in inputs(zookeeper_seeds())) {
        if input.len() >= 4 {
            let op = i32::from_be_bytes([input[0], input[1], input[2], input[3]]);
            let mut store = zookeeper_store();
            let entry = bellwether_zookeeper::ZkEntry {
                session: 7,
                time_ms: 1,
                op,
                body: input[4..].to_vec(),
                auth: Vec::new(),
            };
            let applied = decodes_within_bounds(&input, |_| bellwether_zookeeper::apply(&mut store, &entry));
            prop_assert!(bellwether_zookeeper::entry::read_answer(&applied.answer).is_some());
        }
    }

    /// A store that restores encodes to the same bytes again and restores
    /// to the same store: what is accepted is a consistent store.
    #[test]
    fn store_snapshots(input in inputs(vec![store().snapshot()])) {
        if let Ok(store) = clear(decodes_within_bounds(&input, bellwether_kv::KvStore::restore)) {
            let again = bellwether_kv::KvStore::restore(&store.snapshot());
            prop_assert_eq!(again.as_ref(), Ok(&store));
        }
    }

    /// The JSON gateway's request parser, on every path it serves under
    /// both of etcd's prefixes: JSON bodies of each request shape,
    /// mutated, and garbage. What is checked: no panic, no allocation past
    /// the bound, and every path is recognised.
    #[test]
    fn json_gateway_requests(
        which in any::<usize>(),
        beta in any::<bool>(),
        input in inputs(gateway_seeds()),
    ) {
        let paths: Vec<&str> = bellwether_server::etcd::json_gateway::paths().collect();
        let prefix = if beta { "/v3beta/" } else { "/v3/" };
        let path = format!("{prefix}{}", paths[which % paths.len()]);
        let parsed = decodes_within_bounds(&input, |body| {
            bellwether_server::etcd::json_gateway::parse_request(&path, body)
        });
        prop_assert!(parsed.is_some(), "{} is served", path);
    }

    /// Snapshot files, damaged before their SHA-256 is recomputed (so the
    /// parsing behind the digest is reached), and damaged after it.
    #[test]
    fn snapshot_files(
        input in inputs(vec![snapshot_file_body()]),
        rehash in any::<bool>(),
    ) {
        let file = if rehash { with_digest(input) } else { input };
        let _ = clear(decodes_within_bounds(&file, bellwether_server::snapshot_file::decode));
    }
}

/// Request bodies as etcd's gateway clients send them.
fn gateway_seeds() -> Vec<Vec<u8>> {
    [
        r#"{"key":"Zm9v","range_end":"Zm9w","limit":"10","revision":"3"}"#,
        r#"{"key":"Zm9v","value":"YmFy","lease":"7587","prev_kv":true}"#,
        r#"{"compare":[{"key":"Zm9v","result":"EQUAL","target":"VERSION","version":"0"}],"success":[{"request_put":{"key":"Zm9v","value":"YmFy"}}],"failure":[{"request_range":{"key":"Zm9v"}}]}"#,
        r#"{"TTL":"60","ID":"0"}"#,
        r#"{"create_request":{"key":"YQ==","range_end":"Yg=="}}{"cancel_request":{"watch_id":"1"}}"#,
        r#"{"name":"ZWxlY3Rpb24=","lease":"1","value":"bg=="}"#,
        "",
    ]
    .iter()
    .map(|body| body.as_bytes().to_vec())
    .collect()
}

fn encoded<M: WireMessage>(messages: &[M]) -> Vec<Vec<u8>> {
    messages
        .iter()
        .map(|m| {
            let mut out = Vec::new();
            m.encode(&mut out);
            out
        })
        .collect()
}

fn paxos_seed_messages() -> Vec<bellwether_core::paxos::PaxosMessage> {
    use bellwether_core::paxos::{Ballot, Entry as Slot, PaxosMessage};
    let ballot = Ballot {
        round: 7,
        priority: 1,
        node: NodeId(3),
    };
    vec![
        PaxosMessage::Prepare {
            ballot,
            from_slot: 4,
        },
        PaxosMessage::Promise {
            ballot,
            entries: vec![
                (4, Slot { ballot, value: 9 }),
                (6, Slot { ballot, value: 0 }),
            ],
        },
        PaxosMessage::Accept {
            ballot,
            first_slot: 4,
            values: vec![9, 0, 11],
            commit: 5,
            sent_tick: 1_000,
        },
        PaxosMessage::Accepted {
            ballot,
            through_slot: 6,
            sent_tick: 1_000,
        },
    ]
}

fn bully_and_ring_seeds() -> Vec<Vec<u8>> {
    use bellwether_core::bully::BullyMessage;
    use bellwether_core::ring::RingMessage;
    let mut seeds = encoded(&[
        BullyMessage::Election { epoch: 3 },
        BullyMessage::Coordinator { epoch: 4 },
    ]);
    seeds.extend(encoded(&[
        RingMessage::Election {
            initiator: NodeId(2),
            ids: vec![NodeId(2), NodeId(3), NodeId(5)],
            epoch: 8,
            sequence: 1,
        },
        RingMessage::Coordinator {
            initiator: NodeId(2),
            leader: NodeId(5),
            members: vec![NodeId(2), NodeId(3), NodeId(5)],
            epoch: 8,
            sequence: 2,
        },
    ]));
    seeds
}

/// A snapshot file without its SHA-256 trailer.
fn snapshot_file_body() -> Vec<u8> {
    let mut file = bellwether_server::snapshot_file::encode("prod", &store());
    file.truncate(file.len() - 32);
    file
}

/// `body` with a correct SHA-256 trailer.
fn with_digest(mut body: Vec<u8>) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(&body);
    body.extend_from_slice(&digest);
    body
}

fn wal_seeds() -> Vec<Vec<u8>> {
    let mut entries_bytes = Vec::new();
    bellwether_storage::codec::encode_entries(&mut entries_bytes, &entries());
    let mut state = Vec::new();
    bellwether_storage::codec::encode_hard_state(
        &mut state,
        &HardState {
            term: Term(4),
            voted_for: Some(NodeId(2)),
            commit: LogIndex(8),
        },
    );
    vec![entries_bytes, state]
}

fn store() -> bellwether_kv::KvStore {
    use bellwether_kv::{DeleteRangeRequest, PutRequest};
    let mut store = bellwether_kv::KvStore::new();
    store.lease_grant(5, 60).unwrap();
    for i in 0..12 {
        let put = PutRequest {
            lease: if i % 3 == 0 { 5 } else { 0 },
            ..PutRequest::new(format!("key{}", i % 5), format!("value{i}"))
        };
        store.put(&put).unwrap();
    }
    store
        .delete_range(&DeleteRangeRequest::new("key1", ""))
        .unwrap();
    store.compact(6).unwrap();
    store.alarm_activate(bellwether_kv::Alarm {
        member_id: 2,
        kind: bellwether_kv::AlarmKind::NoSpace,
    });
    let auth = store.auth_mut();
    auth.user_add("root", vec![1; 49]).unwrap();
    auth.user_grant_role("root", "root").unwrap();
    auth.user_add("alice", Vec::new()).unwrap();
    auth.role_add("app").unwrap();
    let permission = bellwether_kv::KeyPermission {
        key: b"/app/".to_vec(),
        range_end: b"/app0".to_vec(),
        kind: bellwether_kv::Permission::ReadWrite,
    };
    auth.role_grant_permission("app", permission).unwrap();
    auth.user_grant_role("alice", "app").unwrap();
    auth.enable(vec![7; 32]).unwrap();
    store
}

/// ZooKeeper requests as clients send them, each behind its operation
/// code, and a connect request.
fn zookeeper_seeds() -> Vec<Vec<u8>> {
    use bellwether_zookeeper::codes::{create_mode, op};
    use bellwether_zookeeper::connect::ConnectRequest;
    use bellwether_zookeeper::request::{Create, SetWatches};
    use bellwether_zookeeper::stat::Acl;
    use bellwether_zookeeper::Request;
    let create = Request::Create(Create {
        op: op::CREATE2,
        path: "/a".into(),
        data: Some(b"d".to_vec()),
        acl: vec![Acl::open()],
        flags: create_mode::EPHEMERAL_SEQUENTIAL,
        ttl: 0,
    });
    let requests = [
        create.clone(),
        Request::Multi(vec![
            create,
            Request::Check {
                path: "/a".into(),
                version: 1,
            },
            Request::Delete {
                path: "/a".into(),
                version: -1,
            },
        ]),
        Request::SetData {
            path: "/a".into(),
            data: Some(vec![1; 40]),
            version: -1,
        },
        Request::SetWatches(SetWatches {
            relative_zxid: 3,
            data: vec!["/a".into()],
            child: vec!["/".into()],
            ..SetWatches::default()
        }),
    ];
    let mut seeds: Vec<Vec<u8>> = requests
        .iter()
        .map(|r| {
            let mut bytes = r.op().to_be_bytes().to_vec();
            bytes.extend(r.encode());
            bytes
        })
        .collect();
    let connect = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout_ms: 10_000,
        session_id: 0,
        password: vec![0; 16],
        read_only: Some(false),
    };
    seeds.push(connect.encode());
    seeds
}

/// A store with ZooKeeper session 7 open and a node under the root.
fn zookeeper_store() -> bellwether_kv::KvStore {
    use bellwether_zookeeper::codes::op;
    let mut store = bellwether_kv::KvStore::new();
    let record = bellwether_zookeeper::SessionRecord {
        timeout_ms: 4_000,
        password: vec![0; 16],
    };
    let mut body = Vec::new();
    prost::Message::encode(&record, &mut body).expect("a vec grows");
    let open = bellwether_zookeeper::ZkEntry {
        session: 7,
        time_ms: 1,
        op: op::CREATE_SESSION,
        body,
        auth: Vec::new(),
    };
    bellwether_zookeeper::apply(&mut store, &open);
    store
}

/// Log entries as members write them: plain and checked client commands.
fn command_seeds() -> Vec<Vec<u8>> {
    use bellwether_etcd::command::{AuthChange, AuthOp, Checked, Command};
    let put = Command::Put(bellwether_api::etcdserverpb::PutRequest {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
        ..Default::default()
    });
    let grant = Command::Auth(AuthChange {
        op: AuthOp::RoleGrantPermission as i32,
        name: "app".into(),
        key: b"/app/".to_vec(),
        range_end: b"/app0".to_vec(),
        perm_kind: 2,
        ..Default::default()
    });
    let checked = Checked {
        auth_revision: 9,
        user: "alice".into(),
    };
    let zk_batch = Command::ZooKeeperBatch(bellwether_zookeeper::ZkBatch {
        entries: vec![
            bellwether_zookeeper::ZkEntry {
                session: 7,
                time_ms: 1,
                op: bellwether_zookeeper::codes::op::DELETE,
                body: b"\0\0\0\x02/a\xff\xff\xff\xff".to_vec(),
                auth: Vec::new(),
            };
            2
        ],
    });
    vec![
        put.encode(),
        put.encode_checked(&checked),
        grant.encode_checked(&checked),
        zk_batch.encode(),
    ]
}

/// The files of a write-ahead log holding [`entries`], a hard state and a
/// snapshot, by name (written once, then mutated per case).
fn wal_files() -> &'static Vec<(std::ffi::OsString, Vec<u8>)> {
    use bellwether_storage::{Storage, WalOptions, WalStorage};
    static FILES: std::sync::OnceLock<Vec<(std::ffi::OsString, Vec<u8>)>> =
        std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        let dir = scratch("seed");
        let mut wal = WalStorage::open(&dir, WalOptions::default()).unwrap();
        wal.recover().unwrap();
        let first: Vec<Entry> = entries()
            .into_iter()
            .enumerate()
            .map(|(i, entry)| Entry {
                index: LogIndex(i as u64 + 1),
                ..entry
            })
            .collect();
        wal.append(&first).unwrap();
        wal.save_hard_state(&HardState {
            term: Term(4),
            voted_for: Some(NodeId(2)),
            commit: LogIndex(8),
        })
        .unwrap();
        wal.sync().unwrap();
        drop(wal);
        let files = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), std::fs::read(e.path()).unwrap())
            })
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        files
    })
}

/// A fresh directory under the system's temporary directory.
fn scratch(what: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("bw-fuzz-{what}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases().div_ceil(10), ..config() })]

    /// Recovery reads a damaged log back, or stops with an error; it never
    /// panics, and allocates within bounds of the files' size.
    #[test]
    fn wal_recovery(which in any::<usize>(), mutations in proptest::collection::vec(mutation(), 1..4)) {
        use bellwether_storage::{Storage, WalOptions, WalStorage};
        let files = wal_files();
        let target = which % files.len();
        let dir = scratch("wal");
        let mut total = 0;
        for (i, (name, bytes)) in files.iter().enumerate() {
            let bytes = if i == target { apply(bytes.clone(), &mutations) } else { bytes.clone() };
            total += bytes.len();
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        let (recovered, largest) = largest_allocation(|| {
            WalStorage::open(&dir, WalOptions::default()).and_then(|mut wal| wal.recover())
        });
        let _ = clear(recovered);
        std::fs::remove_dir_all(&dir).unwrap();
        prop_assert!(largest <= allocation_bound(total), "{largest} bytes at once for {total} bytes of files");
    }
}

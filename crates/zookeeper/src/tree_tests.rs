//! The tree's writes against ZooKeeper's rules, one store, no IO.

use super::*;
use crate::entry::read_answer;
use crate::jute::JuteReader;
use crate::jute::JuteWriter;
use crate::read::{children, read};
use crate::stat::Acl;
use crate::watches::{changes, Change};

const SESSION: i64 = 0x77;

fn store_with_session() -> KvStore {
    let mut store = KvStore::new();
    let record = SessionRecord {
        timeout_ms: 10_000,
        password: vec![1; 16],
    };
    let applied = apply(
        &mut store,
        &ZkEntry {
            session: SESSION,
            time_ms: 1,
            op: op::CREATE_SESSION,
            body: record.encode_to_vec(),
            auth: Vec::new(),
        },
    );
    assert_eq!(
        applied.lease,
        Some(LeaseChange::Granted {
            id: SESSION,
            ttl_seconds: 10
        })
    );
    store
}

fn run(store: &mut KvStore, request: Request) -> (i64, i32, Vec<u8>) {
    let entry = ZkEntry {
        session: SESSION,
        time_ms: 1000,
        op: request.op(),
        body: request.encode(),
        auth: Vec::new(),
    };
    let applied = apply(store, &entry);
    let (zxid, err, record) = read_answer(&applied.answer).expect("an answer");
    (zxid, err, record.to_vec())
}

fn create(path: &str, flags: i32) -> Request {
    Request::Create(Create {
        op: op::CREATE2,
        path: path.to_string(),
        data: Some(b"d".to_vec()),
        acl: vec![Acl::open()],
        flags,
        ttl: 0,
    })
}

fn delete(path: &str) -> Request {
    Request::Delete {
        path: path.to_string(),
        version: -1,
    }
}

fn created_path(record: &[u8]) -> (String, Stat) {
    let mut r = JuteReader::new(record);
    let path = r.text().unwrap();
    (path, Stat::read(&mut r).unwrap())
}

#[test]
fn a_create_stamps_the_node_and_its_parent_with_one_zxid() {
    let mut store = store_with_session();
    let (zxid, err, record) = run(&mut store, create("/a", create_mode::PERSISTENT));
    assert_eq!(err, 0);
    assert_eq!(zxid, store.revision());
    let (path, stat) = created_path(&record);
    assert_eq!(path, "/a");
    assert_eq!((stat.czxid, stat.mzxid, stat.pzxid), (zxid, zxid, zxid));
    assert_eq!((stat.ctime, stat.mtime, stat.data_length), (1000, 1000, 1));
    // As on ZooKeeper 3.8, whose root starts at cversion -1 with one
    // child, /zookeeper.
    let root = read_node(&store, "/").unwrap();
    assert_eq!(
        (root.stat().cversion, root.num_children, root.pzxid),
        (0, 2, zxid)
    );
    let (_, err, _) = run(&mut store, create("/a", create_mode::PERSISTENT));
    assert_eq!(err, ErrorCode::NodeExists.code());
    let (_, err, _) = run(&mut store, create("/x/y", create_mode::PERSISTENT));
    assert_eq!(err, ErrorCode::NoNode.code());
    let (_, err, _) = run(&mut store, create("/a/", create_mode::PERSISTENT));
    assert_eq!(err, ErrorCode::BadArguments.code());
}

#[test]
fn sequential_names_count_the_parents_child_changes() {
    let mut store = store_with_session();
    run(&mut store, create("/q", create_mode::PERSISTENT));
    let (_, _, first) = run(
        &mut store,
        create("/q/n-", create_mode::EPHEMERAL_SEQUENTIAL),
    );
    assert_eq!(created_path(&first).0, "/q/n-0000000000");
    run(
        &mut store,
        Request::Delete {
            path: "/q/n-0000000000".into(),
            version: -1,
        },
    );
    let (_, _, second) = run(
        &mut store,
        create("/q/n-", create_mode::PERSISTENT_SEQUENTIAL),
    );
    assert_eq!(
        created_path(&second).0,
        "/q/n-0000000001",
        "the suffix counts creates only"
    );
    assert_eq!(children(&store, "/q"), vec!["n-0000000001".to_string()]);
    let parent = read_node(&store, "/q").unwrap();
    assert_eq!(
        parent.stat().cversion,
        3,
        "a client sees every create and delete"
    );
}

#[test]
fn versions_guard_deletes_and_sets_and_children_guard_deletes() {
    let mut store = store_with_session();
    run(&mut store, create("/a", create_mode::PERSISTENT));
    run(&mut store, create("/a/b", create_mode::PERSISTENT));
    let set = |version| Request::SetData {
        path: "/a".into(),
        data: Some(b"new".to_vec()),
        version,
    };
    assert_eq!(run(&mut store, set(3)).1, ErrorCode::BadVersion.code());
    let (zxid, err, record) = run(&mut store, set(0));
    assert_eq!(err, 0);
    let stat = Stat::read(&mut JuteReader::new(&record)).unwrap();
    assert_eq!((stat.version, stat.mzxid, stat.data_length), (1, zxid, 3));
    let delete = |path: &str, version| Request::Delete {
        path: path.into(),
        version,
    };
    assert_eq!(
        run(&mut store, delete("/a", -1)).1,
        ErrorCode::NotEmpty.code()
    );
    assert_eq!(
        run(&mut store, delete("/a/b", 1)).1,
        ErrorCode::BadVersion.code()
    );
    assert_eq!(run(&mut store, delete("/a/b", 0)).1, 0);
    assert_eq!(run(&mut store, delete("/a", 1)).1, 0);
    assert_eq!(
        run(&mut store, delete("/a", -1)).1,
        ErrorCode::NoNode.code()
    );
    assert_eq!(
        run(&mut store, delete("/", -1)).1,
        ErrorCode::BadArguments.code()
    );
}

#[test]
fn an_ephemeral_node_has_no_children_and_goes_with_its_session_in_one_zxid() {
    let mut store = store_with_session();
    run(&mut store, create("/e", create_mode::PERSISTENT));
    run(&mut store, create("/e/1", create_mode::EPHEMERAL));
    run(&mut store, create("/e/2", create_mode::EPHEMERAL));
    let (_, err, _) = run(&mut store, create("/e/1/c", create_mode::PERSISTENT));
    assert_eq!(err, ErrorCode::NoChildrenForEphemerals.code());
    let before = store.revision();
    let closed = apply(
        &mut store,
        &ZkEntry {
            session: SESSION,
            time_ms: 2000,
            op: op::CLOSE_SESSION,
            body: Vec::new(),
            auth: Vec::new(),
        },
    );
    assert_eq!(
        closed.lease,
        Some(LeaseChange::Revoked {
            id: SESSION,
            existed: true
        })
    );
    assert_eq!(
        store.revision(),
        before + 1,
        "one zxid for the session's end"
    );
    assert!(children(&store, "/e").is_empty());
    let parent = read_node(&store, "/e").unwrap();
    assert_eq!((parent.num_children, parent.stat().cversion), (0, 4));
    assert_eq!(parent.pzxid, store.revision());
    let (_, err, _) = run(&mut store, create("/e/3", create_mode::PERSISTENT));
    assert_eq!(err, ErrorCode::SessionExpired.code(), "the session is gone");
}

#[test]
fn a_multi_lands_whole_or_not_at_all() {
    let mut store = store_with_session();
    let ok = Request::Multi(vec![
        create("/m", create_mode::PERSISTENT),
        create("/m/c", create_mode::PERSISTENT),
        Request::Check {
            path: "/m".into(),
            version: 0,
        },
        Request::SetData {
            path: "/m/c".into(),
            data: Some(Vec::new()),
            version: 0,
        },
    ]);
    let before = store.revision();
    let (zxid, err, _) = run(&mut store, ok);
    assert_eq!((err, zxid), (0, before + 1));
    let failing = Request::Multi(vec![
        create("/n", create_mode::PERSISTENT),
        Request::Delete {
            path: "/missing".into(),
            version: -1,
        },
        create("/o", create_mode::PERSISTENT),
    ]);
    let (zxid, err, record) = run(&mut store, failing);
    assert_eq!(err, 0, "the failure is told in the results");
    assert_eq!(zxid, before + 1, "nothing landed");
    assert!(read_node(&store, "/n").is_none());
    let mut r = JuteReader::new(&record);
    let mut errors = Vec::new();
    loop {
        let (kind, done, err) = (r.int().unwrap(), r.bool().unwrap(), r.int().unwrap());
        if done {
            break;
        }
        assert_eq!(kind, op::ERROR);
        errors.push(r.int().unwrap());
        assert_eq!(errors.last(), Some(&err));
    }
    assert_eq!(errors, vec![0, -101, -2]);
}

#[test]
fn store_events_become_the_changes_watches_see() {
    let mut store = store_with_session();
    let start = store.revision() + 1;
    run(&mut store, create("/w", create_mode::PERSISTENT));
    run(
        &mut store,
        Request::SetData {
            path: "/w".into(),
            data: Some(b"x".to_vec()),
            version: -1,
        },
    );
    run(&mut store, create("/w/c", create_mode::PERSISTENT));
    run(
        &mut store,
        Request::Delete {
            path: "/w/c".into(),
            version: -1,
        },
    );
    let range = bellwether_kv::KeyRange::prefix(crate::znode::NODE_PREFIX.to_vec());
    let events = store.events_since(start, &range).unwrap();
    let seen = changes(&events);
    assert_eq!(
        seen,
        vec![
            Change::Created("/w".into()),
            Change::DataChanged("/w".into()),
            Change::Created("/w/c".into()),
            Change::Deleted("/w/c".into()),
        ],
        "a parent's child count alone changes nothing a data watch sees"
    );
}

#[test]
fn reads_answer_what_the_tree_holds() {
    let mut store = store_with_session();
    run(&mut store, create("/r", create_mode::PERSISTENT));
    let (code, record) = read(
        &store,
        &Request::GetData {
            path: "/r".into(),
            watch: false,
        },
        SESSION,
        &[],
    );
    assert_eq!(code, ErrorCode::Ok);
    let mut r = JuteReader::new(&record);
    assert_eq!(r.buffer().unwrap(), Some(b"d".to_vec()));
    let (code, _) = read(
        &store,
        &Request::Exists {
            path: "/nope".into(),
            watch: false,
        },
        SESSION,
        &[],
    );
    assert_eq!(code, ErrorCode::NoNode);
}

fn reap_entry(path: &str, time_ms: i64) -> ZkEntry {
    let mut w = JuteWriter::new();
    w.string(path);
    ZkEntry {
        session: 0,
        time_ms,
        op: op::DELETE_CONTAINER,
        body: w.into_bytes(),
        auth: Vec::new(),
    }
}

#[test]
fn a_container_goes_once_its_last_child_does_and_a_ttl_node_once_it_is_idle() {
    let mut store = store_with_session();
    let container = Request::Create(Create {
        op: op::CREATE_CONTAINER,
        path: "/c".into(),
        data: Some(Vec::new()),
        acl: vec![Acl::open()],
        flags: create_mode::CONTAINER,
        ttl: 0,
    });
    assert_eq!(run(&mut store, container).1, 0);
    assert!(due_nodes(&store, 10_000).is_empty(), "never had a child");
    run(&mut store, create("/c/x", create_mode::PERSISTENT));
    assert!(due_nodes(&store, 10_000).is_empty(), "has a child");
    run(
        &mut store,
        Request::Delete {
            path: "/c/x".into(),
            version: -1,
        },
    );
    assert_eq!(due_nodes(&store, 10_000), vec!["/c".to_string()]);
    let reaped = apply(&mut store, &reap_entry("/c", 10_000));
    assert_eq!(read_answer(&reaped.answer).unwrap().1, 0);
    assert!(read_node(&store, "/c").is_none());
    assert!(due_nodes(&store, 10_000).is_empty(), "the index forgot it");

    let ttl = |ttl| {
        Request::Create(Create {
            op: op::CREATE_TTL,
            path: "/t".into(),
            data: Some(Vec::new()),
            acl: vec![Acl::open()],
            flags: create_mode::PERSISTENT_WITH_TTL,
            ttl,
        })
    };
    assert_eq!(run(&mut store, ttl(0)).1, ErrorCode::BadArguments.code());
    assert_eq!(run(&mut store, ttl(500)).1, 0);
    // `run` stamps its entries at 1000 ms.
    assert!(due_nodes(&store, 1_400).is_empty());
    let early = apply(&mut store, &reap_entry("/t", 1_400));
    assert_ne!(read_answer(&early.answer).unwrap().1, 0, "not due yet");
    assert_eq!(due_nodes(&store, 1_501), vec!["/t".to_string()]);
    apply(&mut store, &reap_entry("/t", 1_501));
    assert!(read_node(&store, "/t").is_none());
}

#[test]
fn null_data_reads_back_null_and_empty_data_empty() {
    let mut store = store_with_session();
    let data_of = |store: &KvStore| {
        let get = Request::GetData {
            path: "/n".into(),
            watch: false,
        };
        let (code, record) = read(store, &get, SESSION, &[]);
        assert_eq!(code, ErrorCode::Ok);
        JuteReader::new(&record).buffer().unwrap()
    };
    let mut null = create("/n", create_mode::PERSISTENT);
    if let Request::Create(create) = &mut null {
        create.data = None;
    }
    assert_eq!(run(&mut store, null).1, 0);
    assert_eq!(data_of(&store), None, "created null, read null");
    let set = |data: Option<Vec<u8>>| Request::SetData {
        path: "/n".into(),
        data,
        version: -1,
    };
    run(&mut store, set(Some(Vec::new())));
    assert_eq!(data_of(&store), Some(Vec::new()), "set empty, read empty");
    run(&mut store, set(None));
    assert_eq!(data_of(&store), None, "set null, read null");
    let node = read_node(&store, "/n").unwrap();
    assert_eq!(node.stat().data_length, 0);
}

#[test]
fn the_system_nodes_exist_from_the_start_and_cannot_be_deleted() {
    let mut store = store_with_session();
    assert_eq!(
        children(&store, "/"),
        vec!["zookeeper".to_string()],
        "a new tree"
    );
    assert_eq!(children(&store, "/zookeeper"), ["config", "quota"]);
    let root = read_node(&store, "/").unwrap().stat();
    assert_eq!((root.cversion, root.num_children), (-1, 1));
    let zookeeper = read_node(&store, "/zookeeper").unwrap().stat();
    assert_eq!((zookeeper.cversion, zookeeper.num_children), (-2, 2));
    let config = read_node(&store, "/zookeeper/config").unwrap().stat();
    assert_eq!((config.version, config.aversion), (-1, -1));
    for path in ["/zookeeper", "/zookeeper/config", "/zookeeper/quota"] {
        let (_, err, _) = run(&mut store, delete(path));
        assert_eq!(err, ErrorCode::BadArguments.code(), "{path}");
    }
    let (_, err, _) = run(&mut store, create("/zookeeper", create_mode::PERSISTENT));
    assert_eq!(err, ErrorCode::NodeExists.code());
    // A child of /zookeeper is an ordinary node; /zookeeper is then stored
    // and keeps its system children.
    let (_, err, _) = run(&mut store, create("/zookeeper/x", create_mode::PERSISTENT));
    assert_eq!(err, 0);
    assert_eq!(children(&store, "/zookeeper"), ["config", "quota", "x"]);
    let zookeeper = read_node(&store, "/zookeeper").unwrap().stat();
    assert_eq!((zookeeper.cversion, zookeeper.num_children), (-1, 3));
    assert_eq!(children(&store, "/"), vec!["zookeeper".to_string()]);
}

fn reconfig_entry(lines: &str, time_ms: i64) -> ZkEntry {
    let mut w = JuteWriter::new();
    w.string(lines);
    ZkEntry {
        session: 0,
        time_ms,
        op: op::RECONFIG,
        body: w.into_bytes(),
        auth: Vec::new(),
    }
}

#[test]
fn the_leaders_member_list_lands_in_the_config_node_with_its_zxid_and_fires_its_watch() {
    let mut store = store_with_session();
    let lines = "server.1=127.0.0.1:7001:7001:participant;127.0.0.1:7301\n";
    let applied = apply(&mut store, &reconfig_entry(lines, 5_000));
    let (zxid, err, _) = read_answer(&applied.answer).unwrap();
    assert_eq!(err, 0);
    assert_eq!(zxid, store.revision());
    let node = read_node(&store, "/zookeeper/config").unwrap();
    let expected = format!("{lines}version={zxid:x}");
    assert_eq!(node.data, expected.as_bytes());
    let stat = node.stat();
    assert_eq!((stat.mzxid, stat.mtime, stat.czxid), (zxid, 5_000, 0));
    assert_eq!(
        (stat.version, stat.aversion),
        (-1, -1),
        "as ZooKeeper's reconfig"
    );
    assert_eq!(stat.data_length as usize, expected.len());
    let range = bellwether_kv::KeyRange::prefix(crate::znode::NODE_PREFIX.to_vec());
    let events = store.events_since(zxid, &range).unwrap();
    assert_eq!(
        changes(&events),
        vec![Change::DataChanged("/zookeeper/config".into())]
    );
    // Still read-only to clients.
    let set = Request::SetData {
        path: "/zookeeper/config".into(),
        data: Some(b"x".to_vec()),
        version: -1,
    };
    assert_eq!(run(&mut store, set).1, ErrorCode::NoAuth.code());

    // The same members again change nothing; others move the version.
    let revision = store.revision();
    apply(&mut store, &reconfig_entry(lines, 6_000));
    assert_eq!(
        store.revision(),
        revision,
        "nothing changed, nothing written"
    );
    let more = format!("{lines}server.2=127.0.0.1:7002:7002:observer\n");
    apply(&mut store, &reconfig_entry(&more, 7_000));
    let node = read_node(&store, "/zookeeper/config").unwrap();
    assert_eq!(
        node.data,
        format!("{more}version={:x}", store.revision()).as_bytes()
    );

    // Anything but server lines is refused and changes nothing.
    let revision = store.revision();
    let applied = apply(&mut store, &reconfig_entry("version=5\n", 8_000));
    assert_eq!(
        read_answer(&applied.answer).unwrap().1,
        ErrorCode::BadArguments.code()
    );
    assert_eq!(store.revision(), revision);
}

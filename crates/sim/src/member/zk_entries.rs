//! The workload's operations on its odd keys as a ZooKeeper client makes
//! them: each key is the znode `/k<n>`, and every operation runs in a
//! session, as it does on a connection.
//!
//! ZooKeeper has no upsert, so a put tries one of two forms, each atomic:
//! replace the node (`multi(delete, create)`), or create it. The form that
//! does not fit (the node is missing, or there already) changes nothing
//! and the client tries the other; the one that lands is the operation's
//! point. A put always leaves a persistent node, as etcd's put leaves a key
//! without its lease. A compare-and-set of an absent key is a create. A
//! leased put opens a session whose id is the lease's and writes an
//! ephemeral node; a revoke closes that session.
//!
//! Some clients' steps go to the log as a member batches a pipelining
//! session's writes (`bellwether_zookeeper::ZkBatch`): behind a write that
//! fails (a delete of a node that never exists), which must change nothing
//! and leave the step its own answer.
//!
//! The answers are ZooKeeper's, read with the production records.

use super::etcd_entries::{lease_id, Outcome, Write};
use crate::linearizability::{Command, Key, Response, Value};
use bellwether_etcd::{Code, Command as EtcdCommand, Refusal};
use bellwether_zookeeper::codes::{create_mode, op, ErrorCode};
use bellwether_zookeeper::entry::read_answer;
use bellwether_zookeeper::jute::JuteReader;
use bellwether_zookeeper::request::Create;
use bellwether_zookeeper::stat::Acl;
use bellwether_zookeeper::{Request, SessionRecord, ZkBatch, ZkBatchAnswer, ZkEntry};

/// Whether `key` is a znode (odd keys) rather than an etcd key.
pub fn is_znode(key: Key) -> bool {
    !key.0.is_multiple_of(2)
}

/// The znode of `key`.
pub fn path(key: Key) -> String {
    format!("/k{}", key.0)
}

/// The key of the znode at `path`, if it is the workload's.
pub fn key_of_path(path: &str) -> Option<Key> {
    path.strip_prefix("/k")?.parse().ok().map(Key)
}

/// The session a client's plain operations run in: one per client, with
/// ZooKeeper's longest timeout; opened again if it lapsed.
pub fn client_session(client: u64) -> i64 {
    (1 << 61) | i64::try_from(client).expect("client ids are small")
}

/// A ZooKeeper step of an operation, to read its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZkWrite {
    /// The session opens (or was open already).
    Session,
    /// `multi(delete, create)`: a put's (or leased put's) replacing form.
    Replace,
    /// `create`: a put's (or leased put's) creating form.
    Create,
    /// `create` for a compare-and-set of an absent key.
    CreateIfAbsent,
    /// `closeSession`: a revoke.
    Close,
}

fn zk_entry(session: i64, request: &Request) -> ZkEntry {
    ZkEntry {
        session,
        time_ms: 0,
        op: request.op(),
        body: request.encode(),
        auth: Vec::new(),
    }
}

/// The node no client ever creates: the batches' failing first write.
const ABSENT: &str = "/never";

/// A step as the log entry a member makes of it: alone, or (odd clients)
/// batched behind a write that fails.
fn entry(client: u64, session: i64, request: &Request, write: ZkWrite) -> (Vec<u8>, Write) {
    if client.is_multiple_of(2) {
        let alone = EtcdCommand::ZooKeeper(zk_entry(session, request));
        return (alone.encode(), Write::Zk(write));
    }
    let failing = Request::Delete {
        path: ABSENT.into(),
        version: -1,
    };
    let batch = ZkBatch {
        entries: vec![zk_entry(session, &failing), zk_entry(session, request)],
    };
    (
        EtcdCommand::ZooKeeperBatch(batch).encode(),
        Write::ZkBatched(write),
    )
}

fn create(key: Key, value: Value, flags: i32) -> Request {
    Request::Create(Create {
        op: op::CREATE,
        path: path(key),
        data: Some(value.0.to_le_bytes().to_vec()),
        acl: vec![Acl::open()],
        flags,
        ttl: 0,
    })
}

/// The session an operation runs in.
fn session_of(client: u64, command: Command) -> i64 {
    match command {
        Command::LeasedPut { value, .. } => lease_id(value),
        _ => client_session(client),
    }
}

/// The first step of `command` by `client`: opening its session (a
/// revoke closes its lease's session at once).
pub fn first_entry(client: u64, command: Command) -> (Vec<u8>, ZkWrite) {
    if let Command::Revoke { lease, .. } = command {
        let close = EtcdCommand::ZooKeeper(ZkEntry {
            session: lease_id(lease),
            time_ms: 0,
            op: op::CLOSE_SESSION,
            body: Vec::new(),
            auth: Vec::new(),
        });
        return (close.encode(), ZkWrite::Close);
    }
    let timeout_ms = match command {
        Command::LeasedPut { .. } => bellwether_zookeeper::tree::SESSION_TIMEOUT_MS_MIN,
        _ => bellwether_zookeeper::tree::SESSION_TIMEOUT_MS_MAX,
    };
    let record = SessionRecord {
        timeout_ms,
        password: vec![0; 16],
    };
    let open = EtcdCommand::ZooKeeper(ZkEntry {
        session: session_of(client, command),
        time_ms: 0,
        op: op::CREATE_SESSION,
        body: prost::Message::encode_to_vec(&record),
        auth: Vec::new(),
    });
    (open.encode(), ZkWrite::Session)
}

/// The step of `command` once its session is open; `attempt` picks a
/// put's form (the other one on every retry).
pub fn op_entry(client: u64, command: Command, attempt: u32) -> (Vec<u8>, Write) {
    let session = session_of(client, command);
    let (key, value, flags) = match command {
        Command::Put { key, value } => (key, value, create_mode::PERSISTENT),
        Command::LeasedPut { key, value } => (key, value, create_mode::EPHEMERAL),
        Command::CompareAndSet {
            key,
            expected: None,
            new,
        } => {
            let request = create(key, new, create_mode::PERSISTENT);
            return entry(client, session, &request, ZkWrite::CreateIfAbsent);
        }
        other => panic!("{other:?} has no ZooKeeper step after its session"),
    };
    if attempt.is_multiple_of(2) {
        let replace = Request::Multi(vec![
            Request::Delete {
                path: path(key),
                version: -1,
            },
            create(key, value, flags),
        ]);
        entry(client, session, &replace, ZkWrite::Replace)
    } else {
        entry(client, session, &create(key, value, flags), ZkWrite::Create)
    }
}

/// The refusal that sends a client to its put's other form.
fn other_form() -> Outcome {
    Outcome::Refused(Refusal {
        code: Code::Aborted,
        message: "zookeeper: this form does not fit; the other will".into(),
    })
}

/// The refusal of a step whose session is gone.
fn session_gone() -> Outcome {
    Outcome::Refused(Refusal {
        code: Code::NotFound,
        message: "zookeeper: the session expired".into(),
    })
}

/// Reads a ZooKeeper answer to `write`.
pub fn outcome(write: ZkWrite, answer: &[u8]) -> Outcome {
    let Some((_, err, record)) = read_answer(answer) else {
        return Outcome::Refused(Refusal {
            code: Code::Internal,
            message: "not a ZooKeeper answer".into(),
        });
    };
    let code = |e: ErrorCode| e.code();
    let done = match write {
        ZkWrite::CreateIfAbsent => Response::CompareAndSet(true),
        _ => Response::Put,
    };
    match write {
        // A session open already is as good for the step that follows;
        // its lease then lives on as granted.
        ZkWrite::Session if err == code(ErrorCode::Ok) || err == code(ErrorCode::SystemError) => {
            Outcome::Granted
        }
        ZkWrite::Close if err == code(ErrorCode::Ok) => Outcome::Done(Response::Revoked),
        ZkWrite::CreateIfAbsent if err == code(ErrorCode::Ok) => Outcome::Done(done),
        ZkWrite::CreateIfAbsent if err == code(ErrorCode::NodeExists) => {
            Outcome::Done(Response::CompareAndSet(false))
        }
        ZkWrite::Create if err == code(ErrorCode::Ok) => Outcome::Done(done),
        ZkWrite::Create if err == code(ErrorCode::NodeExists) => other_form(),
        ZkWrite::Replace if err == code(ErrorCode::Ok) => match first_multi_error(record) {
            None => Outcome::Done(done),
            Some(e) if e == code(ErrorCode::NoNode) => other_form(),
            Some(e) if e == code(ErrorCode::SessionExpired) => session_gone(),
            Some(e) => unexpected(write, e),
        },
        _ if err == code(ErrorCode::SessionExpired) => session_gone(),
        _ => unexpected(write, err),
    }
}

/// Reads the answer to a batch made by [`entry`]: its failing first write
/// must have failed as it always does, and the step's answer is the last.
pub fn batch_outcome(write: ZkWrite, answer: &[u8]) -> Outcome {
    let malformed = |what: String| {
        Outcome::Refused(Refusal {
            code: Code::Internal,
            message: format!("zookeeper batch: {what}"),
        })
    };
    let Ok(batch) = <ZkBatchAnswer as prost::Message>::decode(answer) else {
        return malformed("not a batch answer".into());
    };
    let [first, step] = batch.answers.as_slice() else {
        return malformed(format!("{} answers to 2 writes", batch.answers.len()));
    };
    // NoNode as a rule; a session gone or an alarm fails it otherwise.
    // It must never succeed: nothing is there to delete.
    match read_answer(first) {
        Some((_, err, _)) if err != ErrorCode::Ok.code() => outcome(write, step),
        other => malformed(format!("the delete of {ABSENT} answered {other:?}")),
    }
}

fn unexpected(write: ZkWrite, err: i32) -> Outcome {
    Outcome::Refused(Refusal {
        code: Code::Unknown,
        message: format!("zookeeper: {write:?} answered error {err}"),
    })
}

/// The first failing result of a multi's answer, if one failed.
fn first_multi_error(record: &[u8]) -> Option<i32> {
    let mut r = JuteReader::new(record);
    loop {
        let (kind, done, err) = (r.int().ok()?, r.bool().ok()?, r.int().ok()?);
        if done {
            return None;
        }
        if kind == op::ERROR {
            let _body = r.int().ok()?;
            if err != 0 {
                return Some(err);
            }
            continue;
        }
        // A success: skip its record (a create's path, or nothing).
        match kind {
            op::CREATE => {
                r.text().ok()?;
            }
            op::DELETE | op::CHECK => {}
            _ => return Some(code_unknown()),
        }
    }
}

fn code_unknown() -> i32 {
    ErrorCode::SystemError.code()
}

/// The value of the znode of `key` in `store`.
pub fn read(store: &bellwether_kv::KvStore, key: Key) -> Option<Value> {
    let node = bellwether_zookeeper::tree::read_node(store, &path(key))?;
    let bytes: [u8; 8] = node.data.as_slice().try_into().expect("values are 8 bytes");
    Some(Value(u64::from_le_bytes(bytes)))
}

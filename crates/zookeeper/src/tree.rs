//! ZooKeeper's writes, applied to the znodes kept in the kv store.
//!
//! A write is decided on an overlay of the nodes it touches, then lands as
//! one kv revision: that revision is its zxid, and the nodes it stamps carry
//! it. A multi runs its operations one after the other on the same overlay,
//! so each sees the ones before it; if any fails, the overlay is dropped and
//! nothing lands.
//!
//! Every member applies the same entries to the same store and reaches the
//! same tree: nothing here reads a clock (the entry carries its time) or
//! iterates an unordered map.

use crate::acl::{allowed, fix_acl, perms, AuthId};
use crate::codes::{create_mode, op, ErrorCode};
use crate::entry::{answer, SessionRecord, ZkEntry};
use crate::jute::JuteWriter;
use crate::request::{Create, Request};
use crate::stat::Stat;
use crate::znode::{
    invalid_path, node_key, path_of, reap_key, session_key, split, Znode, NODE_PREFIX, REAP_PREFIX,
};
use bellwether_kv::{KvStore, PutRequest};
use prost::Message;
use std::collections::BTreeMap;

/// What a ZooKeeper entry changed of the leases (sessions are leases), for
/// the leader's lease clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseChange {
    /// A session began: its lease was granted.
    Granted {
        /// The session (and lease) id.
        id: i64,
        /// The lease's TTL.
        ttl_seconds: i64,
    },
    /// A session was closed by its client: its lease was revoked.
    Revoked {
        /// The session (and lease) id.
        id: i64,
        /// The lease existed until now.
        existed: bool,
    },
}

/// The answer to an entry and what it changed of the leases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The reply header's zxid and error, then the record.
    pub answer: Vec<u8>,
    /// The lease change, if any.
    pub lease: Option<LeaseChange>,
}

/// The session timeout's bounds, as ZooKeeper's defaults with a tick of 2 s:
/// twice and twenty times the tick.
pub const SESSION_TIMEOUT_MS_MIN: i32 = 4_000;
/// See [`SESSION_TIMEOUT_MS_MIN`].
pub const SESSION_TIMEOUT_MS_MAX: i32 = 40_000;

/// The TTL of a session's lease: its timeout, rounded up to whole seconds.
pub fn session_ttl_seconds(timeout_ms: i32) -> i64 {
    (i64::from(timeout_ms) + 999) / 1000
}

/// A deliberate fault in the tree, for the simulator's tests that show its
/// checkers catch a wrong state machine. The server never sets one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeMutation {
    /// BROKEN: a create of a node that exists replaces it instead of
    /// failing with NODEEXISTS.
    CreateOverwrites,
}

/// Applies one logged ZooKeeper entry.
pub fn apply(store: &mut KvStore, entry: &ZkEntry) -> Applied {
    apply_mutated(store, entry, None)
}

/// [`apply`], broken on purpose as `mutation` says.
pub fn apply_mutated(
    store: &mut KvStore,
    entry: &ZkEntry,
    mutation: Option<TreeMutation>,
) -> Applied {
    match entry.op {
        op::CREATE_SESSION => create_session(store, entry),
        op::CLOSE_SESSION => close_session(store, entry.session),
        op::DELETE_CONTAINER => reap(store, entry),
        op::RECONFIG => reconfigure(store, entry),
        code => {
            if !session_alive(store, entry.session) {
                return refused(store, ErrorCode::SessionExpired);
            }
            match Request::decode(code, &entry.body) {
                Ok(Request::Multi(ops)) => multi(store, entry, &ops, mutation),
                Ok(request) if request.is_write() => single(store, entry, &request, mutation),
                Ok(_) => refused(store, ErrorCode::BadArguments),
                Err(_) => refused(store, ErrorCode::MarshallingError),
            }
        }
    }
}

/// A refusal: nothing changed.
fn refused(store: &KvStore, code: ErrorCode) -> Applied {
    Applied {
        answer: answer(store.revision(), code.code(), &[]),
        lease: None,
    }
}

/// Whether session `id` is open.
pub fn session_alive(store: &KvStore, id: i64) -> bool {
    id != 0 && store.get(&session_key(id)).is_some()
}

/// Session `id`'s record, if it is open.
pub fn session(store: &KvStore, id: i64) -> Option<SessionRecord> {
    let kv = store.get(&session_key(id))?;
    Some(SessionRecord::decode(kv.value.as_slice()).expect("session records we wrote decode"))
}

fn create_session(store: &mut KvStore, entry: &ZkEntry) -> Applied {
    let Ok(record) = SessionRecord::decode(entry.body.as_slice()) else {
        return refused(store, ErrorCode::MarshallingError);
    };
    assert!(
        (SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&record.timeout_ms),
        "a session's timeout is negotiated before it is logged"
    );
    let ttl = session_ttl_seconds(record.timeout_ms);
    let granted = match store.lease_grant(entry.session, ttl) {
        Ok(granted) => granted,
        // An id taken already: the member that proposed it retries another.
        Err(_) => return refused(store, ErrorCode::SystemError),
    };
    let put = PutRequest {
        key: session_key(entry.session),
        value: record.encode_to_vec(),
        lease: entry.session,
        ..PutRequest::default()
    };
    let zxid = store
        .write_batch(&[put], &[])
        .expect("a put under a lease just granted is valid");
    Applied {
        answer: answer(zxid, ErrorCode::Ok.code(), &[]),
        lease: Some(LeaseChange::Granted {
            id: entry.session,
            ttl_seconds: granted,
        }),
    }
}

fn close_session(store: &mut KvStore, id: i64) -> Applied {
    end_session(store, id);
    let existed = store.lease_revoke(id).is_ok();
    Applied {
        answer: answer(store.revision(), ErrorCode::Ok.code(), &[]),
        lease: Some(LeaseChange::Revoked { id, existed }),
    }
}

/// Ends session `id` if it is a ZooKeeper session: its ephemeral nodes and
/// its record go in one revision, with their parents' child counts and
/// pzxid, as ZooKeeper's session close does. Called before the session's
/// lease is revoked, however that comes (closed, expired, or an etcd
/// client's revoke), so the revoke finds no keys left. Returns whether it
/// was one.
pub fn end_session(store: &mut KvStore, id: i64) -> bool {
    if !session_alive(store, id) {
        return false;
    }
    let keys = store.lease_keys(id).unwrap_or_default();
    let zxid = store.revision() + 1;
    let mut overlay = Overlay::new(store, zxid, 0, id, &[]);
    for path in keys.iter().filter_map(|key| path_of(key)) {
        overlay
            .remove(&path)
            .expect("an ephemeral node has no children and a parent");
    }
    let (puts, mut deletes) = overlay.into_writes();
    deletes.push(session_key(id));
    let revision = store
        .write_batch(&puts, &deletes)
        .expect("a session's end only deletes and rewrites parents");
    assert_eq!(revision, zxid, "a session ends in one revision");
    true
}

/// The longest TTL a node may have, as ZooKeeper bounds it (40 bits of ms).
pub const TTL_MS_MAX: i64 = (1 << 40) - 1;

/// The container and TTL nodes due for deletion at `now_ms`, for the
/// leader to log a deletion of each (found through their index, so the
/// cost is theirs alone).
pub fn due_nodes(store: &KvStore, now_ms: i64) -> Vec<String> {
    let range = bellwether_kv::KeyRange::prefix(REAP_PREFIX.to_vec());
    let request = bellwether_kv::RangeRequest {
        key: range.key,
        range_end: range.range_end,
        keys_only: true,
        ..Default::default()
    };
    let listed = store.range(&request).map(|r| r.kvs).unwrap_or_default();
    listed
        .iter()
        .filter_map(|kv| std::str::from_utf8(&kv.key[REAP_PREFIX.len()..]).ok())
        .filter(|path| read_node(store, path).is_some_and(|node| node.due(now_ms)))
        .map(str::to_string)
        .collect()
}

/// Deletes the node the entry names if it is due at the entry's time:
/// checked again here, so every member decides alike whatever happened
/// to the node since the leader looked.
fn reap(store: &mut KvStore, entry: &ZkEntry) -> Applied {
    let path = match crate::jute::JuteReader::new(&entry.body).text() {
        Ok(path) if invalid_path(&path).is_none() && path != "/" => path,
        _ => return refused(store, ErrorCode::BadArguments),
    };
    match read_node(store, &path) {
        Some(node) if node.reapable() && node.due(entry.time_ms) => {}
        Some(_) => return refused(store, ErrorCode::NotEmpty),
        None => return refused(store, ErrorCode::NoNode),
    }
    let zxid = store.revision() + 1;
    let mut overlay = Overlay::new(store, zxid, entry.time_ms, 0, &[]);
    overlay.remove(&path).expect("a due node has no children");
    let writes = overlay.into_writes();
    let zxid = commit(store, writes, zxid);
    Applied {
        answer: answer(zxid, ErrorCode::Ok.code(), &[]),
        lease: None,
    }
}

/// Sets `/zookeeper/config` to the members the entry lists (one
/// `server.N=...` line each, as [`crate::config::ensemble_lines`] writes
/// them), followed by `version=` and this write's zxid in hex, as
/// ZooKeeper's reconfig stamps it. Like ZooKeeper's, the node keeps
/// version -1; its mzxid and mtime move, so its watches fire. An entry
/// that would change nothing is answered, and changes nothing.
fn reconfigure(store: &mut KvStore, entry: &ZkEntry) -> Applied {
    let lines = match crate::jute::JuteReader::new(&entry.body).text() {
        Ok(lines) if crate::config::valid_lines(&lines) => lines,
        _ => return refused(store, ErrorCode::BadArguments),
    };
    let path = crate::config::CONFIG_PATH;
    let mut node = read_node(store, path).expect("the config node always exists");
    if crate::config::lines_of(&node.data) == lines {
        return refused(store, ErrorCode::Ok);
    }
    let zxid = store.revision() + 1;
    node.data = crate::config::data(&lines, zxid);
    node.data_null = false;
    node.mzxid = zxid;
    node.mtime = entry.time_ms;
    let mut overlay = Overlay::new(store, zxid, entry.time_ms, 0, &[]);
    overlay.set(path, Some(node));
    let writes = overlay.into_writes();
    let zxid = commit(store, writes, zxid);
    Applied {
        answer: answer(zxid, ErrorCode::Ok.code(), &[]),
        lease: None,
    }
}

fn single(
    store: &mut KvStore,
    entry: &ZkEntry,
    request: &Request,
    mutation: Option<TreeMutation>,
) -> Applied {
    let zxid = store.revision() + 1;
    let mut overlay = Overlay::new(store, zxid, entry.time_ms, entry.session, &entry.auth);
    overlay.mutation = mutation;
    match overlay.run(request) {
        Ok(done) => {
            let writes = overlay.into_writes();
            let zxid = commit(store, writes, zxid);
            let mut w = JuteWriter::new();
            done.write_record(&mut w);
            Applied {
                answer: answer(zxid, ErrorCode::Ok.code(), &w.into_bytes()),
                lease: None,
            }
        }
        Err(code) => refused(store, code),
    }
}

fn multi(
    store: &mut KvStore,
    entry: &ZkEntry,
    ops: &[Request],
    mutation: Option<TreeMutation>,
) -> Applied {
    let zxid = store.revision() + 1;
    let mut overlay = Overlay::new(store, zxid, entry.time_ms, entry.session, &entry.auth);
    overlay.mutation = mutation;
    let mut results = Vec::with_capacity(ops.len());
    let mut failed = None;
    for (index, request) in ops.iter().enumerate() {
        let done = if request.is_write() && !matches!(request, Request::Multi(_)) {
            overlay.run(request)
        } else {
            Err(ErrorCode::BadArguments)
        };
        match done {
            Ok(done) => results.push(done),
            Err(code) => {
                failed = Some((index, code));
                break;
            }
        }
    }
    let mut w = JuteWriter::new();
    let (zxid, err) = match failed {
        None => {
            let writes = overlay.into_writes();
            let zxid = commit(store, writes, zxid);
            for done in &results {
                // ZooKeeper 3.8 answers every create in a multi (create2,
                // container and TTL ones too) as a plain create: its path,
                // no stat (ZOOKEEPER-4026); clients expect exactly that.
                let done = match done {
                    Done::Created { path, stat, .. } => Done::Created {
                        op: op::CREATE,
                        path: path.clone(),
                        stat: *stat,
                    },
                    other => other.clone(),
                };
                w.int(done.op_code()).bool(false).int(0);
                done.write_record(&mut w);
            }
            (zxid, ErrorCode::Ok)
        }
        Some((failed_at, code)) => {
            // ZooKeeper's answer to a failed multi: the operations before
            // the failure say OK, the failing one its error, the ones after
            // it RUNTIMEINCONSISTENCY; each as an error result.
            for index in 0..ops.len() {
                let err = match index.cmp(&failed_at) {
                    std::cmp::Ordering::Less => ErrorCode::Ok,
                    std::cmp::Ordering::Equal => code,
                    std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
                };
                w.int(op::ERROR).bool(false).int(err.code()).int(err.code());
            }
            // The reply itself succeeds: clients read the failure from
            // the results.
            (store.revision(), ErrorCode::Ok)
        }
    };
    w.int(-1).bool(true).int(-1);
    Applied {
        answer: answer(zxid, err.code(), &w.into_bytes()),
        lease: None,
    }
}

/// Lands an overlay's writes as one revision, which must be `zxid` if it
/// writes anything (the nodes it stamps say so).
fn commit(store: &mut KvStore, writes: (Vec<PutRequest>, Vec<Vec<u8>>), zxid: i64) -> i64 {
    let (puts, deletes) = writes;
    if puts.is_empty() && deletes.is_empty() {
        return store.revision();
    }
    let revision = store
        .write_batch(&puts, &deletes)
        .expect("a decided write's keys and leases are valid");
    assert_eq!(revision, zxid, "a ZooKeeper write is one revision");
    revision
}

/// What one operation did, for its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Done {
    /// A create: the node's path (a sequential one's with its suffix) and stat.
    Created { op: i32, path: String, stat: Stat },
    /// A delete.
    Deleted,
    /// A setData: the node's new stat.
    DataSet(Stat),
    /// A setACL: the node's new stat.
    AclSet(Stat),
    /// A check.
    Checked,
}

impl Done {
    fn op_code(&self) -> i32 {
        match self {
            Done::Created { op, .. } => match *op {
                op::CREATE => op::CREATE,
                _ => op::CREATE2,
            },
            Done::Deleted => op::DELETE,
            Done::DataSet(_) => op::SET_DATA,
            Done::AclSet(_) => op::SET_ACL,
            Done::Checked => op::CHECK,
        }
    }

    fn write_record(&self, w: &mut JuteWriter) {
        match self {
            Done::Created { op, path, stat } => {
                w.string(path);
                if *op != op::CREATE {
                    stat.write(w);
                }
            }
            Done::DataSet(stat) | Done::AclSet(stat) => stat.write(w),
            Done::Deleted | Done::Checked => {}
        }
    }
}

/// The nodes a write touches, over the store's.
struct Overlay<'s> {
    store: &'s KvStore,
    /// The caller's ids, for the nodes' ACLs.
    ids: &'s [AuthId],
    /// Touched nodes by path: `None` once deleted.
    changed: BTreeMap<String, Option<Znode>>,
    zxid: i64,
    time_ms: i64,
    session: i64,
    mutation: Option<TreeMutation>,
}

/// ZooKeeper's version check: -1 matches any version.
fn version_matches(expected: i32, actual: i32) -> bool {
    expected == -1 || expected == actual
}

fn check_path(path: &str) -> Result<(), ErrorCode> {
    match invalid_path(path) {
        Some(_) => Err(ErrorCode::BadArguments),
        None => Ok(()),
    }
}

/// The node at `path` in `store`, if any (the system nodes always exist:
/// see [`crate::znode::SYSTEM_PATHS`]).
pub fn read_node(store: &KvStore, path: &str) -> Option<Znode> {
    match store.get(&node_key(path)) {
        Some(kv) => Some(Znode::decode(kv.value.as_slice()).expect("znodes we wrote decode")),
        None => Znode::system(path),
    }
}

impl<'s> Overlay<'s> {
    fn new(store: &'s KvStore, zxid: i64, time_ms: i64, session: i64, ids: &'s [AuthId]) -> Self {
        Overlay {
            store,
            ids,
            changed: BTreeMap::new(),
            zxid,
            time_ms,
            session,
            mutation: None,
        }
    }

    fn get(&self, path: &str) -> Option<Znode> {
        match self.changed.get(path) {
            Some(node) => node.clone(),
            None => read_node(self.store, path),
        }
    }

    /// NOAUTH unless the caller may do `perm` on `node`.
    fn may(&self, node: &Znode, perm: i32) -> Result<(), ErrorCode> {
        if allowed(&node.acl, perm, self.ids) {
            Ok(())
        } else {
            Err(ErrorCode::NoAuth)
        }
    }

    fn set(&mut self, path: &str, node: Option<Znode>) {
        self.changed.insert(path.to_string(), node);
    }

    /// The puts and deletes that land the overlay.
    fn into_writes(self) -> (Vec<PutRequest>, Vec<Vec<u8>>) {
        let mut puts = Vec::new();
        let mut deletes = Vec::new();
        for (path, node) in self.changed {
            let key = node_key(&path);
            let indexed = self.store.get(&reap_key(&path)).is_some();
            match node {
                Some(node) => {
                    if node.reapable() && !indexed {
                        puts.push(PutRequest::new(reap_key(&path), Vec::new()));
                    }
                    puts.push(PutRequest {
                        key,
                        lease: node.ephemeral_owner,
                        value: node.encode_to_vec(),
                        ..PutRequest::default()
                    });
                }
                None => {
                    if indexed {
                        deletes.push(reap_key(&path));
                    }
                    if self.store.get(&key).is_some() {
                        deletes.push(key);
                    }
                    // Otherwise created and deleted within one multi:
                    // nothing to land.
                }
            }
        }
        (puts, deletes)
    }

    fn run(&mut self, request: &Request) -> Result<Done, ErrorCode> {
        match request {
            Request::Create(create) => self.create(create),
            Request::Delete { path, version } => {
                check_path(path)?;
                if crate::znode::SYSTEM_PATHS.contains(&path.as_str()) {
                    return Err(ErrorCode::BadArguments);
                }
                let parent = self.get(split(path).0).ok_or(ErrorCode::NoNode)?;
                let node = self.get(path).ok_or(ErrorCode::NoNode)?;
                self.may(&parent, perms::DELETE)?;
                if !version_matches(*version, node.version) {
                    return Err(ErrorCode::BadVersion);
                }
                if node.num_children > 0 {
                    return Err(ErrorCode::NotEmpty);
                }
                self.remove(path)?;
                Ok(Done::Deleted)
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                check_path(path)?;
                let mut node = self.get(path).ok_or(ErrorCode::NoNode)?;
                self.may(&node, perms::WRITE)?;
                if !version_matches(*version, node.version) {
                    return Err(ErrorCode::BadVersion);
                }
                node.version += 1;
                node.mzxid = self.zxid;
                node.mtime = self.time_ms;
                node.data = data.clone().unwrap_or_default();
                node.data_null = data.is_none();
                let stat = node.stat();
                self.set(path, Some(node));
                Ok(Done::DataSet(stat))
            }
            Request::SetAcl { path, acl, version } => {
                check_path(path)?;
                let acl = fix_acl(acl, self.ids)?;
                let mut node = self.get(path).ok_or(ErrorCode::NoNode)?;
                self.may(&node, perms::ADMIN)?;
                if !version_matches(*version, node.aversion) {
                    return Err(ErrorCode::BadVersion);
                }
                node.aversion += 1;
                node.acl = acl;
                let stat = node.stat();
                self.set(path, Some(node));
                Ok(Done::AclSet(stat))
            }
            Request::Check { path, version } => {
                check_path(path)?;
                let node = self.get(path).ok_or(ErrorCode::NoNode)?;
                self.may(&node, perms::READ)?;
                if !version_matches(*version, node.version) {
                    return Err(ErrorCode::BadVersion);
                }
                Ok(Done::Checked)
            }
            _ => Err(ErrorCode::BadArguments),
        }
    }

    fn create(&mut self, create: &Create) -> Result<Done, ErrorCode> {
        let flags = create.flags;
        let ttl_flags = matches!(
            flags,
            create_mode::PERSISTENT_WITH_TTL | create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL
        );
        match (create.op, flags) {
            (op::CREATE_TTL, _) if ttl_flags && (1..=TTL_MS_MAX).contains(&create.ttl) => {}
            (op::CREATE_TTL, _) => return Err(ErrorCode::BadArguments),
            (_, _) if ttl_flags => return Err(ErrorCode::BadArguments),
            (op::CREATE_CONTAINER, create_mode::CONTAINER) => {}
            (op::CREATE_CONTAINER, _) | (_, create_mode::CONTAINER) => {
                return Err(ErrorCode::BadArguments)
            }
            (_, 0..=3) => {}
            _ => return Err(ErrorCode::BadArguments),
        }
        if !create.path.starts_with('/') || create.path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        if create.path == "/" {
            return Err(ErrorCode::NodeExists);
        }
        // In ZooKeeper's order: the ACL, the parent, the permission, the
        // name, then what the name may not be.
        let acl = fix_acl(&create.acl, self.ids)?;
        let (parent_path, _) = split(&create.path);
        let parent_path = parent_path.to_string();
        let mut parent = self.get(&parent_path).ok_or(ErrorCode::NoNode)?;
        self.may(&parent, perms::CREATE)?;
        let path = if create.sequential() {
            format!("{}{:010}", create.path, parent.cversion)
        } else {
            create.path.clone()
        };
        check_path(&path)?;
        let overwrites = self.mutation == Some(TreeMutation::CreateOverwrites);
        if self.get(&path).is_some() && !overwrites {
            return Err(ErrorCode::NodeExists);
        }
        if parent.ephemeral_owner != 0 {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let node = Znode {
            czxid: self.zxid,
            mzxid: self.zxid,
            pzxid: self.zxid,
            ctime: self.time_ms,
            mtime: self.time_ms,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: if create.ephemeral() { self.session } else { 0 },
            num_children: 0,
            container: flags == create_mode::CONTAINER,
            acl,
            data: create.data.clone().unwrap_or_default(),
            ttl_ms: if ttl_flags { create.ttl } else { 0 },
            data_null: create.data.is_none(),
        };
        let stat = node.stat();
        parent.cversion += 1;
        parent.num_children += 1;
        parent.pzxid = self.zxid;
        self.set(&parent_path, Some(parent));
        self.set(&path, Some(node));
        Ok(Done::Created {
            op: create.op,
            path,
            stat,
        })
    }

    /// Deletes the childless node at `path` and counts it off its parent.
    fn remove(&mut self, path: &str) -> Result<(), ErrorCode> {
        let node = self.get(path).ok_or(ErrorCode::NoNode)?;
        assert_eq!(node.num_children, 0, "only a childless node is removed");
        let (parent_path, _) = split(path);
        let parent_path = parent_path.to_string();
        let mut parent = self
            .get(&parent_path)
            .expect("every node but the root has a parent");
        // ZooKeeper counts only creates: the next sequential name goes on
        // from the last one even when children are deleted.
        parent.num_children -= 1;
        assert!(parent.num_children >= 0, "a parent counts its children");
        parent.pzxid = self.zxid;
        self.set(&parent_path, Some(parent));
        self.set(path, None);
        Ok(())
    }
}

/// Whether `key` is a znode's (and not a session record's or an etcd key).
pub fn is_node_key(key: &[u8]) -> bool {
    key.starts_with(NODE_PREFIX)
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;

//! What the dashboard shows of the ZooKeeper side: the open sessions and
//! the elections run with ZooKeeper's recipe (ephemeral-sequential
//! children of one parent, the lowest sequence number leads).
//!
//! Read from a member's store, so every member shows the same once it has
//! applied the same. Both reads are bounded ([`SESSIONS_SHOWN_MAX`],
//! [`NODES_SCANNED_MAX`]): a store with more says so (`truncated`) instead
//! of taking the member's store lock for long.

use crate::entry::SessionRecord;
use crate::znode::{path_of, split, Znode, NODE_PREFIX, SESSION_PREFIX};
use bellwether_kv::{KeyRange, KvStore, RangeRequest};
use prost::Message;
use serde::Serialize;
use std::collections::BTreeMap;

/// Most sessions listed.
pub const SESSIONS_SHOWN_MAX: usize = 100;
/// Most znodes read to find ephemeral nodes and elections.
pub const NODES_SCANNED_MAX: usize = 20_000;
/// Most elections listed.
pub const ELECTIONS_SHOWN_MAX: usize = 64;
/// Digits of a sequential node's suffix.
const SEQUENCE_DIGITS: usize = 10;

/// One open session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionView {
    /// The session id as ZooKeeper's tools print it (`0x…`).
    pub id: String,
    /// The negotiated timeout.
    pub timeout_ms: i32,
    /// Ephemeral nodes it owns (among the nodes read).
    pub ephemerals: u64,
}

/// One election: a parent with ephemeral-sequential children.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ElectionView {
    /// The parent's path, e.g. `/election`.
    pub parent: String,
    /// The child with the lowest sequence number: the leader.
    pub holder: String,
    /// The holder's session (`0x…`).
    pub holder_session: String,
    /// When the holder's node was created (ms since the epoch).
    pub holder_since_ms: i64,
    /// Ephemeral-sequential children: the holder and those waiting.
    pub contenders: u64,
}

/// The dashboard's view.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Overview {
    /// Sessions open in the store.
    pub sessions_total: u64,
    /// The first [`SESSIONS_SHOWN_MAX`] of them, by id.
    pub sessions: Vec<SessionView>,
    /// Elections found, by parent path.
    pub elections: Vec<ElectionView>,
    /// Whether a bound left sessions, nodes or elections out.
    pub truncated: bool,
}

/// The overview of `store`'s ZooKeeper tree.
pub fn overview(store: &KvStore) -> Overview {
    let (nodes, nodes_cut) = scan(store, NODE_PREFIX, NODES_SCANNED_MAX);
    let mut ephemerals: BTreeMap<i64, u64> = BTreeMap::new();
    // parent -> (lowest sequence, its name, its node), contenders
    let mut elections: BTreeMap<String, ((u64, String, Znode), u64)> = BTreeMap::new();
    for (key, value) in nodes {
        let (Some(path), Ok(node)) = (path_of(&key), Znode::decode(value.as_slice())) else {
            continue;
        };
        if node.ephemeral_owner == 0 || path == "/" {
            continue;
        }
        *ephemerals.entry(node.ephemeral_owner).or_default() += 1;
        let (parent, name) = split(&path);
        let Some(sequence) = sequence_of(name) else {
            continue;
        };
        let candidate = (sequence, name.to_string(), node);
        match elections.get_mut(parent) {
            Some((lowest, contenders)) => {
                *contenders += 1;
                if candidate.0 < lowest.0 {
                    *lowest = candidate;
                }
            }
            None => {
                elections.insert(parent.to_string(), (candidate, 1));
            }
        }
    }
    let (records, sessions_cut) = scan(store, SESSION_PREFIX, SESSIONS_SHOWN_MAX);
    let sessions = records
        .into_iter()
        .filter_map(|(key, value)| {
            let id = i64::from_be_bytes(key.strip_prefix(SESSION_PREFIX)?.try_into().ok()?);
            let record = SessionRecord::decode(value.as_slice()).ok()?;
            Some(SessionView {
                id: hex(id),
                timeout_ms: record.timeout_ms,
                ephemerals: ephemerals.get(&id).copied().unwrap_or(0),
            })
        })
        .collect();
    let elections_cut = elections.len() > ELECTIONS_SHOWN_MAX;
    Overview {
        sessions_total: count(store, SESSION_PREFIX),
        sessions,
        elections: elections
            .into_iter()
            .take(ELECTIONS_SHOWN_MAX)
            .map(|(parent, ((_, holder, node), contenders))| ElectionView {
                parent,
                holder,
                holder_session: hex(node.ephemeral_owner),
                holder_since_ms: node.ctime,
                contenders,
            })
            .collect(),
        truncated: nodes_cut || sessions_cut || elections_cut,
    }
}

/// A sequential node's number: its name's last ten characters, digits.
fn sequence_of(name: &str) -> Option<u64> {
    let at = name.len().checked_sub(SEQUENCE_DIGITS)?;
    let digits = name.get(at..)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn hex(id: i64) -> String {
    format!("{id:#x}")
}

/// Keys with their values.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The first `limit` keys under `prefix` with their values, and whether
/// there were more.
fn scan(store: &KvStore, prefix: &[u8], limit: usize) -> (Pairs, bool) {
    let range = KeyRange::prefix(prefix.to_vec());
    let request = RangeRequest {
        key: range.key,
        range_end: range.range_end,
        limit: i64::try_from(limit).expect("small bound"),
        ..Default::default()
    };
    match store.range(&request) {
        Ok(response) => (
            response
                .kvs
                .into_iter()
                .map(|kv| (kv.key, kv.value))
                .collect(),
            response.more,
        ),
        Err(_) => (Vec::new(), true),
    }
}

fn count(store: &KvStore, prefix: &[u8]) -> u64 {
    let range = KeyRange::prefix(prefix.to_vec());
    let request = RangeRequest {
        key: range.key,
        range_end: range.range_end,
        count_only: true,
        ..Default::default()
    };
    store.range(&request).map_or(0, |r| r.count.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::{create_mode, op};
    use crate::request::Create;
    use crate::stat::Acl;
    use crate::{apply, Request, ZkEntry};

    fn entry(session: i64, op: i32, body: Vec<u8>) -> ZkEntry {
        ZkEntry {
            session,
            time_ms: 1000,
            op,
            body,
            auth: Vec::new(),
        }
    }

    fn open(store: &mut KvStore, session: i64) {
        let record = SessionRecord {
            timeout_ms: 6_000,
            password: vec![1; 16],
        };
        apply(
            store,
            &entry(session, op::CREATE_SESSION, record.encode_to_vec()),
        );
    }

    fn create(store: &mut KvStore, session: i64, path: &str, flags: i32) {
        let request = Request::Create(Create {
            op: op::CREATE,
            path: path.into(),
            data: Some(Vec::new()),
            acl: vec![Acl::open()],
            flags,
            ttl: 0,
        });
        let applied = apply(store, &entry(session, request.op(), request.encode()));
        let (_, err, _) = crate::entry::read_answer(&applied.answer).unwrap();
        assert_eq!(err, 0, "create {path}");
    }

    #[test]
    fn the_lowest_ephemeral_sequential_child_holds_each_election() {
        let mut store = KvStore::new();
        for session in [0x10, 0x20, 0x30] {
            open(&mut store, session);
        }
        create(&mut store, 0x10, "/election", create_mode::PERSISTENT);
        create(&mut store, 0x10, "/other", create_mode::PERSISTENT);
        // Sequence numbers 0, 1, 2 under /election; then the first holder
        // leaves and the second leads.
        for session in [0x20, 0x10, 0x30] {
            create(
                &mut store,
                session,
                "/election/n-",
                create_mode::EPHEMERAL_SEQUENTIAL,
            );
        }
        create(&mut store, 0x30, "/other/plain", create_mode::EPHEMERAL);
        let view = overview(&store);
        assert_eq!(view.sessions_total, 3);
        assert!(!view.truncated);
        let ephemerals: Vec<(String, u64)> = view
            .sessions
            .iter()
            .map(|s| (s.id.clone(), s.ephemerals))
            .collect();
        assert_eq!(
            ephemerals,
            [("0x10".into(), 1), ("0x20".into(), 1), ("0x30".into(), 2)]
        );
        assert_eq!(view.elections.len(), 1, "a plain ephemeral is no election");
        let election = &view.elections[0];
        assert_eq!(election.parent, "/election");
        assert_eq!(election.holder, "n-0000000000");
        assert_eq!(election.holder_session, "0x20");
        assert_eq!(election.contenders, 3);

        crate::end_session(&mut store, 0x20);
        let election = &overview(&store).elections[0];
        assert_eq!(
            (election.holder.as_str(), election.contenders),
            ("n-0000000001", 2)
        );
        assert_eq!(election.holder_session, "0x10");
    }

    #[test]
    fn sequence_numbers_are_the_last_ten_digits() {
        assert_eq!(sequence_of("n-0000000042"), Some(42));
        assert_eq!(sequence_of("0000000007"), Some(7));
        assert_eq!(sequence_of("lock"), None);
        assert_eq!(sequence_of("n-00000000x1"), None);
    }
}

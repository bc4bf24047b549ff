//! How a znode is kept in the kv store: one key per node, whose value is
//! the node's data and metadata.
//!
//! Why in the kv store: the znodes then share the etcd keyspace's log,
//! revisions, snapshots and restarts with nothing added, and a znode write
//! is one kv txn, so its zxid is the store's revision.
//!
//! Keys: a node's key is `NODE_PREFIX`, its parent's path ("" for the
//! root's children), a zero byte, then its name; the root is `NODE_PREFIX`
//! alone. So a node's children are exactly the keys that start with its
//! path and a zero byte, and listing them never walks grandchildren. A
//! path never holds a zero byte (ZooKeeper refuses it), so no two paths
//! share a key.

use crate::stat::{Acl, Stat};

/// The first bytes of every znode's key.
pub const NODE_PREFIX: &[u8] = b"\0zk/n";
/// The first bytes of every session record's key.
pub const SESSION_PREFIX: &[u8] = b"\0zk/s";
/// The first bytes of the index of container and TTL nodes, which the
/// leader looks through for nodes to delete (so it never scans the tree).
pub const REAP_PREFIX: &[u8] = b"\0zk/r";

/// A node as the store keeps it: everything in its stat but what is
/// computed (the data's length), plus its data and ACL.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Znode {
    /// The zxid that created it.
    #[prost(int64, tag = "1")]
    pub czxid: i64,
    /// The zxid that last changed its data.
    #[prost(int64, tag = "2")]
    pub mzxid: i64,
    /// The zxid that last changed its children.
    #[prost(int64, tag = "3")]
    pub pzxid: i64,
    /// Creation time (ms), as the proposing member stamped the entry.
    #[prost(int64, tag = "4")]
    pub ctime: i64,
    /// Last data change time (ms).
    #[prost(int64, tag = "5")]
    pub mtime: i64,
    /// Data changes.
    #[prost(int32, tag = "6")]
    pub version: i32,
    /// Children created: ZooKeeper's stored counter, which names the next
    /// sequential child. A client sees `2 × this − num_children`, which
    /// moves on every create and every delete of a child.
    #[prost(int32, tag = "7")]
    pub cversion: i32,
    /// ACL changes.
    #[prost(int32, tag = "8")]
    pub aversion: i32,
    /// The owning session of an ephemeral node; 0 otherwise.
    #[prost(int64, tag = "9")]
    pub ephemeral_owner: i64,
    /// Children.
    #[prost(int32, tag = "10")]
    pub num_children: i32,
    /// A container node (ZooKeeper deletes it once its last child goes).
    #[prost(bool, tag = "11")]
    pub container: bool,
    /// Its ACL.
    #[prost(message, repeated, tag = "12")]
    pub acl: Vec<Acl>,
    /// Its data.
    #[prost(bytes = "vec", tag = "13")]
    pub data: Vec<u8>,
    /// A TTL node's time to live (ms) once it has no children and no
    /// change; 0 for other nodes.
    #[prost(int64, tag = "14")]
    pub ttl_ms: i64,
    /// Whether the data is null rather than empty (`data` is then empty):
    /// ZooKeeper answers a node created or set with null data with null.
    #[prost(bool, tag = "15")]
    pub data_null: bool,
}

/// The nodes every ZooKeeper tree has from the start, as ZooKeeper 3.8
/// makes them: the root, `/zookeeper` and its children `quota` and
/// `config`. They are not stored until a write changes them; until then
/// [`Znode::system`] answers for them. None of them can be deleted.
pub const SYSTEM_PATHS: [&str; 4] = ["/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"];

impl Znode {
    /// The root as a new tree has it: its one child is `/zookeeper`.
    pub fn root() -> Znode {
        Znode::system("/").expect("the root is a system node")
    }

    /// A system node (see [`SYSTEM_PATHS`]) as a new tree has it: zxids and
    /// times 0, ZooKeeper's open ACL but for `/zookeeper/config`, which
    /// anyone may read and nobody change (its version and ACL version are
    /// -1, as ZooKeeper's). Its data is empty until the leader first
    /// writes the cluster's members there ([`crate::config`]).
    pub fn system(path: &str) -> Option<Znode> {
        let open = Znode {
            acl: vec![Acl::open()],
            ..Znode::default()
        };
        match path {
            "/" => Some(Znode {
                num_children: 1,
                ..open
            }),
            "/zookeeper" => Some(Znode {
                num_children: 2,
                ..open
            }),
            "/zookeeper/quota" => Some(open),
            "/zookeeper/config" => Some(Znode {
                version: -1,
                aversion: -1,
                acl: vec![Acl {
                    perms: crate::acl::perms::READ,
                    ..Acl::open()
                }],
                ..Znode::default()
            }),
            _ => None,
        }
    }

    /// The system nodes' names among `path`'s children, which listing
    /// the store does not show until they are written.
    pub fn system_children(path: &str) -> &'static [&'static str] {
        match path {
            "/" => &["zookeeper"],
            "/zookeeper" => &["config", "quota"],
            _ => &[],
        }
    }

    /// A node the leader deletes once it is due (see [`Znode::due`]).
    pub fn reapable(&self) -> bool {
        self.container || self.ttl_ms > 0
    }

    /// Whether this node is due for deletion at `now_ms`, as ZooKeeper's
    /// container manager decides: a container once it has had a child and
    /// has none left; a TTL node once it has no children and has not
    /// changed for its TTL.
    pub fn due(&self, now_ms: i64) -> bool {
        if self.num_children > 0 {
            return false;
        }
        (self.container && self.cversion > 0)
            || (self.ttl_ms > 0 && now_ms.saturating_sub(self.mtime) > self.ttl_ms)
    }

    /// The node's stat.
    pub fn stat(&self) -> Stat {
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.cversion * 2 - self.num_children,
            aversion: self.aversion,
            ephemeral_owner: self.ephemeral_owner,
            data_length: i32::try_from(self.data.len()).expect("znode data is under 2 GiB"),
            num_children: self.num_children,
            pzxid: self.pzxid,
        }
    }
}

/// The key of the node at `path` (a valid path).
pub fn node_key(path: &str) -> Vec<u8> {
    let mut key = NODE_PREFIX.to_vec();
    if path == "/" {
        return key;
    }
    let (parent, name) = split(path);
    if parent != "/" {
        key.extend_from_slice(parent.as_bytes());
    }
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key
}

/// The first key of `path`'s children; each child's key is this and its name.
pub fn children_prefix(path: &str) -> Vec<u8> {
    let mut key = NODE_PREFIX.to_vec();
    if path != "/" {
        key.extend_from_slice(path.as_bytes());
    }
    key.push(0);
    key
}

/// The first key of every node below `path` at any depth other than its
/// children: each such key starts with the path and a slash.
pub fn deeper_prefix(path: &str) -> Vec<u8> {
    let mut key = NODE_PREFIX.to_vec();
    if path != "/" {
        key.extend_from_slice(path.as_bytes());
    }
    key.push(b'/');
    key
}

/// The path of the node at `key`, if `key` is a znode's key.
pub fn path_of(key: &[u8]) -> Option<String> {
    let rest = key.strip_prefix(NODE_PREFIX)?;
    if rest.is_empty() {
        return Some("/".to_string());
    }
    let zero = rest.iter().position(|b| *b == 0)?;
    let parent = std::str::from_utf8(&rest[..zero]).ok()?;
    let name = std::str::from_utf8(&rest[zero + 1..]).ok()?;
    Some(format!("{parent}/{name}"))
}

/// The parent path and the last name of `path` (not the root).
pub fn split(path: &str) -> (&str, &str) {
    let slash = path.rfind('/').expect("a valid path starts with a slash");
    let parent = if slash == 0 { "/" } else { &path[..slash] };
    (parent, &path[slash + 1..])
}

/// The key of `path`'s entry in the index of reapable nodes.
pub fn reap_key(path: &str) -> Vec<u8> {
    let mut key = REAP_PREFIX.to_vec();
    key.extend_from_slice(path.as_bytes());
    key
}

/// The key of session `id`'s record.
pub fn session_key(id: i64) -> Vec<u8> {
    let mut key = SESSION_PREFIX.to_vec();
    key.extend_from_slice(&id.to_be_bytes());
    key
}

/// Why ZooKeeper would refuse `path`, if it would: it must start with a
/// slash; no name may be empty, "." or ".."; a zero byte and control or
/// private-use characters are refused, as ZooKeeper refuses them.
pub fn invalid_path(path: &str) -> Option<&'static str> {
    if !path.starts_with('/') {
        return Some("a path starts with /");
    }
    if path == "/" {
        return None;
    }
    if path.ends_with('/') {
        return Some("a path does not end with /");
    }
    for name in path[1..].split('/') {
        match name {
            "" => return Some("a path has no empty name"),
            "." | ".." => return Some("a path has no . or .. name"),
            _ => {}
        }
    }
    let refused = |c: char| {
        matches!(c,
            '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{e000}'..='\u{f8ff}'
            | '\u{fff0}'..='\u{ffff}')
    };
    if path.chars().any(refused) {
        return Some("a path holds a character ZooKeeper refuses");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_back_to_their_paths() {
        for path in ["/", "/a", "/a/b", "/a/b/c-0000000001"] {
            assert_eq!(path_of(&node_key(path)).as_deref(), Some(path));
        }
    }

    #[test]
    fn a_child_key_starts_with_the_children_prefix_and_a_grandchild_does_not() {
        let prefix = children_prefix("/a");
        assert!(node_key("/a/b").starts_with(&prefix));
        assert!(!node_key("/a/b/c").starts_with(&prefix));
        assert!(node_key("/a/b/c").starts_with(&deeper_prefix("/a")));
        assert!(node_key("/a").starts_with(&children_prefix("/")));
        assert!(!node_key("/ab").starts_with(&prefix));
        assert!(!node_key("/ab/c").starts_with(&deeper_prefix("/a")));
    }

    #[test]
    fn paths_are_checked_as_zookeeper_checks_them() {
        for good in ["/", "/a", "/a/b", "/a.b", "/ü"] {
            assert_eq!(invalid_path(good), None, "{good}");
        }
        for bad in [
            "", "a", "/a/", "//", "/a//b", "/.", "/a/..", "/a\u{0}b", "/\u{1}",
        ] {
            assert!(invalid_path(bad).is_some(), "{bad:?}");
        }
    }
}

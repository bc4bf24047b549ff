//! The store as etcd's backend file: the bolt database etcd keeps in
//! `member/snap/db` and streams for `etcdctl snapshot save`. Written by a
//! member's Snapshot call, so etcd's tools and servers take bellwether's
//! snapshots; read by `bellwether snapshot restore`, so etcd's snapshots
//! move into bellwether.
//!
//! The buckets and their encodings are etcd 3.4's:
//!
//! | bucket | key | value |
//! |---|---|---|
//! | `key` | revision: main (8, big-endian), `_`, sub (8); a delete adds `t` | `mvccpb.KeyValue` (a delete's holds only the key) |
//! | `meta` | `consistent_index`, `scheduledCompactRev`, `finishedCompactRev` | a u64, or a revision as above |
//! | `lease` | the id (8, big-endian) | `leasepb.Lease` |
//! | `auth` | `authEnabled`, `authRevision` | one byte; a u64 |
//! | `authUsers`, `authRoles` | the name | `authpb.User`, `authpb.Role` |
//! | `alarm` | `etcdserverpb.AlarmMember` | empty |
//! | `cluster` | `clusterVersion` | `3.4.0` |
//! | `members`, `members_removed` | | (written empty: a restore names new members) |
//!
//! One more bucket, `bellwether`, says which cluster a file came from;
//! etcd never reads it. Password hashes move as they are: etcd's are
//! bcrypt, and so are bellwether's (see the server's `credentials`).

use bellwether_api::authpb;
use bellwether_api::etcdserverpb::AlarmMember;
use bellwether_api::leasepb;
use bellwether_api::mvccpb;
use bellwether_bolt::{Bucket, Database};
use bellwether_kv::{
    Alarm, AlarmKind, AuthImage, ImageWrite, KeyPermission, KeyValue, Permission, StoreImage, User,
};
use prost::Message;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A revision key's size; a delete's is one byte longer (`t`).
const REVISION_KEY_BYTES: usize = 17;
/// The version etcd's `cluster` bucket names.
const CLUSTER_VERSION: &[u8] = b"3.4.0";

/// One key and value of a bucket, borrowed from the file.
type Record<'a> = (&'a [u8], &'a [u8]);

/// What a backend file holds, read back.
#[derive(Debug)]
pub struct BackendFile {
    /// The store's data, leases, alarms and auth.
    pub image: StoreImage,
    /// The bellwether cluster it was saved from; `None` for etcd's files.
    pub bellwether_cluster: Option<String>,
}

/// A revision key: main and sub revision, big-endian, around `_`.
fn revision_key(main: i64, sub: i64, delete: bool) -> Vec<u8> {
    let mut key = Vec::with_capacity(REVISION_KEY_BYTES + 1);
    key.extend_from_slice(&main.to_be_bytes());
    key.push(b'_');
    key.extend_from_slice(&sub.to_be_bytes());
    if delete {
        key.push(b't');
    }
    key
}

/// The buckets of a backend file holding `image`, saved from the
/// bellwether cluster `cluster` at Raft index `applied_index`.
pub fn buckets(image: &StoreImage, cluster: &str, applied_index: u64) -> Vec<Bucket> {
    let mut keys = Vec::with_capacity(image.writes.len());
    let mut sub = 0;
    let mut last = 0;
    for write in &image.writes {
        sub = if write.revision == last { sub + 1 } else { 0 };
        last = write.revision;
        let value = match &write.kv {
            Some(kv) => mvccpb::KeyValue {
                key: kv.key.clone(),
                create_revision: kv.create_revision,
                mod_revision: kv.mod_revision,
                version: kv.version,
                value: kv.value.clone(),
                lease: kv.lease,
            },
            None => mvccpb::KeyValue {
                key: write.key.clone(),
                ..Default::default()
            },
        };
        keys.push((
            revision_key(write.revision, sub, write.kv.is_none()),
            value.encode_to_vec(),
        ));
    }
    let mut meta = vec![(
        b"consistent_index".to_vec(),
        applied_index.to_be_bytes().to_vec(),
    )];
    if image.compact_revision > 0 {
        let at = revision_key(image.compact_revision, 0, false);
        meta.push((b"finishedCompactRev".to_vec(), at.clone()));
        meta.push((b"scheduledCompactRev".to_vec(), at));
    }
    meta.sort();
    let leases = image
        .leases
        .iter()
        .map(|(id, ttl)| {
            let lease = leasepb::Lease {
                id: *id,
                ttl: *ttl,
                remaining_ttl: 0,
            };
            (id.to_be_bytes().to_vec(), lease.encode_to_vec())
        })
        .collect();
    let mut alarms: Vec<(Vec<u8>, Vec<u8>)> = image
        .alarms
        .iter()
        .map(|alarm| {
            let member = AlarmMember {
                member_id: alarm.member_id,
                alarm: alarm.kind.number(),
            };
            (member.encode_to_vec(), Vec::new())
        })
        .collect();
    alarms.sort();
    let auth = &image.auth;
    let users = auth
        .users
        .iter()
        .map(|(name, user)| {
            let record = authpb::User {
                name: name.as_bytes().to_vec(),
                password: user.password.clone(),
                roles: user.roles.iter().cloned().collect(),
                options: Some(authpb::UserAddOptions {
                    no_password: user.password.is_empty(),
                }),
            };
            (name.as_bytes().to_vec(), record.encode_to_vec())
        })
        .collect();
    let roles = auth
        .roles
        .iter()
        .map(|(name, perms)| {
            let record = authpb::Role {
                name: name.as_bytes().to_vec(),
                key_permission: perms
                    .iter()
                    .map(|p| authpb::Permission {
                        perm_type: p.kind.number(),
                        key: p.key.clone(),
                        range_end: p.range_end.clone(),
                    })
                    .collect(),
            };
            (name.as_bytes().to_vec(), record.encode_to_vec())
        })
        .collect();
    let bucket = |name: &str, entries| Bucket {
        name: name.as_bytes().to_vec(),
        entries,
    };
    vec![
        bucket("alarm", alarms),
        bucket(
            "auth",
            vec![
                (b"authEnabled".to_vec(), vec![u8::from(auth.enabled)]),
                (
                    b"authRevision".to_vec(),
                    auth.revision.to_be_bytes().to_vec(),
                ),
            ],
        ),
        bucket("authRoles", roles),
        bucket("authUsers", users),
        bucket(
            "bellwether",
            vec![(b"cluster".to_vec(), cluster.as_bytes().to_vec())],
        ),
        bucket(
            "cluster",
            vec![(b"clusterVersion".to_vec(), CLUSTER_VERSION.to_vec())],
        ),
        bucket("key", keys),
        bucket("lease", leases),
        bucket("members", Vec::new()),
        bucket("members_removed", Vec::new()),
        bucket("meta", meta),
    ]
}

/// Why a bolt database is not a backend file this build can read.
#[derive(Debug, thiserror::Error)]
pub enum BackendFileError {
    /// The bolt layer refused it.
    #[error(transparent)]
    Bolt(#[from] bellwether_bolt::BoltError),
    /// A bucket etcd always has is missing.
    #[error("no {0:?} bucket: not an etcd backend file")]
    MissingBucket(&'static str),
    /// A record that does not decode, with where.
    #[error("bucket {bucket:?}: {what}")]
    Record {
        /// The bucket.
        bucket: &'static str,
        /// What is wrong.
        what: String,
    },
}

fn record(bucket: &'static str, what: impl Into<String>) -> BackendFileError {
    BackendFileError::Record {
        bucket,
        what: what.into(),
    }
}

/// Reads a backend file (etcd's or bellwether's) into a store image.
pub fn read(database: &Database) -> Result<BackendFile, BackendFileError> {
    // A bucket's records, or `None` when the file has no such bucket:
    // each bucket's tree is walked once.
    let optional = |name: &'static str| -> Result<Option<Vec<Record>>, BackendFileError> {
        let Some(entries) = database.bucket(name.as_bytes())? else {
            return Ok(None);
        };
        if entries.iter().any(|e| e.nested_bucket) {
            return Err(record(name, "a nested bucket, which etcd never writes"));
        }
        Ok(Some(entries.iter().map(|e| (e.key, e.value)).collect()))
    };
    let bucket = |name: &'static str| optional(name)?.ok_or(BackendFileError::MissingBucket(name));
    let optional = |name: &'static str| optional(name).map(Option::unwrap_or_default);
    let (writes, last_write) = read_writes(&bucket("key")?)?;
    let meta = bucket("meta")?;
    let compact_at = |name: &[u8]| -> Result<i64, BackendFileError> {
        match meta.iter().find(|(k, _)| *k == name) {
            None => Ok(0),
            Some((_, v)) if v.len() == REVISION_KEY_BYTES => {
                Ok(i64::from_be_bytes(v[..8].try_into().expect("8 bytes")))
            }
            Some(_) => Err(record("meta", "a compaction revision of the wrong size")),
        }
    };
    // A compaction scheduled and not finished is finished here, as etcd
    // does when it starts.
    let compact_revision =
        compact_at(b"finishedCompactRev")?.max(compact_at(b"scheduledCompactRev")?);
    let mut leases = Vec::new();
    for (key, value) in optional("lease")? {
        let lease = leasepb::Lease::decode(value).map_err(|e| record("lease", e.to_string()))?;
        if key != lease.id.to_be_bytes() {
            return Err(record(
                "lease",
                format!("lease {:#x} stored under another id", lease.id),
            ));
        }
        leases.push((lease.id, lease.ttl));
    }
    leases.sort_unstable();
    let mut alarms = Vec::new();
    for (key, _) in optional("alarm")? {
        let member = AlarmMember::decode(key).map_err(|e| record("alarm", e.to_string()))?;
        let kind = AlarmKind::from_number(member.alarm)
            .ok_or_else(|| record("alarm", format!("unknown alarm {}", member.alarm)))?;
        alarms.push(Alarm {
            member_id: member.member_id,
            kind,
        });
    }
    let auth = read_auth(
        &optional("auth")?,
        &optional("authUsers")?,
        &optional("authRoles")?,
    )?;
    let bellwether_cluster = optional("bellwether")?
        .iter()
        .find(|(k, _)| *k == b"cluster")
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned());
    Ok(BackendFile {
        image: StoreImage {
            revision: last_write.max(compact_revision),
            compact_revision,
            writes,
            leases,
            alarms,
            auth,
        },
        bellwether_cluster,
    })
}

/// The `key` bucket's writes in revision order, and the last revision.
fn read_writes(entries: &[Record]) -> Result<(Vec<ImageWrite>, i64), BackendFileError> {
    let mut writes = Vec::with_capacity(entries.len());
    let mut last = 0;
    for (key, value) in entries {
        let delete = match key.len() {
            REVISION_KEY_BYTES => false,
            n if n == REVISION_KEY_BYTES + 1 && key[REVISION_KEY_BYTES] == b't' => true,
            _ => return Err(record("key", "a revision key of the wrong size")),
        };
        if key[8] != b'_' {
            return Err(record("key", "a revision key without its separator"));
        }
        let main = i64::from_be_bytes(key[..8].try_into().expect("8 bytes"));
        let kv = mvccpb::KeyValue::decode(*value)
            .map_err(|e| record("key", format!("revision {main}: {e}")))?;
        let kv_state = (!delete).then(|| {
            Arc::new(KeyValue {
                key: kv.key.clone(),
                create_revision: kv.create_revision,
                mod_revision: kv.mod_revision,
                version: kv.version,
                value: kv.value,
                lease: kv.lease,
            })
        });
        writes.push(ImageWrite {
            key: kv.key,
            revision: main,
            kv: kv_state,
        });
        last = main;
    }
    Ok((writes, last))
}

/// The auth buckets as an auth image.
fn read_auth(
    auth: &[Record],
    users: &[Record],
    roles: &[Record],
) -> Result<AuthImage, BackendFileError> {
    let field = |name: &[u8]| auth.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let enabled = field(b"authEnabled") == Some(&[1u8][..]);
    let revision = match field(b"authRevision") {
        None => 0,
        Some(v) => u64::from_be_bytes(
            v.try_into()
                .map_err(|_| record("auth", "an auth revision of the wrong size"))?,
        ),
    };
    let name = |bucket: &'static str, bytes: &[u8]| {
        String::from_utf8(bytes.to_vec()).map_err(|_| record(bucket, "a name that is not UTF-8"))
    };
    let mut image = AuthImage {
        enabled,
        revision,
        users: BTreeMap::new(),
        roles: BTreeMap::new(),
    };
    for (key, value) in roles {
        let role = authpb::Role::decode(*value).map_err(|e| record("authRoles", e.to_string()))?;
        let mut perms = Vec::new();
        for p in role.key_permission {
            let kind = Permission::from_number(p.perm_type).ok_or_else(|| {
                record("authRoles", format!("unknown permission {}", p.perm_type))
            })?;
            perms.push(KeyPermission {
                key: p.key,
                range_end: p.range_end,
                kind,
            });
        }
        perms.sort();
        image.roles.insert(name("authRoles", key)?, perms);
    }
    for (key, value) in users {
        let user = authpb::User::decode(*value).map_err(|e| record("authUsers", e.to_string()))?;
        image.users.insert(
            name("authUsers", key)?,
            User {
                password: user.password,
                roles: user.roles.into_iter().collect(),
                since: revision,
            },
        );
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_kv::{KvStore, PutRequest, RequestOp, TxnRequest};

    #[test]
    fn a_store_written_as_a_backend_file_reads_back_whole() {
        let mut store = KvStore::new();
        store.lease_grant(9, 120).unwrap();
        for i in 0..3000 {
            let mut put = PutRequest::new(format!("k{}", i % 700), vec![b'x'; i % 300]);
            if i % 5 == 0 {
                put.lease = 9;
            }
            store.put(&put).unwrap();
        }
        let txn = TxnRequest {
            success: vec![
                RequestOp::Put(PutRequest::new("b", "1")),
                RequestOp::Put(PutRequest::new("a", "2")),
            ],
            ..TxnRequest::default()
        };
        store.txn(&txn).unwrap();
        store.compact(1500).unwrap();
        let auth = store.auth_mut();
        auth.role_add("reader").unwrap();
        auth.role_grant_permission(
            "reader",
            KeyPermission {
                key: b"k".to_vec(),
                range_end: b"l".to_vec(),
                kind: Permission::Read,
            },
        )
        .unwrap();
        auth.user_add("alice", b"$2a$10$hash".to_vec()).unwrap();
        auth.user_grant_role("alice", "reader").unwrap();
        let image = store.image();
        let bytes = bellwether_bolt::write_database(&buckets(&image, "prod", 42));
        let file = read(&Database::open(&bytes).unwrap()).unwrap();
        assert_eq!(file.bellwether_cluster.as_deref(), Some("prod"));
        let mut expected = image.clone();
        for user in expected.auth.users.values_mut() {
            user.since = expected.auth.revision;
        }
        assert_eq!(file.image, expected);
        let rebuilt = KvStore::from_image(file.image, Vec::new()).unwrap();
        assert_eq!(rebuilt.image().writes, image.writes);
    }
}

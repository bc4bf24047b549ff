//! The file `etcdctl snapshot save` writes from a bellwether member, and
//! `bellwether snapshot restore` reads to start a new cluster from it.
//!
//! A member streams what etcd streams: its store as etcd's backend file (a
//! bolt database, see `bellwether_etcd::backend_file`), then the
//! database's SHA-256. So the file is an etcd snapshot file: `etcdctl
//! snapshot status` and `snapshot restore` take it, and an etcd 3.4
//! server restored from it serves every key, revision, lease, user and
//! role. `bellwether snapshot restore` takes etcd's own files the same
//! way, and the files of earlier bellwether builds (`legacy.rs`).
//!
//! A restore checks the digest, every page of the database and every
//! record, and builds the whole store, before it writes anything, so a
//! truncated, damaged or foreign file changes nothing.

mod legacy;

use bellwether_bolt::{BoltError, Database};
use bellwether_etcd::backend_file;
use bellwether_kv::{KvStore, StoreImage};
use sha2::{Digest, Sha256};

/// The SHA-256 etcd appends to the database it streams.
const DIGEST_BYTES: usize = 32;
/// etcd's `snapshot save` and `restore` recognise the digest by the size:
/// whole 512-byte blocks (the pages) and 32 bytes more.
const BLOCK_BYTES: usize = 512;

/// Why a file is not a snapshot this build can restore.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotFileError {
    /// Neither an etcd snapshot nor a bellwether one.
    #[error("not a snapshot: neither etcd's format (a bolt database) nor an older bellwether one")]
    NotASnapshot,
    /// Cut short.
    #[error("the snapshot is truncated: {0}")]
    Truncated(String),
    /// The digest does not match.
    #[error("the snapshot is damaged: its SHA-256 does not match its content")]
    Digest,
    /// The bolt database is damaged or of another version.
    #[error("the snapshot's database cannot be read: {0}")]
    Database(String),
    /// The store inside does not decode or is inconsistent.
    #[error("the store inside the snapshot cannot be restored: {0}")]
    Store(String),
}

/// Where a snapshot file came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotSource {
    /// A member of the named bellwether cluster.
    Bellwether(String),
    /// etcd (or any tool writing etcd's backend format).
    Etcd,
}

/// A decoded snapshot file.
#[derive(Debug)]
pub struct SnapshotFile {
    /// Where it came from.
    pub source: SnapshotSource,
    /// The store's revision.
    pub revision: i64,
    /// The store's own snapshot bytes (`KvStore::snapshot`), what a
    /// restored member's data directory holds.
    pub store: Vec<u8>,
    /// The decoded store.
    pub decoded: KvStore,
}

/// The file's bytes for `store` of cluster `cluster`.
pub fn encode(cluster: &str, store: &KvStore) -> Vec<u8> {
    encode_image(cluster, &store.image(), store.revision() as u64)
}

/// The file's bytes for a store's `image`, built from what was taken
/// under the store's lock (`KvStore::image_pending`) after it is released. `applied_index` goes where
/// etcd keeps its consistent index (an etcd restore sets its own).
pub fn encode_image(cluster: &str, image: &StoreImage, applied_index: u64) -> Vec<u8> {
    let buckets = backend_file::buckets(image, cluster, applied_index);
    let mut file = bellwether_bolt::write_database(&buckets);
    let digest = Sha256::digest(&file);
    file.extend_from_slice(&digest);
    assert_eq!(
        file.len() % BLOCK_BYTES,
        DIGEST_BYTES,
        "a snapshot is whole pages and a digest, as etcd's are"
    );
    file
}

/// Checks and decodes a snapshot file. A bare bolt database (etcd's
/// `member/snap/db`, copied by hand) is taken without a digest.
pub fn decode(bytes: &[u8]) -> Result<SnapshotFile, SnapshotFileError> {
    if bytes.starts_with(legacy::MAGIC) {
        return legacy::decode(bytes);
    }
    if legacy::MAGIC.starts_with(bytes) && !bytes.is_empty() {
        return Err(SnapshotFileError::Truncated("the magic".into()));
    }
    let database = match bytes.len() % BLOCK_BYTES {
        DIGEST_BYTES => {
            let (body, digest) = bytes.split_at(bytes.len() - DIGEST_BYTES);
            if Sha256::digest(body).as_slice() != digest {
                // A damaged file, unless it is not a snapshot at all.
                return Err(match Database::open(body) {
                    Err(BoltError::NotBolt) => SnapshotFileError::NotASnapshot,
                    _ => SnapshotFileError::Digest,
                });
            }
            body
        }
        0 => bytes,
        _ => {
            return Err(match Database::open(bytes) {
                Err(BoltError::NotBolt) => SnapshotFileError::NotASnapshot,
                _ => SnapshotFileError::Truncated(
                    "its size is neither whole pages nor whole pages and a 32-byte SHA-256".into(),
                ),
            })
        }
    };
    let database = Database::open(database).map_err(|e| match e {
        BoltError::NotBolt => SnapshotFileError::NotASnapshot,
        BoltError::Truncated { .. } => SnapshotFileError::Truncated(e.to_string()),
        e => SnapshotFileError::Database(e.to_string()),
    })?;
    let file =
        backend_file::read(&database).map_err(|e| SnapshotFileError::Database(e.to_string()))?;
    let revision = file.image.revision;
    // A store with auth enabled needs a token secret; tokens never cross
    // clusters, so the new cluster gets a new one.
    let secret = crate::etcd::credentials::new_secret();
    let decoded = KvStore::from_image(file.image, secret).map_err(SnapshotFileError::Store)?;
    Ok(SnapshotFile {
        source: file
            .bellwether_cluster
            .map_or(SnapshotSource::Etcd, SnapshotSource::Bellwether),
        revision: decoded.revision().max(revision),
        store: decoded.snapshot(),
        decoded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_kv::PutRequest;

    fn store() -> KvStore {
        let mut store = KvStore::new();
        for i in 0..200 {
            store
                .put(&PutRequest::new(format!("k{}", i % 30), format!("v{i}")))
                .unwrap();
        }
        store
    }

    #[test]
    fn a_file_round_trips_and_damage_is_refused() {
        let store = store();
        let bytes = encode("prod", &store);
        let file = decode(&bytes).unwrap();
        assert_eq!(file.source, SnapshotSource::Bellwether("prod".into()));
        assert_eq!(file.revision, store.revision());
        assert_eq!(file.decoded.image(), store.image());
        assert_eq!(bytes.len() % BLOCK_BYTES, DIGEST_BYTES);
        let bare = &bytes[..bytes.len() - DIGEST_BYTES];
        assert_eq!(decode(bare).unwrap().decoded.image(), store.image());
        for cut in [
            1,
            100,
            4096,
            bytes.len() / 2,
            bytes.len() - 33,
            bytes.len() - 1,
        ] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut} accepted");
        }
        for at in [20, 5000, bytes.len() / 2, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert_eq!(decode(&damaged).unwrap_err(), SnapshotFileError::Digest);
        }
    }

    #[test]
    fn another_format_or_version_is_named() {
        assert_eq!(
            decode(b"hello").unwrap_err(),
            SnapshotFileError::NotASnapshot
        );
        assert_eq!(
            decode(&[7u8; 8192]).unwrap_err(),
            SnapshotFileError::NotASnapshot
        );
        let mut bytes = encode("prod", &store());
        bytes.truncate(bytes.len() - DIGEST_BYTES);
        for meta in [0, 4096] {
            bytes[meta + 20] = 3;
        }
        let error = decode(&bytes).unwrap_err();
        assert!(
            matches!(&error, SnapshotFileError::Database(e) if e.contains("version 3")),
            "{error}"
        );
    }
}

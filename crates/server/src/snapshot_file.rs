//! The file `etcdctl snapshot save` writes from a bellwether member, and
//! `bellwether snapshot restore` reads to start a new cluster from it.
//!
//! etcd streams its bolt database; bellwether streams its own store, so
//! the two files are not interchangeable, and each side refuses the other's
//! with a clear error. The file ends as etcd's do, so `etcdctl snapshot
//! save` (which checks that the size is a multiple of 512 plus a 32-byte
//! SHA-256) accepts it. The layout, integers little-endian:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | the magic `BWSNAP01` |
//! | 1 + n | the source cluster's name (length, then UTF-8) |
//! | 8 | the store's revision (for the report; the store holds it too) |
//! | 8 + n | the store's snapshot (`KvStore::snapshot`), length first |
//! | 0 to 511 | zeros, up to a multiple of 512 bytes |
//! | 32 | SHA-256 of everything before it |
//!
//! A restore checks all of it, and decodes the store, before it writes
//! anything, so a truncated or damaged file changes nothing.

use bellwether_kv::KvStore;
use sha2::{Digest, Sha256};

/// Identifies a bellwether snapshot file.
const MAGIC: &[u8; 8] = b"BWSNAP01";
/// The body is padded to a multiple of this, as a bolt file's pages are.
const BLOCK_BYTES: usize = 512;
/// The SHA-256 trailer.
const DIGEST_BYTES: usize = 32;
/// The magic a bolt database (etcd's backend, and so an etcd snapshot)
/// carries at offset 16, in its first meta page: used to recognise an
/// etcd snapshot and say so.
const BOLT_MAGIC: u32 = 0xED0C_DAED;

/// Why a file is not a snapshot this build can restore.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotFileError {
    /// An etcd snapshot (a bolt database), not a bellwether one.
    #[error("this is an etcd snapshot (a bolt database); bellwether restores only snapshots saved from a bellwether member")]
    Etcd,
    /// Not a snapshot at all.
    #[error("not a bellwether snapshot (no BWSNAP01 magic)")]
    NotASnapshot,
    /// Cut short.
    #[error("the snapshot is truncated: {0}")]
    Truncated(&'static str),
    /// The digest does not match.
    #[error("the snapshot is damaged: its SHA-256 does not match its content")]
    Digest,
    /// The store inside does not decode.
    #[error("the store inside the snapshot does not decode: {0}")]
    Store(String),
}

/// A decoded snapshot file.
#[derive(Debug)]
pub struct SnapshotFile {
    /// The cluster it was saved from.
    pub cluster: String,
    /// The store's revision.
    pub revision: i64,
    /// The store's own snapshot bytes, checked to decode.
    pub store: Vec<u8>,
    /// The decoded store.
    pub decoded: KvStore,
}

/// The file's bytes for `store` of cluster `cluster`.
pub fn encode(cluster: &str, store: &KvStore) -> Vec<u8> {
    encode_parts(cluster, store.revision(), store.snapshot())
}

/// The file's bytes around `data`, a store's snapshot at `revision`: the
/// caller takes the snapshot under the store's lock and frames and hashes
/// it after releasing the lock.
pub fn encode_parts(cluster: &str, revision: i64, data: Vec<u8>) -> Vec<u8> {
    let name = &cluster.as_bytes()[..cluster.len().min(255)];
    let mut out = Vec::with_capacity(data.len() + name.len() + BLOCK_BYTES + 64);
    out.extend_from_slice(MAGIC);
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(&revision.to_le_bytes());
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&data);
    out.resize(out.len().next_multiple_of(BLOCK_BYTES), 0);
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    // The framing `decode` checks first: whole blocks, then the digest.
    assert_eq!(
        out.len() % BLOCK_BYTES,
        DIGEST_BYTES,
        "a snapshot file is framed"
    );
    out
}

/// Checks and decodes a snapshot file.
pub fn decode(bytes: &[u8]) -> Result<SnapshotFile, SnapshotFileError> {
    if !bytes.starts_with(MAGIC) {
        let bolt = bytes
            .get(16..20)
            .is_some_and(|m| u32::from_le_bytes(m.try_into().expect("4 bytes")) == BOLT_MAGIC);
        return Err(if bolt {
            SnapshotFileError::Etcd
        } else if MAGIC.starts_with(bytes) {
            SnapshotFileError::Truncated("the magic")
        } else {
            SnapshotFileError::NotASnapshot
        });
    }
    if bytes.len() % BLOCK_BYTES != DIGEST_BYTES {
        return Err(SnapshotFileError::Truncated(
            "its size is not a multiple of 512 plus a 32-byte digest",
        ));
    }
    let (body, digest) = bytes.split_at(bytes.len() - DIGEST_BYTES);
    if Sha256::digest(body).as_slice() != digest {
        return Err(SnapshotFileError::Digest);
    }
    let mut input = Reader {
        bytes: body,
        at: MAGIC.len(),
    };
    let name_len = input.take(1, "the cluster name")?[0] as usize;
    let cluster = String::from_utf8_lossy(input.take(name_len, "the cluster name")?).into_owned();
    let revision = i64::from_le_bytes(input.take(8, "the revision")?.try_into().expect("8"));
    let data_len = u64::from_le_bytes(input.take(8, "the store's length")?.try_into().expect("8"));
    let data_len =
        usize::try_from(data_len).map_err(|_| SnapshotFileError::Truncated("the store"))?;
    let data = input.take(data_len, "the store")?;
    let padding = &body[input.at..];
    if padding.len() >= BLOCK_BYTES || padding.iter().any(|b| *b != 0) {
        return Err(SnapshotFileError::Truncated(
            "the store's length does not match the file",
        ));
    }
    let decoded = KvStore::restore(data).map_err(|e| SnapshotFileError::Store(e.to_string()))?;
    if decoded.revision() != revision {
        return Err(SnapshotFileError::Store(format!(
            "the file names revision {revision}, its store is at {}",
            decoded.revision()
        )));
    }
    Ok(SnapshotFile {
        cluster,
        revision,
        store: data.to_vec(),
        decoded,
    })
}

/// A cursor over the file's body.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize, what: &'static str) -> Result<&'a [u8], SnapshotFileError> {
        let end = self
            .at
            .checked_add(count)
            .filter(|end| *end <= self.bytes.len());
        let end = end.ok_or(SnapshotFileError::Truncated(what))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_kv::PutRequest;

    fn store() -> KvStore {
        let mut store = KvStore::new();
        for i in 0..20 {
            store
                .put(&PutRequest::new(format!("k{i}"), format!("v{i}")))
                .unwrap();
        }
        store
    }

    #[test]
    fn a_file_round_trips_and_every_damage_is_refused() {
        let store = store();
        let bytes = encode("prod", &store);
        let file = decode(&bytes).unwrap();
        assert_eq!(
            (file.cluster.as_str(), file.revision),
            ("prod", store.revision())
        );
        assert_eq!(file.decoded, store);
        assert_eq!(
            bytes.len() % BLOCK_BYTES,
            DIGEST_BYTES,
            "shaped as etcd's files"
        );
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut} accepted");
        }
        for at in [8, 20, bytes.len() / 2, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(decode(&damaged).is_err(), "a flipped byte at {at} accepted");
        }
    }

    #[test]
    fn an_etcd_snapshot_is_named_as_one() {
        let mut bolt = vec![0u8; 4096];
        bolt[16..20].copy_from_slice(&BOLT_MAGIC.to_le_bytes());
        assert_eq!(decode(&bolt).unwrap_err(), SnapshotFileError::Etcd);
        assert_eq!(
            decode(b"hello").unwrap_err(),
            SnapshotFileError::NotASnapshot
        );
    }
}

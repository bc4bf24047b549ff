//! bellwether's own snapshot file before version 0.2 (`BWSNAP01`), still
//! read so that backups saved by earlier builds restore. Nothing writes it
//! any more: a member's Snapshot call now sends etcd's bolt format.
//!
//! The layout, integers little-endian:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | the magic `BWSNAP01` |
//! | 1 + n | the source cluster's name (length, then UTF-8) |
//! | 8 | the store's revision (for the report; the store holds it too) |
//! | 8 + n | the store's snapshot (`KvStore::snapshot`), length first |
//! | 0 to 511 | zeros, up to a multiple of 512 bytes |
//! | 32 | SHA-256 of everything before it |

use super::{SnapshotFile, SnapshotFileError, SnapshotSource};
use bellwether_kv::KvStore;
use sha2::{Digest, Sha256};

/// Identifies the file.
pub(super) const MAGIC: &[u8; 8] = b"BWSNAP01";
/// The body is padded to a multiple of this.
const BLOCK_BYTES: usize = 512;
/// The SHA-256 trailer.
const DIGEST_BYTES: usize = 32;

/// The file's bytes for `store` of cluster `cluster` (for the tests that
/// show old files still restore).
#[cfg(test)]
pub(super) fn encode(cluster: &str, store: &KvStore) -> Vec<u8> {
    let data = store.snapshot();
    let name = &cluster.as_bytes()[..cluster.len().min(255)];
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(&store.revision().to_le_bytes());
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&data);
    out.resize(out.len().next_multiple_of(BLOCK_BYTES), 0);
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    out
}

/// Checks and decodes a file that starts with [`MAGIC`].
pub(super) fn decode(bytes: &[u8]) -> Result<SnapshotFile, SnapshotFileError> {
    if bytes.len() % BLOCK_BYTES != DIGEST_BYTES {
        return Err(SnapshotFileError::Truncated(
            "its size is not a multiple of 512 plus a 32-byte digest".into(),
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
        usize::try_from(data_len).map_err(|_| SnapshotFileError::Truncated("the store".into()))?;
    let data = input.take(data_len, "the store")?;
    let padding = &body[input.at..];
    if padding.len() >= BLOCK_BYTES || padding.iter().any(|b| *b != 0) {
        return Err(SnapshotFileError::Truncated(
            "the store's length does not match the file".into(),
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
        source: SnapshotSource::Bellwether(cluster),
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
    fn take(&mut self, count: usize, what: &str) -> Result<&'a [u8], SnapshotFileError> {
        let end = self
            .at
            .checked_add(count)
            .filter(|end| *end <= self.bytes.len());
        let end = end.ok_or_else(|| SnapshotFileError::Truncated(what.into()))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_kv::PutRequest;

    #[test]
    fn an_old_file_restores_and_every_damage_is_refused() {
        let mut store = KvStore::new();
        for i in 0..20 {
            store
                .put(&PutRequest::new(format!("k{i}"), format!("v{i}")))
                .unwrap();
        }
        let bytes = encode("prod", &store);
        let file = super::super::decode(&bytes).unwrap();
        assert_eq!(file.source, SnapshotSource::Bellwether("prod".into()));
        assert_eq!(file.decoded, store);
        for cut in 0..bytes.len() {
            assert!(
                super::super::decode(&bytes[..cut]).is_err(),
                "cut at {cut} accepted"
            );
        }
        for at in [8, 20, bytes.len() / 2, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(
                super::super::decode(&damaged).is_err(),
                "a flipped byte at {at} accepted"
            );
        }
    }
}

//! The meta page: where a bbolt file says what it holds.

use crate::layout::{u32_at, u64_at, PageHeader, META_PAGE, PAGE_HEADER_BYTES};
use crate::BoltError;

/// bbolt's magic number.
pub(crate) const MAGIC: u32 = 0xED0C_DAED;
/// The one format version bbolt has written since 2014.
pub(crate) const VERSION: u32 = 2;
/// The meta's bytes covered by its checksum (everything before it).
const CHECKSUMMED_BYTES: usize = 56;
/// The meta's size.
const META_BYTES: usize = 64;

/// The content of a meta page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) page_size: u32,
    /// The root bucket's root page.
    pub(crate) root: u64,
    /// The freelist's page.
    pub(crate) freelist: u64,
    /// Pages in use: every page id is below this.
    pub(crate) pages: u64,
    /// The transaction that wrote this meta.
    pub(crate) txid: u64,
}

/// FNV-1a, 64 bits: bbolt's meta checksum.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

impl Meta {
    /// Reads the meta page at the start of `page`. `NotBolt` without the
    /// magic, `Version` for another format, `MetaChecksum` when damaged.
    pub(crate) fn read(page: &[u8]) -> Result<Meta, BoltError> {
        let meta = page
            .get(PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + META_BYTES)
            .ok_or(BoltError::NotBolt)?;
        if u32_at(meta, 0) != MAGIC {
            return Err(BoltError::NotBolt);
        }
        let version = u32_at(meta, 4);
        if version != VERSION {
            return Err(BoltError::Version(version));
        }
        if fnv1a64(&meta[..CHECKSUMMED_BYTES]) != u64_at(meta, CHECKSUMMED_BYTES) {
            return Err(BoltError::MetaChecksum);
        }
        Ok(Meta {
            page_size: u32_at(meta, 8),
            // Bytes 12..16 are flags, unused by bbolt; 24..32 is the root
            // bucket's sequence, unused for the root.
            root: u64_at(meta, 16),
            freelist: u64_at(meta, 32),
            pages: u64_at(meta, 40),
            txid: u64_at(meta, 48),
        })
    }

    /// Writes this meta as page `id` into `page` (a whole page).
    pub(crate) fn write(&self, id: u64, page: &mut [u8]) {
        PageHeader {
            id,
            flags: META_PAGE,
            count: 0,
            overflow: 0,
        }
        .write(page);
        let meta = &mut page[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + META_BYTES];
        meta[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        meta[4..8].copy_from_slice(&VERSION.to_le_bytes());
        meta[8..12].copy_from_slice(&self.page_size.to_le_bytes());
        meta[12..16].fill(0);
        meta[16..24].copy_from_slice(&self.root.to_le_bytes());
        meta[24..32].fill(0);
        meta[32..40].copy_from_slice(&self.freelist.to_le_bytes());
        meta[40..48].copy_from_slice(&self.pages.to_le_bytes());
        meta[48..56].copy_from_slice(&self.txid.to_le_bytes());
        let checksum = fnv1a64(&meta[..CHECKSUMMED_BYTES]);
        meta[56..64].copy_from_slice(&checksum.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}

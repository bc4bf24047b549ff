//! The byte layout bbolt gives its pages and elements: the facts of the
//! format both the reader and the writer follow.

/// A page header: page id (8), flags (2), element count (2), overflow
/// page count (4).
pub(crate) const PAGE_HEADER_BYTES: usize = 16;
/// A branch element: key offset (4), key size (4), child page (8).
pub(crate) const BRANCH_ELEMENT_BYTES: usize = 16;
/// A leaf element: flags (4), key offset (4), key size (4), value size (4).
pub(crate) const LEAF_ELEMENT_BYTES: usize = 16;
/// A bucket header: root page (8), sequence (8).
pub(crate) const BUCKET_HEADER_BYTES: usize = 16;

/// Page flags.
pub(crate) const BRANCH_PAGE: u16 = 0x01;
pub(crate) const LEAF_PAGE: u16 = 0x02;
pub(crate) const META_PAGE: u16 = 0x04;
pub(crate) const FREELIST_PAGE: u16 = 0x10;

/// The leaf element flag of a nested bucket.
pub(crate) const BUCKET_LEAF: u32 = 0x01;

/// The header at the start of every page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageHeader {
    pub(crate) id: u64,
    pub(crate) flags: u16,
    pub(crate) count: u16,
    pub(crate) overflow: u32,
}

impl PageHeader {
    /// Reads a header from the first 16 bytes of `bytes`.
    pub(crate) fn read(bytes: &[u8]) -> Option<PageHeader> {
        let bytes = bytes.get(..PAGE_HEADER_BYTES)?;
        Some(PageHeader {
            id: u64_at(bytes, 0),
            flags: u16::from_le_bytes([bytes[8], bytes[9]]),
            count: u16::from_le_bytes([bytes[10], bytes[11]]),
            overflow: u32_at(bytes, 12),
        })
    }

    /// Writes the header into the first 16 bytes of `out`.
    pub(crate) fn write(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.id.to_le_bytes());
        out[8..10].copy_from_slice(&self.flags.to_le_bytes());
        out[10..12].copy_from_slice(&self.count.to_le_bytes());
        out[12..16].copy_from_slice(&self.overflow.to_le_bytes());
    }
}

/// The little-endian u32 at `at` (the caller has checked the bounds).
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// The little-endian u64 at `at` (the caller has checked the bounds).
pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

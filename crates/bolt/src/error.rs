//! Why a file is not a bbolt database this crate can read.

/// A file that is not a readable bbolt database, with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoltError {
    /// Neither meta page carries bbolt's magic: not a bbolt file.
    #[error("not a bbolt database (no valid meta page carries bbolt's magic)")]
    NotBolt,
    /// A meta page of another format version.
    #[error("bbolt format version {0}; only version 2 is read")]
    Version(u32),
    /// Both meta pages fail their checksum.
    #[error("both meta pages are damaged (checksum mismatch)")]
    MetaChecksum,
    /// A page size bbolt would not have written.
    #[error("page size {0} is not a power of two between 1 KiB and 64 KiB")]
    PageSize(u32),
    /// The file ends before a page it refers to.
    #[error("the file is truncated: page {page} ends at byte {end}, the file has {len}")]
    Truncated {
        /// The page.
        page: u64,
        /// Where it would end.
        end: u64,
        /// The file's length.
        len: u64,
    },
    /// Anything else out of place, with the page it was found on.
    #[error("damaged at page {page}: {what}")]
    Damaged {
        /// The page.
        page: u64,
        /// What is wrong.
        what: &'static str,
    },
}

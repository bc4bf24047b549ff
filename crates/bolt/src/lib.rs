//! The bbolt database format, as etcd keeps its backend and streams its
//! snapshots, read and written in memory.
//!
//! Why our own: etcd's snapshot file is a bbolt database, and the Rust
//! crates that speak bbolt's format are unmaintained or only "inspired by"
//! it. The format is small and fixed (bbolt has been at format version 2
//! since 2014), and a snapshot needs only two things of it: read every
//! top-level bucket of a file, and write a fresh file holding given
//! buckets. Both are here, with every page reference, bound and order
//! checked on read, so a damaged file is an error and never a panic.
//!
//! What the format is, in short (all integers little-endian, as bbolt
//! writes them on the machines etcd runs on):
//! - the file is a run of pages of one size, named in the meta pages;
//! - pages 0 and 1 are meta pages; the valid one with the higher
//!   transaction id is current. It names the root bucket's page, the
//!   freelist's page and the number of pages in use;
//! - a bucket is a B+tree of branch and leaf pages; a page too big for one
//!   page spills into `overflow` pages that follow it;
//! - a leaf element that is a bucket holds a 16-byte bucket header (its
//!   root page, its sequence); a root of 0 means the bucket's one leaf page
//!   follows inline in the value.
//!
//! [`write_database`] lays out fresh trees, page by page, with no free
//! pages, so bbolt's own consistency check (`tx.Check`, which
//! `etcdctl snapshot status` runs) finds every page reachable exactly once.

mod error;
mod layout;
mod meta;
mod reader;
mod writer;

pub use error::BoltError;
pub use reader::{Database, Entry};
pub use writer::{write_database, Bucket};

/// The page size this crate writes: the usual operating system page, as
/// etcd's bbolt uses on Linux.
pub const PAGE_SIZE: usize = 4096;

#[cfg(test)]
mod tests;

//! The few file operations the WAL needs, behind a trait, so that the same
//! WAL code runs on the real file system and on a simulated disk that can
//! crash at any operation.
//!
//! The operations are the ones whose durability semantics the WAL depends
//! on, and nothing else: append-only writes, `fdatasync`, truncation (to cut
//! a torn tail), whole-file reads (recovery), and directory operations whose
//! effect is durable only after the directory itself is synced (POSIX says
//! nothing stronger, so neither does the simulated disk).

mod real;
mod sim;
mod sim_disk;
mod sim_fault;
mod unsynced_data;

pub use real::{RealFile, RealFileSystem, Unsynced};
pub use sim::{SimFile, SimFileSystem};
pub use sim_fault::SimFault;
pub use unsynced_data::UnsyncedData;

use std::io;
use std::path::Path;

/// An open file the WAL appends to.
pub trait WalFile: std::fmt::Debug {
    /// Appends all of `bytes` at the end of the file. On error, any prefix of
    /// `bytes` may have been written.
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()>;

    /// Makes everything written so far durable, including the file's size
    /// (`fdatasync`). Does not make the file's name durable; see
    /// [`FileSystem::sync_dir`].
    fn sync_data(&mut self) -> io::Result<()>;

    /// Cuts the file to `len_bytes` (never longer than it is); later appends
    /// go after the new end. Recovery uses it to drop a torn tail.
    fn set_len(&mut self, len_bytes: u64) -> io::Result<()>;

    /// Announces that appends will fill the file up to `len_bytes`, so the
    /// file system may prepare that space ahead of them; appends still go
    /// right after the last byte written. Prepared space reads as zeros,
    /// which recovery takes for an unwritten tail.
    ///
    /// The real file system writes zeros a little ahead of the appends (see
    /// `ZERO_FILL_AHEAD_BYTES` in `real.rs`). An `fdatasync` after an
    /// append into blocks that are already allocated and written flushes
    /// only the data; an append past the end, or into a hole, also makes it
    /// write the allocation and the size (on ext4 without a journal, two
    /// more synchronous writes). With three members syncing about 10 KiB at
    /// once that made each sync about 40% slower and costlier in CPU. A
    /// file system may ignore the announcement (the simulated disk does).
    fn preallocate(&mut self, len_bytes: u64) -> io::Result<()> {
        let _ = len_bytes;
        Ok(())
    }

    /// Gives back any space [`preallocate`](WalFile::preallocate) prepared
    /// past the last byte written, durably, and stops preparing more: a segment that stops being the
    /// last must end at its last record, since only the last may have a
    /// zero tail.
    fn seal(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The directory-level operations, and the factory of [`WalFile`]s.
pub trait FileSystem: std::fmt::Debug + Clone {
    /// The open-file type.
    type File: WalFile;

    /// Creates `dir` and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// Names of the entries of `dir`, sorted. Names that are not UTF-8 are
    /// left out: the WAL never creates them.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;

    /// Creates a new, empty file for appending; fails if it exists.
    fn create_new(&self, path: &Path) -> io::Result<Self::File>;

    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> io::Result<Self::File>;

    /// Size of a file in bytes.
    fn file_len(&self, path: &Path) -> io::Result<u64>;

    /// Reads a whole file, failing if it holds more than `bytes_max` bytes so
    /// that a damaged size can never make recovery allocate without bound.
    fn read(&self, path: &Path, bytes_max: u64) -> io::Result<Vec<u8>>;

    /// Removes a file. Durable only after [`sync_dir`](FileSystem::sync_dir).
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Renames a file atomically, replacing `to` if it exists. Durable only
    /// after [`sync_dir`](FileSystem::sync_dir).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Makes the creations, removals and renames in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

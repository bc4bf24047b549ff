//! The operating system's file system, for production.

use super::{FileSystem, WalFile};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// [`FileSystem`] over `std::fs`: real files, real `fsync`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFileSystem {
    /// Where appended bytes wait for their fsync.
    pub unsynced: Unsynced,
}

/// Where bytes appended to a log file wait for their fsync.
///
/// A SIGKILL loses nothing the process handed to the kernel, so killing a
/// member shows only what a crash of its process loses, never what a power
/// cut would. `bellwether verify` makes each kill a power cut by holding
/// the bytes in the process until their fsync, the way Jepsen's LazyFS
/// holds them in a FUSE file system.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unsynced {
    /// In the kernel's page cache, as any file write (production).
    #[default]
    InKernel,
    /// In this process's memory, written out by the fsync that makes them
    /// durable: a SIGKILL loses exactly what a power cut could.
    HeldInProcess,
    /// Broken on purpose, to show that `verify` catches it: held, and an
    /// fsync writes nothing out, so the log reports writes durable that a
    /// SIGKILL loses. They reach the file only when it is sealed, cut or
    /// closed: a kill loses what the active log segment was sent since it
    /// was opened, while a snapshot file, closed before it is renamed into
    /// place, keeps its bytes.
    HeldPastTheirFsync,
}

/// Zeros are written this far ahead of the appends into announced space
/// (see [`WalFile::preallocate`]), at most. One sync in every this many
/// bytes of appends pays for the allocation; the rest overwrite blocks that
/// are already allocated and written.
const ZERO_FILL_AHEAD_BYTES: u64 = 256 << 10;

/// The zeros written ahead, a piece at a time.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// A real file the WAL appends to.
#[derive(Debug)]
pub struct RealFile {
    file: File,
    /// Offset after the last byte written: where the next append goes.
    end: u64,
    /// The file's size: at least `end`; the bytes between are zeros
    /// written ahead of the appends.
    len: u64,
    /// The size announced by [`WalFile::preallocate`]: zeros are written
    /// ahead up to here and no further.
    announced: u64,
    /// Where appends wait for their fsync.
    unsynced: Unsynced,
    /// The appends after the file's written bytes, when they are held.
    held: Vec<u8>,
}

impl RealFile {
    fn opened(file: File, unsynced: Unsynced) -> io::Result<RealFile> {
        let len = file.metadata()?.len();
        Ok(RealFile {
            file,
            end: len,
            len,
            announced: 0,
            unsynced,
            held: Vec::new(),
        })
    }

    /// Writes the held bytes to the file, after the bytes written before
    /// them.
    fn write_held(&mut self) -> io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let written_end = self.end - self.held.len() as u64;
        self.file.write_all_at(&self.held, written_end)?;
        self.held.clear();
        self.len = self.len.max(self.end);
        Ok(())
    }

    /// Writes zeros from the file's size up to [`ZERO_FILL_AHEAD_BYTES`]
    /// past `end`, within the announced size, when `end` has reached the
    /// zeros written so far. Only an optimisation: when it fails (a full
    /// disk), this file stops filling ahead and appends go on into plain
    /// new space, where a full disk fails them instead. What it wrote
    /// reads as zeros, an unwritten tail to recovery, and [`WalFile::seal`]
    /// cuts it.
    fn fill_ahead(&mut self) {
        if self.end < self.len {
            return;
        }
        let target = (self.end + ZERO_FILL_AHEAD_BYTES).min(self.announced);
        let mut at = self.end;
        while at < target {
            let piece = (target - at).min(ZEROS.len() as u64);
            if self
                .file
                .write_all_at(&ZEROS[..piece as usize], at)
                .is_err()
            {
                self.announced = self.end;
                return;
            }
            at += piece;
        }
        self.len = self.len.max(at);
    }
}

/// A file closed with bytes still held hands them to the kernel, as a
/// closed file's bytes stay in the page cache: only a crash of the process
/// (a SIGKILL, where nothing is dropped) loses them.
impl Drop for RealFile {
    fn drop(&mut self) {
        let _ = self.write_held();
    }
}

impl WalFile for RealFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.unsynced != Unsynced::InKernel {
            self.held.extend_from_slice(bytes);
            self.end += bytes.len() as u64;
            return Ok(());
        }
        self.file.write_all_at(bytes, self.end)?;
        self.end += bytes.len() as u64;
        self.len = self.len.max(self.end);
        self.fill_ahead();
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        if self.unsynced == Unsynced::HeldPastTheirFsync {
            return Ok(());
        }
        if !self.held.is_empty() {
            // Held bytes meet a full disk here, and the zeros ahead of
            // them are written here, as appends meet and write them in
            // production.
            self.write_held()?;
            self.fill_ahead();
        }
        self.file.sync_data()
    }

    fn set_len(&mut self, len_bytes: u64) -> io::Result<()> {
        self.write_held()?;
        assert!(
            len_bytes <= self.file.metadata()?.len(),
            "set_len only ever shortens a file"
        );
        self.file.set_len(len_bytes)?;
        self.end = len_bytes;
        self.len = len_bytes;
        Ok(())
    }

    fn preallocate(&mut self, len_bytes: u64) -> io::Result<()> {
        self.announced = self.announced.max(len_bytes);
        if self.held.is_empty() {
            self.fill_ahead();
        }
        Ok(())
    }

    fn seal(&mut self) -> io::Result<()> {
        if !self.held.is_empty() {
            self.write_held()?;
            self.file.sync_data()?;
        }
        self.announced = self.end;
        // The size on disk, not `len`: a fill cut short by a full disk may
        // have left zeros past what `len` counts.
        if self.file.metadata()?.len() > self.end {
            self.file.set_len(self.end)?;
            self.file.sync_data()?;
        }
        self.len = self.end;
        Ok(())
    }
}

impl FileSystem for RealFileSystem {
    type File = RealFile;

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn create_new(&self, path: &Path) -> io::Result<RealFile> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        RealFile::opened(file, self.unsynced)
    }

    fn open_append(&self, path: &Path) -> io::Result<RealFile> {
        let file = OpenOptions::new().write(true).open(path)?;
        RealFile::opened(file, self.unsynced)
    }

    fn file_len(&self, path: &Path) -> io::Result<u64> {
        Ok(fs::metadata(path)?.len())
    }

    fn read(&self, path: &Path, bytes_max: u64) -> io::Result<Vec<u8>> {
        let file = File::open(path)?;
        let len_bytes = file.metadata()?.len();
        if len_bytes > bytes_max {
            return Err(too_large(len_bytes, bytes_max));
        }
        let mut bytes = Vec::with_capacity(len_bytes as usize);
        // `take` bounds the read even if the file grows meanwhile.
        file.take(bytes_max + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > bytes_max {
            return Err(too_large(bytes.len() as u64, bytes_max));
        }
        Ok(bytes)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

fn too_large(len_bytes: u64, bytes_max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("file is {len_bytes} bytes, above the {bytes_max}-byte read limit"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_land_after_the_last_write_inside_preallocated_space() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = RealFileSystem::default().create_new(&path).unwrap();
        file.preallocate(4096).unwrap();
        file.write_all(b"abc").unwrap();
        file.write_all(b"de").unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 4096);
        let bytes = fs::read(&path).unwrap();
        assert_eq!(&bytes[..5], b"abcde");
        assert!(
            bytes[5..].iter().all(|b| *b == 0),
            "the rest reads as zeros"
        );
        file.seal().unwrap();
        assert_eq!(
            fs::read(&path).unwrap(),
            b"abcde",
            "sealed at the last write"
        );
    }

    #[test]
    fn zeros_are_written_ahead_of_the_appends_up_to_the_announced_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let announced = 3 * ZERO_FILL_AHEAD_BYTES;
        let mut file = RealFileSystem::default().create_new(&path).unwrap();
        file.preallocate(announced).unwrap();
        let size = || fs::metadata(&path).unwrap().len();
        assert_eq!(size(), ZERO_FILL_AHEAD_BYTES, "one piece ahead at once");
        let record = vec![7u8; 10_000];
        let mut written = 0;
        while written + record.len() as u64 <= announced + 50_000 {
            file.write_all(&record).unwrap();
            written += record.len() as u64;
            assert!(size() >= written, "the size covers every append");
            assert!(
                size() >= written.min(announced),
                "zeros ahead until the announced size"
            );
            assert!(
                size()
                    <= (written + ZERO_FILL_AHEAD_BYTES)
                        .min(announced)
                        .max(written),
                "never more than one piece ahead, nor past the announced size"
            );
        }
        assert_eq!(size(), written, "past the announced size, plain appends");
        let bytes = fs::read(&path).unwrap();
        assert!(bytes.iter().all(|b| *b == 7));
    }

    #[test]
    fn a_reopened_file_appends_at_its_end_and_set_len_moves_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        RealFileSystem::default()
            .create_new(&path)
            .unwrap()
            .write_all(b"0123456789")
            .unwrap();
        let mut file = RealFileSystem::default().open_append(&path).unwrap();
        file.set_len(4).unwrap();
        file.preallocate(100).unwrap();
        file.write_all(b"xy").unwrap();
        file.seal().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"0123xy");
    }

    #[test]
    fn held_bytes_reach_the_file_only_at_their_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let held = RealFileSystem {
            unsynced: Unsynced::HeldInProcess,
        };
        let mut file = held.create_new(&path).unwrap();
        file.write_all(b"abc").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"", "held until the fsync");
        file.sync_data().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"abc");
        file.preallocate(4096).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 4096, "zeros ahead");
        file.write_all(b"de").unwrap();
        // A SIGKILL runs no destructor.
        std::mem::forget(file);
        let bytes = fs::read(&path).unwrap();
        assert_eq!(&bytes[..5], b"abc\0\0", "what was not synced is lost");
        let mut file = held.open_append(&path).unwrap();
        file.set_len(3).unwrap();
        file.write_all(b"fg").unwrap();
        file.seal().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"abcfg", "a seal writes it out");
        file.write_all(b"h").unwrap();
        drop(file);
        assert_eq!(
            fs::read(&path).unwrap(),
            b"abcfgh",
            "a file closed in a running process keeps its bytes"
        );
    }

    #[test]
    fn the_broken_mode_holds_bytes_past_their_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let broken = RealFileSystem {
            unsynced: Unsynced::HeldPastTheirFsync,
        };
        let mut file = broken.create_new(&path).unwrap();
        file.write_all(b"abc").unwrap();
        file.sync_data().unwrap();
        assert_eq!(
            fs::read(&path).unwrap(),
            b"",
            "reported durable, still held"
        );
        file.write_all(b"de").unwrap();
        file.seal().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"abcde");
    }
}

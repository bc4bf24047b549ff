//! The operating system's file system, for production.

use super::{FileSystem, WalFile};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// [`FileSystem`] over `std::fs`: real files, real `fsync`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFileSystem;

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
}

impl RealFile {
    fn opened(file: File) -> io::Result<RealFile> {
        let len = file.metadata()?.len();
        Ok(RealFile {
            file,
            end: len,
            len,
            announced: 0,
        })
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

impl WalFile for RealFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.end)?;
        self.end += bytes.len() as u64;
        self.len = self.len.max(self.end);
        self.fill_ahead();
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn set_len(&mut self, len_bytes: u64) -> io::Result<()> {
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
        self.fill_ahead();
        Ok(())
    }

    fn seal(&mut self) -> io::Result<()> {
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
        RealFile::opened(file)
    }

    fn open_append(&self, path: &Path) -> io::Result<RealFile> {
        let file = OpenOptions::new().write(true).open(path)?;
        RealFile::opened(file)
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
        let mut file = RealFileSystem.create_new(&path).unwrap();
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
        let mut file = RealFileSystem.create_new(&path).unwrap();
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
        RealFileSystem
            .create_new(&path)
            .unwrap()
            .write_all(b"0123456789")
            .unwrap();
        let mut file = RealFileSystem.open_append(&path).unwrap();
        file.set_len(4).unwrap();
        file.preallocate(100).unwrap();
        file.write_all(b"xy").unwrap();
        file.seal().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"0123xy");
    }
}

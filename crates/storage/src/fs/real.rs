//! The operating system's file system, for production.

use super::{FileSystem, WalFile};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// [`FileSystem`] over `std::fs`: real files, real `fsync`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFileSystem;

/// A real file the WAL appends to.
#[derive(Debug)]
pub struct RealFile {
    file: File,
    /// Offset after the last byte written: where the next append goes. The
    /// file may be longer when space was preallocated.
    end: u64,
}

impl RealFile {
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

impl WalFile for RealFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.end)?;
        self.end += bytes.len() as u64;
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn set_len(&mut self, len_bytes: u64) -> io::Result<()> {
        assert!(
            len_bytes <= self.len_bytes()?,
            "set_len only ever shortens a file"
        );
        self.file.set_len(len_bytes)?;
        self.end = len_bytes;
        Ok(())
    }

    fn preallocate(&mut self, len_bytes: u64) -> io::Result<()> {
        if self.len_bytes()? < len_bytes {
            // Extending sets the size without writing the blocks: a hole
            // that reads as zeros.
            self.file.set_len(len_bytes)?;
        }
        Ok(())
    }

    fn seal(&mut self) -> io::Result<()> {
        if self.len_bytes()? > self.end {
            self.file.set_len(self.end)?;
            self.file.sync_data()?;
        }
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
        Ok(RealFile { file, end: 0 })
    }

    fn open_append(&self, path: &Path) -> io::Result<RealFile> {
        let file = OpenOptions::new().write(true).open(path)?;
        let end = file.metadata()?.len();
        Ok(RealFile { file, end })
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

//! The operating system's file system, for production.

use super::{FileSystem, WalFile};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;

/// [`FileSystem`] over `std::fs`: real files, real `fsync`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFileSystem;

/// A real file opened for appending.
#[derive(Debug)]
pub struct RealFile {
    /// Opened with `O_APPEND`, so every write lands at the current end, also
    /// after [`WalFile::set_len`] cut the file.
    file: File,
}

impl WalFile for RealFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn set_len(&mut self, len_bytes: u64) -> io::Result<()> {
        let current_bytes = self.file.metadata()?.len();
        assert!(
            len_bytes <= current_bytes,
            "set_len only ever shortens a file"
        );
        self.file.set_len(len_bytes)
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
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)?;
        Ok(RealFile { file })
    }

    fn open_append(&self, path: &Path) -> io::Result<RealFile> {
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(RealFile { file })
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

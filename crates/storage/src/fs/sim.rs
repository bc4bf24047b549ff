//! A simulated disk that can crash at any mutating operation.
//!
//! Crash tests number every write, fsync, creation, removal, rename and
//! truncation, crash the machine at operation `k`, reboot it with some
//! [`UnsyncedData`] outcome, and check what recovery makes of the result. The
//! model is deliberately the weakest POSIX allows: data is durable only after
//! `fdatasync`, names only after a directory sync.

use super::sim_disk::{Operation, SimDisk};
use super::{FileSystem, SimFault, UnsyncedData, WalFile};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// A handle on a simulated disk. Clones share the disk, so a test keeps one
/// handle to inject faults and reboot while the WAL owns another.
#[derive(Clone, Debug, Default)]
pub struct SimFileSystem {
    /// The shared disk. A mutex rather than a `RefCell` so that a WAL over a
    /// simulated disk is `Send`, like one over the real file system.
    disk: Arc<Mutex<SimDisk>>,
}

/// A file open on a [`SimFileSystem`].
#[derive(Debug)]
pub struct SimFile {
    /// The disk the file lives on.
    disk: Arc<Mutex<SimDisk>>,
    /// Which file, independent of its name (it may be renamed or unlinked).
    inode: u64,
    /// The boot the handle was opened in; after a reboot it is dead, as the
    /// process that held it would be.
    boot: u64,
}

impl SimFileSystem {
    /// An empty disk.
    pub fn new() -> Self {
        SimFileSystem::default()
    }

    fn lock(&self) -> MutexGuard<'_, SimDisk> {
        self.disk
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Arms `fault` to fire at the mutating operation that comes after
    /// `after_operations` more of them succeed (0: the very next one).
    pub fn inject(&self, after_operations: u64, fault: SimFault) {
        self.lock().arm(after_operations, fault);
    }

    /// Clears an armed fault and ends a full disk or failing syncs.
    pub fn heal(&self) {
        self.lock().heal();
    }

    /// Mutating operations performed so far, the numbering of crash points.
    pub fn operations(&self) -> u64 {
        self.lock().operations()
    }

    /// Whether an injected crash has powered the disk off.
    pub fn is_crashed(&self) -> bool {
        self.lock().is_crashed()
    }

    /// Power-cycles the machine, crashed or not: `unsynced` decides what
    /// survives of unsynced data and names; faults are cleared and every
    /// file handle from before becomes unusable.
    pub fn reboot(&self, unsynced: UnsyncedData) {
        self.lock().reboot(unsynced);
    }

    /// An independent copy of the disk as it is now (faults and all): lets a
    /// test try several futures from one crash.
    pub fn fork(&self) -> SimFileSystem {
        let disk = self.lock().clone();
        SimFileSystem {
            disk: Arc::new(Mutex::new(disk)),
        }
    }

    /// Current bytes of a file, for tests that inspect or damage files.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let disk = self.lock();
        let inode = disk.inode_of(path).ok()?;
        Some(disk.data(inode).to_vec())
    }

    /// Replaces a file's bytes durably, as bit rot or a careless operator
    /// would.
    pub fn replace_contents(&self, path: &Path, bytes: Vec<u8>) -> io::Result<()> {
        self.lock().replace(path, bytes)
    }

    fn file(&self, inode: u64, boot: u64) -> SimFile {
        SimFile {
            disk: Arc::clone(&self.disk),
            inode,
            boot,
        }
    }
}

impl FileSystem for SimFileSystem {
    type File = SimFile;

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        let boot = disk.boot;
        disk.check_alive(boot)?;
        disk.create_dir_all(dir);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let disk = self.lock();
        disk.check_alive(disk.boot)?;
        if !disk.has_dir(dir) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no such directory (simulated)",
            ));
        }
        Ok(disk.list(dir))
    }

    fn create_new(&self, path: &Path) -> io::Result<SimFile> {
        let mut disk = self.lock();
        let boot = disk.boot;
        disk.begin(Operation::Create, boot)?;
        let inode = disk.create(path)?;
        Ok(self.file(inode, boot))
    }

    fn open_append(&self, path: &Path) -> io::Result<SimFile> {
        let disk = self.lock();
        disk.check_alive(disk.boot)?;
        let inode = disk.inode_of(path)?;
        Ok(self.file(inode, disk.boot))
    }

    fn file_len(&self, path: &Path) -> io::Result<u64> {
        let disk = self.lock();
        disk.check_alive(disk.boot)?;
        Ok(disk.data(disk.inode_of(path)?).len() as u64)
    }

    fn read(&self, path: &Path, bytes_max: u64) -> io::Result<Vec<u8>> {
        let disk = self.lock();
        disk.check_alive(disk.boot)?;
        let data = disk.data(disk.inode_of(path)?);
        if data.len() as u64 > bytes_max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "file is {} bytes, above the {bytes_max}-byte read limit",
                    data.len()
                ),
            ));
        }
        Ok(data.to_vec())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        let boot = disk.boot;
        disk.begin(Operation::Metadata, boot)?;
        disk.remove(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        let boot = disk.boot;
        disk.begin(Operation::Metadata, boot)?;
        disk.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        let boot = disk.boot;
        disk.begin(Operation::Sync, boot)?;
        disk.sync_dir(dir);
        Ok(())
    }
}

impl SimFile {
    fn lock(&self) -> MutexGuard<'_, SimDisk> {
        self.disk
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl WalFile for SimFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut disk = self.lock();
        disk.begin(Operation::Write, self.boot)?;
        disk.write(self.inode, bytes)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        let mut disk = self.lock();
        disk.begin(Operation::Sync, self.boot)?;
        disk.sync(self.inode);
        Ok(())
    }

    fn set_len(&mut self, len_bytes: u64) -> io::Result<()> {
        let mut disk = self.lock();
        disk.begin(Operation::Metadata, self.boot)?;
        disk.set_len(self.inode, len_bytes as usize);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn dir() -> PathBuf {
        PathBuf::from("/data")
    }

    #[test]
    fn unsynced_bytes_and_names_are_lost_by_a_crash() {
        let fs = SimFileSystem::new();
        fs.create_dir_all(&dir()).unwrap();
        let path = dir().join("a");
        let mut file = fs.create_new(&path).unwrap();
        file.write_all(b"hello").unwrap();
        file.sync_data().unwrap();
        fs.reboot(UnsyncedData::Lost);
        assert_eq!(fs.contents(&path), None, "name was never made durable");

        let mut file = fs.create_new(&path).unwrap();
        file.write_all(b"hello").unwrap();
        file.sync_data().unwrap();
        fs.sync_dir(&dir()).unwrap();
        file.write_all(b" world").unwrap();
        fs.reboot(UnsyncedData::Lost);
        assert_eq!(fs.contents(&path).unwrap(), b"hello");
        assert!(file.write_all(b"x").is_err(), "handles die with the boot");
    }

    #[test]
    fn torn_crash_keeps_part_of_the_unsynced_tail() {
        let fs = SimFileSystem::new();
        fs.create_dir_all(&dir()).unwrap();
        let path = dir().join("a");
        let mut file = fs.create_new(&path).unwrap();
        file.write_all(b"0123").unwrap();
        file.sync_data().unwrap();
        fs.sync_dir(&dir()).unwrap();
        file.write_all(b"456789").unwrap();
        fs.reboot(UnsyncedData::Torn {
            kept_per_mille: 500,
            rest_zeroed: true,
        });
        assert_eq!(fs.contents(&path).unwrap(), b"0123456\0\0\0");
    }

    #[test]
    fn crash_fault_fires_at_the_armed_operation_and_sticks() {
        let fs = SimFileSystem::new();
        fs.create_dir_all(&dir()).unwrap();
        let mut file = fs.create_new(&dir().join("a")).unwrap();
        fs.inject(1, SimFault::Crash);
        file.write_all(b"ok").unwrap();
        assert!(file.sync_data().is_err());
        assert!(fs.is_crashed());
        assert!(
            fs.list_dir(&dir()).is_err(),
            "a crashed disk answers nothing"
        );
        fs.reboot(UnsyncedData::Kept);
        assert_eq!(fs.list_dir(&dir()).unwrap(), vec!["a".to_string()]);
    }

    #[test]
    fn unsynced_removal_and_rename_are_undone_by_a_crash() {
        let fs = SimFileSystem::new();
        fs.create_dir_all(&dir()).unwrap();
        let mut file = fs.create_new(&dir().join("a")).unwrap();
        file.write_all(b"x").unwrap();
        file.sync_data().unwrap();
        fs.sync_dir(&dir()).unwrap();
        fs.rename(&dir().join("a"), &dir().join("b")).unwrap();
        fs.reboot(UnsyncedData::Lost);
        assert_eq!(fs.list_dir(&dir()).unwrap(), vec!["a".to_string()]);
        fs.remove_file(&dir().join("a")).unwrap();
        fs.reboot(UnsyncedData::Lost);
        assert_eq!(fs.contents(&dir().join("a")).unwrap(), b"x");
    }
}

//! The state of a simulated disk: file contents as the page cache sees them
//! and as the platter holds them, names as the directory shows them and as
//! they would survive a crash, and the fault that is armed.

use super::{SimFault, UnsyncedData};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

/// One file's bytes, twice: what reads see and what a crash keeps.
#[derive(Clone, Debug, Default)]
struct SimInode {
    /// What reads return: the page cache.
    data: Vec<u8>,
    /// What survives a crash that loses everything unsynced.
    durable: Vec<u8>,
    /// Length of the prefix on which `data` and `durable` agree. Syncing
    /// copies only what lies past it, so a sync costs the unsynced bytes,
    /// not the file size.
    same_prefix_bytes: usize,
}

impl SimInode {
    fn sync(&mut self) {
        self.durable.truncate(self.same_prefix_bytes);
        self.durable
            .extend_from_slice(&self.data[self.same_prefix_bytes..]);
        self.same_prefix_bytes = self.data.len();
        assert_eq!(
            self.durable.len(),
            self.data.len(),
            "a synced file is durable as read"
        );
    }

    /// Replaces `data` with what a crash leaves of it.
    fn crash(&mut self, unsynced: UnsyncedData) {
        let synced = self.same_prefix_bytes;
        let unsynced_bytes = self.data.len() - synced;
        match unsynced {
            UnsyncedData::Lost => self.data = self.durable.clone(),
            UnsyncedData::Kept => {}
            UnsyncedData::Torn {
                kept_per_mille,
                rest_zeroed,
            } => {
                assert!(kept_per_mille <= 1000, "kept_per_mille is a fraction");
                let kept = unsynced_bytes * kept_per_mille as usize / 1000;
                if rest_zeroed {
                    self.data[synced + kept..].fill(0);
                } else {
                    self.data.truncate(synced + kept);
                }
            }
        }
        self.durable = self.data.clone();
        self.same_prefix_bytes = self.data.len();
    }
}

/// Kinds of mutating operations, for fault injection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    /// Appending bytes.
    Write,
    /// `fdatasync` or directory sync.
    Sync,
    /// Creating a file.
    Create,
    /// Removing, renaming or truncating.
    Metadata,
}

/// A whole simulated disk.
#[derive(Clone, Debug, Default)]
pub(crate) struct SimDisk {
    /// File contents by inode number; an inode lives while a name (current or
    /// durable) or an open handle may still reach it.
    inodes: BTreeMap<u64, SimInode>,
    /// Names as the directory shows them now.
    names: BTreeMap<PathBuf, u64>,
    /// Names as a crash would leave them: updated per directory by a sync.
    durable_names: BTreeMap<PathBuf, u64>,
    /// Directories that exist. Directory creation is treated as durable at
    /// once: the WAL creates its directory once, before anything else.
    dirs: BTreeSet<PathBuf>,
    /// Next inode number to hand out.
    next_inode: u64,
    /// Mutating operations performed so far; crash points are numbered by it.
    operations: u64,
    /// A fault that fires when `operations` reaches the given count.
    armed: Option<(u64, SimFault)>,
    /// Writes and creations fail (see [`SimFault::DiskFull`]).
    disk_full: bool,
    /// Syncs fail (see [`SimFault::SyncFails`]).
    syncs_fail: bool,
    /// Powered off: every call fails until a reboot.
    crashed: bool,
    /// Incremented by every reboot; handles from an earlier boot are dead.
    pub(crate) boot: u64,
}

fn simulated(message: &str) -> io::Error {
    io::Error::other(format!("{message} (simulated)"))
}

impl SimDisk {
    /// Counts one mutating operation, firing the armed fault if it is due.
    pub(crate) fn begin(&mut self, operation: Operation, boot: u64) -> io::Result<()> {
        self.check_alive(boot)?;
        if let Some((at, fault)) = self.armed {
            if self.operations >= at {
                self.armed = None;
                match fault {
                    SimFault::Crash => {
                        self.crashed = true;
                        return Err(simulated("power lost"));
                    }
                    SimFault::DiskFull => self.disk_full = true,
                    SimFault::SyncFails => self.syncs_fail = true,
                }
            }
        }
        self.operations += 1;
        match operation {
            Operation::Create if self.disk_full => Err(simulated("no space left on device")),
            Operation::Sync if self.syncs_fail => Err(simulated("input/output error")),
            _ => Ok(()),
        }
    }

    /// Fails if the disk is off or the caller's handle predates a reboot.
    pub(crate) fn check_alive(&self, boot: u64) -> io::Result<()> {
        if self.crashed {
            return Err(simulated("power lost"));
        }
        if boot != self.boot {
            return Err(simulated("stale handle from before a reboot"));
        }
        Ok(())
    }

    pub(crate) fn arm(&mut self, after_operations: u64, fault: SimFault) {
        self.armed = Some((self.operations + after_operations, fault));
    }

    pub(crate) fn heal(&mut self) {
        self.armed = None;
        self.disk_full = false;
        self.syncs_fail = false;
    }

    pub(crate) fn operations(&self) -> u64 {
        self.operations
    }

    pub(crate) fn is_crashed(&self) -> bool {
        self.crashed
    }

    /// Power-cycles: applies `unsynced` to every file and every name, then
    /// clears all faults.
    pub(crate) fn reboot(&mut self, unsynced: UnsyncedData) {
        if unsynced == UnsyncedData::Kept {
            self.durable_names = self.names.clone();
        } else {
            self.names = self.durable_names.clone();
        }
        let live: BTreeSet<u64> = self.names.values().copied().collect();
        self.inodes.retain(|inode, _| live.contains(inode));
        for inode in self.inodes.values_mut() {
            inode.crash(unsynced);
        }
        self.heal();
        self.crashed = false;
        self.boot += 1;
    }

    pub(crate) fn create_dir_all(&mut self, dir: &Path) {
        for ancestor in dir.ancestors() {
            self.dirs.insert(ancestor.to_path_buf());
        }
    }

    pub(crate) fn has_dir(&self, dir: &Path) -> bool {
        self.dirs.contains(dir)
    }

    pub(crate) fn list(&self, dir: &Path) -> Vec<String> {
        let names = self.names.keys().filter(|path| path.parent() == Some(dir));
        names
            .filter_map(|path| path.file_name()?.to_str().map(str::to_owned))
            .collect()
    }

    pub(crate) fn inode_of(&self, path: &Path) -> io::Result<u64> {
        self.names
            .get(path)
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file (simulated)"))
    }

    pub(crate) fn create(&mut self, path: &Path) -> io::Result<u64> {
        let parent = path.parent().unwrap_or(Path::new(""));
        if !self.dirs.contains(parent) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no such directory (simulated)",
            ));
        }
        if self.names.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "file exists (simulated)",
            ));
        }
        let inode = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(inode, SimInode::default());
        self.names.insert(path.to_path_buf(), inode);
        Ok(inode)
    }

    pub(crate) fn data(&self, inode: u64) -> &[u8] {
        &self.inodes[&inode].data
    }

    /// Appends `bytes`; on a full disk, appends half of them and fails.
    pub(crate) fn write(&mut self, inode: u64, bytes: &[u8]) -> io::Result<()> {
        let file = self
            .inodes
            .get_mut(&inode)
            .expect("open handles keep inodes");
        if self.disk_full {
            file.data.extend_from_slice(&bytes[..bytes.len() / 2]);
            return Err(simulated("no space left on device"));
        }
        file.data.extend_from_slice(bytes);
        Ok(())
    }

    pub(crate) fn sync(&mut self, inode: u64) {
        self.inodes
            .get_mut(&inode)
            .expect("open handles keep inodes")
            .sync();
    }

    pub(crate) fn set_len(&mut self, inode: u64, len_bytes: usize) {
        let file = self
            .inodes
            .get_mut(&inode)
            .expect("open handles keep inodes");
        assert!(
            len_bytes <= file.data.len(),
            "set_len only ever shortens a file"
        );
        file.data.truncate(len_bytes);
        file.same_prefix_bytes = file.same_prefix_bytes.min(len_bytes);
    }

    pub(crate) fn remove(&mut self, path: &Path) -> io::Result<()> {
        self.inode_of(path)?;
        self.names.remove(path);
        Ok(())
    }

    pub(crate) fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let inode = self.inode_of(from)?;
        self.names.remove(from);
        self.names.insert(to.to_path_buf(), inode);
        Ok(())
    }

    /// Makes the current names of `dir`'s entries the durable ones.
    pub(crate) fn sync_dir(&mut self, dir: &Path) {
        self.durable_names
            .retain(|path, _| path.parent() != Some(dir));
        for (path, inode) in &self.names {
            if path.parent() == Some(dir) {
                self.durable_names.insert(path.clone(), *inode);
            }
        }
    }

    /// Overwrites a file's bytes, durably, as bit rot or an operator would.
    pub(crate) fn replace(&mut self, path: &Path, bytes: Vec<u8>) -> io::Result<()> {
        let inode = self.inode_of(path)?;
        let file = self.inodes.get_mut(&inode).expect("named inodes exist");
        file.data = bytes;
        file.same_prefix_bytes = 0;
        file.sync();
        Ok(())
    }
}

//! [`DiskFull`]: a small tmpfs mounted under one member's data dir, which
//! the nemesis fills to the last byte and frees again. A member whose log
//! cannot grow must fail with a clear error and lose nothing it
//! acknowledged; it stops (fail-stop), and the nemesis restarts it once
//! the space is back.
//!
//! Mounting needs root; `verify --no-disk-full` runs without it.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tmpfs's size: room for a run's log and snapshots, small enough to
/// fill in a moment.
const TMPFS_SIZE: &str = "256m";
/// The filler is written in pieces of this size until the disk is full.
const PIECE_BYTES: usize = 1 << 20;

/// A tmpfs mounted at a member's data dir; unmounted when dropped.
pub struct DiskFull {
    /// The member whose data dir it is (1-based).
    pub member: usize,
    dir: PathBuf,
    /// Still mounted (not yet unmounted by [`DiskFull::unmount`]).
    mounted: bool,
}

impl DiskFull {
    /// Mounts a fresh tmpfs at `dir` (created if missing) for `member`.
    pub fn mount(member: usize, dir: &Path) -> Result<DiskFull> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        run(Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={TMPFS_SIZE}"),
                "bwverify",
            ])
            .arg(dir))?;
        Ok(DiskFull {
            member,
            dir: dir.to_path_buf(),
            mounted: true,
        })
    }

    /// Unmounts it, failing if something still holds it.
    pub fn unmount(mut self) -> Result<()> {
        self.mounted = false;
        run(Command::new("umount").arg(&self.dir))
    }

    /// Copies what the tmpfs holds to `to` (for a failed run, whose files
    /// are kept), as far as it can.
    pub fn keep_copy(&self, to: &Path) {
        let _ = std::fs::create_dir_all(to);
        let _ = Command::new("cp")
            .arg("-a")
            .arg(self.dir.join("."))
            .arg(to)
            .status();
    }

    /// Fills the tmpfs until a write fails for want of space; the space
    /// comes back when the returned filler is dropped.
    pub fn fill(&self) -> Result<Filler> {
        let path = self.dir.join("disk-full-filler");
        let mut file = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let piece = vec![0xA5u8; PIECE_BYTES];
        loop {
            match file.write(&piece) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(error) if error.kind() == std::io::ErrorKind::StorageFull => break,
                Err(error) => {
                    let _ = std::fs::remove_file(&path);
                    return Err(error).context("cannot fill the tmpfs");
                }
            }
        }
        Ok(Filler { path })
    }
}

impl Drop for DiskFull {
    fn drop(&mut self) {
        if !self.mounted {
            return;
        }
        if let Err(error) = run(Command::new("umount").arg(&self.dir)) {
            // Something still holds it: detach it lazily, and say so.
            eprintln!("verify: {error:#}; detaching it lazily");
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// The file that fills the disk; removed when dropped.
pub struct Filler {
    path: PathBuf,
}

impl Drop for Filler {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Why a tmpfs cannot be mounted here, if it cannot (checked before a
/// run starts, on a scratch directory).
pub fn tmpfs_unavailable() -> Option<String> {
    let dir = std::env::temp_dir().join(format!("bw-verify-tmpfs-{}", std::process::id()));
    let result = DiskFull::mount(0, &dir).and_then(DiskFull::unmount);
    let _ = std::fs::remove_dir(&dir);
    result.err().map(|error| format!("{error:#}"))
}

/// Runs `command`, failing with its stderr unless it succeeds.
fn run(command: &mut Command) -> Result<()> {
    let output = command
        .output()
        .with_context(|| format!("cannot run {:?}", command.get_program()))?;
    if !output.status.success() {
        bail!(
            "{:?} failed: {}",
            command,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

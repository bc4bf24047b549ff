//! Disk faults for the nemesis: a member stopped and its data directory
//! damaged as a failing disk would leave it, then started again. The
//! member must find the damage in its promise record, repair from its
//! peers and lose nothing acknowledged (docs/architecture.md, "Amnesia");
//! with `--unsafe-mutation ignores-promises` it comes back as a blank
//! voter, and the checks must catch what that loses.
//!
//! Only the log (`wal/`) is damaged, never the promise record beside it:
//! a member that loses both refuses to start, by design.

use anyhow::{Context, Result};
use bellwether_core::Rng;
use std::path::{Path, PathBuf};

/// Largest tail cut for a lost write: a few records.
const LOST_WRITE_BYTES_MAX: u64 = 4_096;

/// One way the log is damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// `wal/` deleted.
    Deleted,
    /// One segment cut at a random point and every later one deleted.
    Truncated,
    /// One byte of a segment's records flipped.
    Corrupted,
    /// The newest segment's last few records gone: a write the disk had
    /// fsync'd and then dropped.
    LostWrite,
}

impl Loss {
    /// Every loss with its name, as `--disk-loss` spells it.
    pub(super) const NAMES: [(Loss, &'static str); 4] = [
        (Loss::Deleted, "deleted"),
        (Loss::Truncated, "truncated"),
        (Loss::Corrupted, "corrupted"),
        (Loss::LostWrite, "lost-write"),
    ];

    /// The loss named `name`, if there is one.
    pub(super) fn named(name: &str) -> Option<Loss> {
        Loss::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(loss, _)| *loss)
    }

    /// One of the four, at random.
    pub(super) fn draw(rng: &mut Rng) -> Loss {
        match rng.range(0, 4) {
            0 => Loss::Deleted,
            1 => Loss::Truncated,
            2 => Loss::Corrupted,
            _ => Loss::LostWrite,
        }
    }

    /// What it is, for the nemesis' report.
    pub(super) fn noun(self) -> &'static str {
        match self {
            Loss::Deleted => "log deleted",
            Loss::Truncated => "log cut short",
            Loss::Corrupted => "a corrupt byte",
            Loss::LostWrite => "a lost fsync'd write",
        }
    }
}

/// The log segments in `data_dir/wal`, oldest first, with the bytes each
/// really holds (segments are zero-filled ahead of their appends).
fn segments(data_dir: &Path) -> Result<Vec<(PathBuf, u64)>> {
    let wal = data_dir.join("wal");
    let Ok(entries) = std::fs::read_dir(&wal) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|x| x == "wal") {
            let bytes = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
            let written = bytes.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
            found.push((path, written as u64));
        }
    }
    found.sort();
    Ok(found)
}

/// Damages the log of a stopped member's `data_dir` as `loss` says.
/// Returns false when there was no log to damage.
pub(super) fn damage(data_dir: &Path, loss: Loss, rng: &mut Rng) -> Result<bool> {
    let wal = data_dir.join("wal");
    let segments = segments(data_dir)?;
    if segments.is_empty() {
        return Ok(false);
    }
    let cut = |path: &Path, length: u64| -> Result<()> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("open {}", path.display()))?;
        file.set_len(length)
            .with_context(|| format!("truncate {}", path.display()))?;
        file.sync_all()?;
        Ok(())
    };
    match loss {
        Loss::Deleted => {
            std::fs::remove_dir_all(&wal).with_context(|| format!("delete {}", wal.display()))?
        }
        Loss::Truncated => {
            let k = rng.range(0, segments.len() as u64) as usize;
            let (path, written) = &segments[k];
            cut(path, rng.range(0, *written.max(&1)))?;
            for (later, _) in &segments[k + 1..] {
                std::fs::remove_file(later)
                    .with_context(|| format!("delete {}", later.display()))?;
            }
        }
        Loss::Corrupted => {
            let (path, written) = &segments[rng.range(0, segments.len() as u64) as usize];
            if *written == 0 {
                return Ok(false);
            }
            let mut bytes = std::fs::read(path)?;
            bytes[rng.range(0, *written) as usize] ^= 0xff;
            std::fs::write(path, bytes).with_context(|| format!("write {}", path.display()))?;
        }
        Loss::LostWrite => {
            let (path, written) = segments.last().expect("not empty");
            if *written == 0 {
                return Ok(false);
            }
            let lost = rng.range(1, LOST_WRITE_BYTES_MAX.min(*written) + 1);
            cut(path, written - lost)?;
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bw-disk-loss-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("wal")).unwrap();
        for (k, len) in [(1u8, 5_000usize), (2, 9_000), (3, 3_000)] {
            let mut bytes = vec![k; len];
            bytes.extend(vec![0; 4_000]); // zero-filled ahead
            std::fs::write(dir.join(format!("wal/000{k}.wal")), bytes).unwrap();
        }
        std::fs::write(dir.join("promises"), b"kept").unwrap();
        dir
    }

    #[test]
    fn each_loss_damages_the_log_and_never_the_promise_record() {
        let mut rng = Rng::new(3);
        for loss in [
            Loss::Deleted,
            Loss::Truncated,
            Loss::Corrupted,
            Loss::LostWrite,
        ] {
            let dir = log_dir(&format!("{loss:?}"));
            let contents = |dir: &Path| -> Vec<(PathBuf, Vec<u8>)> {
                segments(dir)
                    .unwrap()
                    .into_iter()
                    .map(|(path, _)| (path.clone(), std::fs::read(&path).unwrap()))
                    .collect()
            };
            let before = contents(&dir);
            assert!(damage(&dir, loss, &mut rng).unwrap(), "{loss:?}");
            assert!(contents(&dir) != before, "{loss:?} changed nothing");
            let after = segments(&dir).unwrap();
            match loss {
                Loss::Deleted => assert!(!dir.join("wal").exists()),
                Loss::LostWrite => {
                    assert_eq!(after.len(), 3);
                    assert!(after[2].1 < 3_000, "{after:?}");
                }
                Loss::Truncated => assert!(after.len() <= 3),
                Loss::Corrupted => assert_eq!(after.len(), 3),
            }
            assert_eq!(std::fs::read(dir.join("promises")).unwrap(), b"kept");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

//! What the benchmarks that start clusters share: a scratch directory
//! that keeps only the member logs of a failed run, and a flag set by
//! SIGINT or SIGTERM so that a run can stop what it started.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A benchmark's directory. A temporary one is removed on drop; when the
/// run failed (or panicked) only the member logs are kept.
pub struct ScratchDir {
    /// The directory.
    pub path: PathBuf,
    /// True when created in the temporary directory.
    temporary: bool,
    /// Keep the logs on drop, for the error message that names them.
    pub keep_logs: bool,
}

impl ScratchDir {
    /// `dir` (which must be empty or new), or a temporary directory named
    /// after `bench`.
    pub fn create(dir: Option<&Path>, bench: &str) -> Result<ScratchDir> {
        let (path, temporary) = match dir {
            Some(dir) => (dir.to_path_buf(), false),
            None => (
                std::env::temp_dir()
                    .join(format!("bellwether-bench-{bench}-{}", std::process::id())),
                true,
            ),
        };
        if path.exists() && std::fs::read_dir(&path)?.next().is_some() {
            bail!(
                "{} is not empty; pass an empty or new --dir",
                path.display()
            );
        }
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(ScratchDir {
            path,
            temporary,
            keep_logs: false,
        })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !self.temporary {
            return;
        }
        if !self.keep_logs && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.path);
            return;
        }
        // Data directories go, logs stay: <dir>/<system>/<member>/.
        for system in std::fs::read_dir(&self.path)
            .into_iter()
            .flatten()
            .flatten()
        {
            for entry in std::fs::read_dir(system.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if entry.path().is_dir() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
}

/// A flag set by SIGINT or SIGTERM, from a thread that waits for them.
/// The handlers are in place when this returns, before any process starts.
pub fn watch_for_interruption() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let setter = flag.clone();
    let (installed, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        let signalled = runtime.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut interrupt)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return false;
            };
            let _ = installed.send(());
            tokio::select! {
                _ = term.recv() => {}
                _ = interrupt.recv() => {}
            }
            true
        });
        if signalled {
            setter.store(true, Ordering::SeqCst);
        }
    });
    let _ = ready.recv_timeout(Duration::from_secs(5));
    flag
}

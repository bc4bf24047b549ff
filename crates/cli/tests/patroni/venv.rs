//! target/patroni-venv: Patroni and psycopg2 from PyPI, pinned, made once
//! and kept in target/ like the build (scripts/test.sh makes it first; a
//! test makes it when it is missing), or under the temporary directory
//! when the checkout lies where the `postgres` user cannot enter.
//!
//! It is made with Debian's /usr/bin/python3, not whichever `python3` is
//! first on PATH: a venv's interpreter is a link to the Python it was made
//! with, and PostgreSQL refuses to run as root, so Patroni runs as the
//! unprivileged `postgres` user, which cannot enter a Python installed
//! under /root (pyenv). A venv that user cannot run is made again.

use crate::common::zookeeper::workspace;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What the venv holds: the Patroni release the test is written for, with
/// its etcd v3 support, and a PostgreSQL driver for Patroni and the poller.
const PACKAGES: [&str; 2] = ["patroni[etcd3]==4.1.5", "psycopg2-binary==2.9.10"];
/// The Python the venv is made with (Debian's python3 and python3-venv).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// The venv's `bin/` directory, the venv made when missing or stale. One
/// test at a time: both tests of the file need it.
pub fn patroni_venv(run_as: Option<(u32, u32)>) -> PathBuf {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let venv = venv_dir();
    let bin = venv.join("bin");
    if usable(&bin, run_as) {
        return bin;
    }
    let _ = std::fs::remove_dir_all(&venv);
    let made = Command::new(SYSTEM_PYTHON)
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "cannot run {SYSTEM_PYTHON} ({error}): install Debian's python3 and \
                 python3-venv (scripts/test.sh does)"
            )
        });
    assert!(
        made.status.success(),
        "{SYSTEM_PYTHON} -m venv {} failed: {}\ninstall Debian's python3-venv \
         (scripts/test.sh does)",
        venv.display(),
        String::from_utf8_lossy(&made.stderr)
    );
    let installed = Command::new(bin.join("pip"))
        .args(["install", "--quiet"])
        .args(PACKAGES)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}/pip: {error}", bin.display()));
    assert!(
        installed.status.success(),
        "pip install {} into {} failed (PyPI must be reachable): {}{}",
        PACKAGES.join(" "),
        venv.display(),
        String::from_utf8_lossy(&installed.stdout),
        String::from_utf8_lossy(&installed.stderr)
    );
    assert!(
        usable(&bin, run_as),
        "{} holds {} but the user Patroni runs as ({run_as:?}) cannot run its \
         patroni: every directory above it must be world-executable",
        venv.display(),
        PACKAGES.join(" ")
    );
    bin
}

/// target/patroni-venv when the user Patroni runs as can reach it (every
/// directory above it lets others in), else a venv under the system's
/// temporary directory: a checkout under /root cannot be entered by
/// `postgres`, and the test must not depend on where it was cloned.
fn venv_dir() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let inside = workspace().join("target/patroni-venv");
    let others_enter = |dir: &Path| {
        std::fs::metadata(dir).is_ok_and(|meta| meta.permissions().mode() & 0o001 != 0)
    };
    if workspace().ancestors().all(others_enter) {
        inside
    } else {
        std::env::temp_dir().join("bellwether-patroni-venv")
    }
}

/// Whether `bin` has the pinned Patroni with psycopg2, runnable by the
/// user Patroni runs as.
fn usable(bin: &Path, run_as: Option<(u32, u32)>) -> bool {
    let pinned = Command::new(bin.join("python"))
        .args([
            "-c",
            "import importlib.metadata as m, sys, psycopg2; \
             sys.exit(m.version('patroni') != '4.1.5')",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    let mut version = Command::new(bin.join("patroni"));
    version
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some((uid, gid)) = run_as {
        use std::os::unix::process::CommandExt;
        version.uid(uid).gid(gid);
    }
    pinned && version.status().is_ok_and(|status| status.success())
}

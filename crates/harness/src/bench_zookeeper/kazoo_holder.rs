//! The election holder of `bench zookeeper`'s failover runs: kazoo's
//! `Election` recipe in a Python process of its own, which the bench
//! SIGKILLs, as an application that holds a ZooKeeper election dies.
//!
//! kazoo 2.10.0 comes from, first found: `BELLWETHER_KAZOO_PYTHON` (a
//! Python that has it), `target/zk-venv` under the working directory (the
//! tests' venv, which scripts/test.sh makes), or a venv the bench makes
//! once under `~/.cache/bellwether/kazoo-2.10.0` (`python3 -m venv`, then
//! pip, which needs PyPI).

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The kazoo release the holder runs.
const KAZOO: &str = "kazoo==2.10.0";
/// Longest wait for the holder to lead (its interpreter's start included).
const LEAD_TIME_MAX: Duration = Duration::from_secs(30);

/// What the holder runs: it joins kazoo's Election at PARENT on HOSTS with
/// a 4 s session timeout (ZooKeeper's smallest at its default tick), and
/// once it leads prints the timeout it asked for (kazoo keeps no other)
/// and holds forever.
const SCRIPT: &str = r#"import sys, time
from kazoo.client import KazooClient
hosts, parent = sys.argv[1], sys.argv[2]
zk = KazooClient(hosts=hosts, timeout=4.0)
zk.start(timeout=30)
def lead():
    print("leading %d" % zk._session_timeout, flush=True)
    while True:
        time.sleep(60)
zk.Election(parent, "holder").run(lead)
"#;

/// A Python with kazoo, made once if none is found (see the module docs).
pub fn python() -> Result<PathBuf> {
    if let Some(python) = std::env::var_os("BELLWETHER_KAZOO_PYTHON") {
        let python = PathBuf::from(python);
        if !has_kazoo(&python) {
            bail!(
                "BELLWETHER_KAZOO_PYTHON={} has no {KAZOO}",
                python.display()
            );
        }
        return Ok(python);
    }
    let tests = PathBuf::from("target/zk-venv/bin/python");
    if has_kazoo(&tests) {
        return Ok(tests);
    }
    let home = std::env::var_os("HOME").context("HOME is not set: cannot place kazoo's venv")?;
    let venv = PathBuf::from(home).join(".cache/bellwether/kazoo-2.10.0");
    let python = venv.join("bin/python");
    if has_kazoo(&python) {
        return Ok(python);
    }
    eprintln!(
        "bench zookeeper: making {} with {KAZOO} for the election holder",
        venv.display()
    );
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .context("cannot run python3 (install Debian's python3 and python3-venv)")?;
    if !made.status.success() {
        bail!(
            "python3 -m venv {} failed (install Debian's python3-venv): {}",
            venv.display(),
            String::from_utf8_lossy(&made.stderr)
        );
    }
    let installed = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", KAZOO])
        .output()
        .with_context(|| format!("cannot run {}/bin/pip", venv.display()))?;
    if !installed.status.success() || !has_kazoo(&python) {
        bail!(
            "pip install {KAZOO} into {} failed (PyPI must be reachable): {}",
            venv.display(),
            String::from_utf8_lossy(&installed.stderr)
        );
    }
    Ok(python)
}

fn has_kazoo(python: &Path) -> bool {
    Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m, sys; sys.exit(m.version('kazoo') != '2.10.0')",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A holder process; SIGKILLed when dropped if still running.
pub struct KazooHolder {
    child: Child,
    /// The session timeout it asked for.
    pub session_timeout: Duration,
}

impl KazooHolder {
    /// Starts the holder on `endpoint` (its session stays on that server)
    /// in kazoo's Election at `parent`, writing its script into `dir`;
    /// returns once it leads.
    pub fn start(python: &Path, dir: &Path, endpoint: &str, parent: &str) -> Result<KazooHolder> {
        std::fs::create_dir_all(dir)?;
        let script = dir.join("kazoo_holder.py");
        std::fs::write(&script, SCRIPT)
            .with_context(|| format!("cannot write {}", script.display()))?;
        let log = std::fs::File::create(dir.join("kazoo_holder.log"))?;
        let mut child = Command::new(python)
            .arg(&script)
            .args([endpoint, parent])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot run {}", python.display()))?;
        let stdout = child.stdout.take().expect("piped");
        let mut holder = KazooHolder {
            child,
            session_timeout: Duration::ZERO,
        };
        let (line_in, line) = mpsc::channel();
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = BufReader::new(stdout).read_line(&mut first);
            let _ = line_in.send(first);
        });
        let first = line.recv_timeout(LEAD_TIME_MAX).map_err(|_| {
            anyhow::anyhow!(
                "the kazoo holder did not lead within {LEAD_TIME_MAX:?} (see kazoo_holder.log)"
            )
        })?;
        let Some(ms) = first
            .trim()
            .strip_prefix("leading ")
            .and_then(|ms| ms.parse::<u64>().ok())
        else {
            bail!("the kazoo holder said {first:?}, not that it leads (see kazoo_holder.log)");
        };
        holder.session_timeout = Duration::from_millis(ms);
        Ok(holder)
    }

    /// SIGKILLs the holder and reaps it.
    pub fn kill(&mut self) -> Result<()> {
        self.child
            .kill()
            .with_context(|| format!("cannot SIGKILL pid {}", self.child.id()))?;
        let _ = self.child.wait();
        Ok(())
    }
}

impl Drop for KazooHolder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

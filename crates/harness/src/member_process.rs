//! [`Member`]: one child process of a benchmark or a verify run,
//! supervised: killed on drop, so a failed or panicking run leaves nothing
//! running, and its output appended to a log named in every error about
//! it. Both clusters under test ([`crate::process_cluster`] for bellwether,
//! [`crate::etcd_cluster`] for etcd) are made of these.

use anyhow::{bail, Context, Result};
use bellwether_cli_common::signals::{send_signal, SIGTERM};
use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often a bounded wait for a process to exit looks again.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// One child process of the benchmark. It runs in its own process group,
/// so a Ctrl-C at the terminal reaches only the benchmark, which then stops
/// every member itself (and removes its firewall rules).
pub struct Member {
    /// The running process; `None` once it has been reaped.
    child: Option<Child>,
    /// Where its stdout and stderr go (appended to across restarts); named
    /// in every error about this member.
    log_path: PathBuf,
    /// The log's length when the current process started: what it wrote
    /// begins there.
    log_start: u64,
}

impl Member {
    /// Starts `command` with stdout and stderr appended to `log_path`.
    pub fn spawn(command: Command, log_path: PathBuf) -> Result<Member> {
        let mut member = Member {
            child: None,
            log_path,
            log_start: 0,
        };
        member.respawn(command)?;
        Ok(member)
    }

    /// Starts `command` again in place of the reaped process.
    pub fn respawn(&mut self, mut command: Command) -> Result<()> {
        assert!(
            self.child.is_none(),
            "a member is started only when its previous process is reaped"
        );
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .with_context(|| format!("cannot open {}", self.log_path.display()))?;
        self.log_start = log.metadata().map_or(0, |m| m.len());
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {:?}", command.get_program()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Process id while the process has not been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The member's log file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// What the current (or last) process wrote to the log.
    pub fn log_of_this_start(&self) -> String {
        let log = std::fs::read(&self.log_path).unwrap_or_default();
        let start = (self.log_start as usize).min(log.len());
        String::from_utf8_lossy(&log[start..]).into_owned()
    }

    /// Sends SIGKILL (directly, no helper process: this is the crash
    /// scenario's fault and its timing matters). The caller reaps later.
    pub fn kill(&mut self) -> Result<()> {
        let child = self
            .child
            .as_mut()
            .context("kill: the member is not running")?;
        child
            .kill()
            .with_context(|| format!("cannot SIGKILL pid {}", child.id()))
    }

    /// Sends SIGTERM with the `kill` command (the crate has no unsafe code,
    /// hence no `libc::kill`).
    pub fn terminate(&self) -> Result<()> {
        let pid = self.pid().context("terminate: the member is not running")?;
        send_signal(pid, SIGTERM).with_context(|| format!("cannot SIGTERM pid {pid}"))
    }

    /// Waits until the process exits and reaps it; fails after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Result<ExitStatus> {
        let child = self
            .child
            .as_mut()
            .context("wait_exit: the member is not running")?;
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                return Ok(status);
            }
            if Instant::now() >= deadline {
                bail!(
                    "pid {} did not exit within {limit:?}; read {}",
                    child.id(),
                    self.log_path.display()
                );
            }
            std::thread::sleep(EXIT_POLL_INTERVAL);
        }
    }

    /// Fails if the process has exited on its own.
    pub fn check_running(&mut self) -> Result<()> {
        let child = self.child.as_mut().context("the member is not running")?;
        if let Some(status) = child.try_wait()? {
            self.child = None;
            bail!(
                "a member exited unexpectedly ({status}); read {}",
                self.log_path.display()
            );
        }
        Ok(())
    }

    /// Resident set size in KiB (`VmRSS` of `/proc/<pid>/status`), if the
    /// process runs.
    pub fn resident_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

//! The real `etcdctl` (Debian's etcd-client, 3.4, API v3) run against a test
//! cluster: one-shot commands, and long-running ones (`elect`, `lock`,
//! `lease keep-alive`, `watch`) whose output is collected line by line.
//! Every process started here is killed and reaped on drop.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often waits poll.
const POLL: Duration = Duration::from_millis(20);

/// Fails the test unless `etcdctl` runs here: a test that needs it must
/// not pass without it. scripts/test.sh installs it (Debian's etcd-client).
pub fn require() {
    let found = Command::new("etcdctl").arg("version").output().is_ok();
    assert!(
        found,
        "etcdctl is not installed: run ./scripts/test.sh (it installs Debian's etcd-client) \
         or apt-get install etcd-client"
    );
}

/// An `etcdctl` command for `endpoints` (comma-separated), API v3.
pub fn command(endpoints: &str) -> Command {
    let mut command = Command::new("etcdctl");
    command
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .arg("--command-timeout=5s");
    command
}

/// Runs one etcdctl command to completion, with `input` on its stdin;
/// returns (success, stdout followed by stderr).
pub fn run(endpoints: &str, args: &[&str], input: Option<&str>) -> (bool, String) {
    let mut child = command(endpoints)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("etcdctl runs");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(input.unwrap_or("").as_bytes())
        .expect("etcdctl reads its input");
    drop(stdin);
    let output = child.wait_with_output().expect("etcdctl finishes");
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// Runs one etcdctl command and returns its stdout; panics (with the
/// output) if it fails.
pub fn run_ok(endpoints: &str, args: &[&str]) -> String {
    let output = command(endpoints)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("etcdctl runs");
    assert!(
        output.status.success(),
        "etcdctl {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// A long-running etcdctl process; its stdout lines are collected as they
/// come and its stderr is kept in full. Killed and reaped on drop.
pub struct Background {
    /// The etcdctl process (None once reaped).
    child: Option<Child>,
    /// Every stdout line so far.
    lines: Arc<Mutex<Vec<String>>>,
    /// Everything written to stderr so far, for failure messages.
    stderr: Arc<Mutex<String>>,
    /// The command line, for failure messages.
    description: String,
}

impl Background {
    /// Starts `etcdctl --endpoints=E ARGS...`.
    pub fn start(endpoints: &str, args: &[&str]) -> Background {
        let mut child = command(endpoints)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("etcdctl runs");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("piped stdout");
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        let errors = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(errors).lines() {
                let Ok(line) = line else { break };
                let mut text = sink.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        Background {
            child: Some(child),
            lines,
            stderr,
            description: format!("etcdctl --endpoints={endpoints} {}", args.join(" ")),
        }
    }

    /// The stdout lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// What the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until the stdout lines satisfy `done`; panics with the output
    /// after `timeout`.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[String]) -> bool,
    ) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let lines = self.lines();
            if done(&lines) {
                return lines;
            }
            assert!(
                Instant::now() < deadline,
                "{}: no {what} within {timeout:?}; stdout {lines:?}, stderr {}",
                self.description,
                self.stderr()
            );
            std::thread::sleep(POLL);
        }
    }

    /// Waits for at least `count` stdout lines.
    pub fn wait_lines(&self, count: usize, timeout: Duration) -> Vec<String> {
        self.wait_until(&format!("{count} lines"), timeout, |lines| {
            lines.len() >= count
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `signal` ("INT", "KILL", ...) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {}", self.description);
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => child.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }

    /// Waits for the process to exit; its status, or None after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let child = self.child.as_mut()?;
            if let Some(status) = child.try_wait().expect("try_wait") {
                return Some(status);
            }
            std::thread::sleep(POLL);
        }
        None
    }

    /// SIGKILLs the process and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.kill();
    }
}

//! Three Patroni nodes, each with its PostgreSQL, on one DCS: started,
//! SIGKILLed (Patroni and its PostgreSQL), and asked who leads.
//!
//! Patroni runs in a process group of its own (so initdb, pg_basebackup
//! and pg_ctl die with it); the postmaster it starts runs in another
//! session (Patroni calls setsid for it), found through the data
//! directory's postmaster.pid. Drop kills both for every node and then
//! anything still naming the test's directory on its command line, so
//! nothing outlives the test, however it ends.

use super::setup::{self, NodeConfig};
use rustix::process::{kill_process_group, Pid, Signal};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Number of Patroni nodes.
pub const NODES: usize = 3;
/// How long a killed postmaster may take to disappear.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// The running nodes.
pub struct PatroniNodes {
    /// Holds `pg<i>/` (the node's home), `pg<i>.yml` and `pg<i>.log`.
    pub dir: PathBuf,
    /// Patroni's `scope`.
    pub scope: String,
    /// PostgreSQL's binaries.
    pub bin_dir: PathBuf,
    /// target/patroni-venv/bin.
    pub venv_bin: PathBuf,
    /// First port: PostgreSQL i on `ports_base + 70 + i`, Patroni's REST
    /// API on `ports_base + 80 + i`.
    ports_base: u16,
    /// Who Patroni runs as (None: ourselves).
    run_as: Option<(u32, u32)>,
    /// Running Patronis (None once killed).
    children: Vec<Option<Child>>,
}

impl PatroniNodes {
    /// Writes each node's configuration and starts all of them on the DCS
    /// at `dcs_hosts`.
    pub fn start(name: &str, ports_base: u16, dcs_hosts: &[String]) -> PatroniNodes {
        let run_as = setup::run_as();
        let mut nodes = PatroniNodes {
            dir: setup::test_dir(name),
            scope: name.to_string(),
            bin_dir: setup::postgresql_bin(),
            venv_bin: super::venv::patroni_venv(run_as),
            ports_base,
            run_as,
            children: (0..NODES).map(|_| None).collect(),
        };
        for i in 1..=NODES {
            let home = nodes.dir.join(format!("pg{i}"));
            setup::node_dir(&home, run_as);
            let config = NodeConfig {
                scope: &nodes.scope,
                name: &nodes.name(i),
                api_port: nodes.api_port(i),
                pg_port: nodes.pg_port(i),
                dcs_hosts,
                node_dir: &home,
                bin_dir: &nodes.bin_dir,
            };
            std::fs::write(nodes.config(i), setup::patroni_yml(&config)).unwrap();
        }
        for i in 1..=NODES {
            nodes.spawn(i);
        }
        nodes
    }

    /// Node i's Patroni name.
    pub fn name(&self, i: usize) -> String {
        format!("pg{i}")
    }

    /// Node i's PostgreSQL port.
    pub fn pg_port(&self, i: usize) -> u16 {
        self.ports_base + 70 + i as u16
    }

    /// Every PostgreSQL port, node 1 first.
    pub fn pg_ports(&self) -> Vec<u16> {
        (1..=NODES).map(|i| self.pg_port(i)).collect()
    }

    /// Node i's REST API port.
    pub fn api_port(&self, i: usize) -> u16 {
        self.ports_base + 80 + i as u16
    }

    /// Node i's patroni.yml.
    pub fn config(&self, i: usize) -> PathBuf {
        self.dir.join(format!("pg{i}.yml"))
    }

    /// Node i's log: Patroni's and its PostgreSQL's output.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("pg{i}.log"))).unwrap_or_default()
    }

    /// The node numbers of running Patronis.
    pub fn running(&self) -> Vec<usize> {
        (1..=NODES)
            .filter(|i| self.children[i - 1].is_some())
            .collect()
    }

    /// Node i's Patroni process id.
    pub fn pid(&self, i: usize) -> u32 {
        self.children[i - 1].as_ref().expect("node i runs").id()
    }

    /// The node number of Patroni name `name`.
    pub fn number(&self, name: &str) -> usize {
        (1..=NODES)
            .find(|i| self.name(*i) == name)
            .unwrap_or_else(|| panic!("no node named {name}"))
    }

    /// SIGKILLs node i's Patroni (and anything in its process group) and
    /// then its PostgreSQL (the postmaster's process group, so every
    /// backend too), with nothing in between that could restart it.
    pub fn kill(&mut self, i: usize) {
        let postmaster = self.postmaster(i);
        if let Some(mut child) = self.children[i - 1].take() {
            let _ = kill_process_group(Pid::from_child(&child), Signal::KILL);
            let _ = child.wait();
        }
        if let Some(pid) = postmaster {
            kill_postmaster(pid);
        }
    }

    /// The cluster as node i's Patroni sees it in the DCS (`GET /cluster`:
    /// every member's name, role and state), if it answers.
    pub fn cluster_view(&self, i: usize) -> Option<Value> {
        let address = format!("127.0.0.1:{}", self.api_port(i)).parse().ok()?;
        let body = crate::common::get(address, "/cluster").ok()?;
        serde_json::from_str(&body).ok()
    }

    /// Node i's own report (`GET /patroni`: role, state, timeline, when it
    /// last reached the DCS), if it answers.
    pub fn node_status(&self, i: usize) -> Option<Value> {
        let address = format!("127.0.0.1:{}", self.api_port(i)).parse().ok()?;
        let body = crate::common::get(address, "/patroni").ok()?;
        serde_json::from_str(&body).ok()
    }

    /// `patronictl -c pg1.yml ARGS` (patronictl talks to the DCS and the
    /// nodes' REST APIs; any node's configuration names the DCS).
    pub fn patronictl(&self, args: &[&str]) -> Output {
        Command::new(self.venv_bin.join("patronictl"))
            .arg("-c")
            .arg(self.config(1))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("patronictl runs")
    }

    /// Starts node i's Patroni (again, on its data, after a kill).
    pub fn spawn(&mut self, i: usize) {
        let log = self.dir.join(format!("pg{i}.log"));
        let home = self.dir.join(format!("pg{i}"));
        let child = spawn_patroni(&self.venv_bin, &self.config(i), &home, &log, self.run_as);
        self.children[i - 1] = Some(child);
    }

    /// Node i's postmaster, if one runs on its data directory.
    fn postmaster(&self, i: usize) -> Option<u32> {
        let data = self.dir.join(format!("pg{i}/data"));
        let pid_file = std::fs::read_to_string(data.join("postmaster.pid")).ok()?;
        let pid: u32 = pid_file.lines().next()?.trim().parse().ok()?;
        let command_line = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let command_line = String::from_utf8_lossy(&command_line);
        command_line.contains(data.to_str()?).then_some(pid)
    }
}

/// Starts Patroni from `venv_bin` on `config`, at home in `home`, in a
/// process group of its own, as `run_as` (None: ourselves), its output
/// appended to `log`.
pub fn spawn_patroni(
    venv_bin: &Path,
    config: &Path,
    home: &Path,
    log: &Path,
    run_as: Option<(u32, u32)>,
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let path = format!("{}:/usr/bin:/bin", venv_bin.display());
    let mut command = Command::new(venv_bin.join("patroni"));
    command
        .arg(config)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("LC_ALL", "C.UTF-8")
        .current_dir(home)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    if let Some((uid, gid)) = run_as {
        command.uid(uid).gid(gid);
    }
    command.spawn().expect("patroni runs")
}

/// SIGKILLs the postmaster `pid` with its process group (its backends,
/// walsenders and the rest) and waits until it is gone.
fn kill_postmaster(pid: u32) {
    let process = Pid::from_raw(pid as i32).expect("a positive pid");
    let own_group = rustix::process::getpgrp();
    match rustix::process::getpgid(Some(process)) {
        Ok(group) if group != own_group => {
            let _ = kill_process_group(group, Signal::KILL);
        }
        _ => {
            let _ = rustix::process::kill_process(process, Signal::KILL);
        }
    }
    let deadline = Instant::now() + EXIT_WAIT;
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs every PostgreSQL or Patroni process whose command line names
/// `dir`, the test's own directory: what escaped the process groups
/// (there should be none). PostgreSQL is told by its executable (under
/// `bin_dir`), Patroni by its command line (the venv's `venv_bin`); a
/// shell reading the logs is left alone.
fn kill_leftovers(dir: &Path, bin_dir: &Path, venv_bin: &Path) -> Vec<String> {
    let (needle, venv) = (dir.to_string_lossy(), venv_bin.to_string_lossy());
    let mut killed = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let command_line = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let command_line = String::from_utf8_lossy(&command_line).replace('\0', " ");
        let executable = std::fs::read_link(entry.path().join("exe")).unwrap_or_default();
        let ours = executable.starts_with(bin_dir) || command_line.contains(venv.as_ref());
        if ours && command_line.contains(needle.as_ref()) {
            if let Some(process) = Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(process, Signal::KILL);
                killed.push(format!("{pid}: {command_line}"));
            }
        }
    }
    killed
}

impl Drop for PatroniNodes {
    fn drop(&mut self) {
        for i in 1..=NODES {
            self.kill(i);
        }
        let leftovers = kill_leftovers(&self.dir, &self.bin_dir, &self.venv_bin);
        if !leftovers.is_empty() {
            eprintln!("killed processes that outlived their node: {leftovers:?}");
        }
        if std::thread::panicking() {
            eprintln!(
                "Patroni's configurations, data and logs: {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

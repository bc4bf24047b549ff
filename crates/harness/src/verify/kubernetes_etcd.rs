//! `bellwether verify --workload kubernetes --against-etcd`: the same
//! clients, watchers and check (`kubernetes.rs`) on a real etcd 3.4
//! cluster ([`EtcdCluster`], 3 or 5 `etcd` processes on `127.0.<net>.i`),
//! so that a check that fails on bellwether can be told apart from one
//! that etcd fails too.
//!
//! Its nemesis is a small one: SIGKILL a member and restart it, SIGSTOP a
//! member and SIGCONT it, and now and then kill every member at once
//! (etcd fsyncs, so that is a power cut it survives). No partitions: etcd's
//! outbound peer connections leave from 127.0.0.1, which takes per-uid
//! rules (`etcd_cluster.rs`), and no full disk.

use super::kubernetes::{self, object_client};
use super::nemesis::{millis, Outcome, Stopped};
use super::session::{self, Session};
use super::{Verdict, VerifyArgs, SETTLE};
use crate::contender::Contender;
use crate::etcd_cluster::{self, EtcdCluster, EtcdLayout};
use anyhow::Result;
use bellwether_client::Client;
use bellwether_core::Rng;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// Whether etcd `version` (as `etcd --version` prints it) keeps a requested
/// progress notification behind the events it has not sent yet. Before
/// 3.4.31 and 3.5.13 it may answer with its store's revision while the
/// stream still owes events up to it (etcd-io/etcd#15220), which the
/// check rightly reports; kube-apiserver therefore asks only a fixed etcd
/// for progress (its consistent reads from cache check the version), and
/// so do this workload's watchers.
pub fn progress_requests_in_step(version: &str) -> bool {
    let mut parts = version
        .trim()
        .trim_start_matches('v')
        .split(['.', '-', '+'])
        .map(|part| part.parse::<u64>().ok());
    let (Some(Some(major)), Some(Some(minor)), Some(Some(patch))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, minor) => minor >= 6,
        (major, _) => major > 3,
    }
}

/// One run on a fresh etcd cluster.
pub fn run_once(args: &VerifyArgs, seed: u64, dir: &Path) -> Result<(Verdict, Outcome)> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let version = etcd_cluster::ensure_installed(dir)?;
    let layout = EtcdLayout {
        dir: dir.join("etcd"),
        net: args.net,
        nodes: args.nodes,
        heartbeat_ms: 50,
        election_ms: 300,
    };
    let progress_requests = progress_requests_in_step(&version);
    if !progress_requests {
        println!(
            "etcd {version}: the watchers ask for no progress (etcd-io/etcd#15220: this etcd can \
             send a requested progress notification ahead of its own events; fixed in 3.4.31 and \
             3.5.13, and kube-apiserver asks an older etcd for none either)"
        );
    }
    let mut cluster = EtcdCluster::start(layout, version)?;
    let system = cluster.system();
    let endpoints = cluster.client_endpoints();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let _inside = runtime.enter();
    let client = Client::connect(&endpoints)?;
    runtime.block_on(crate::bench_election::wait_ready(&client))?;
    let span = Duration::from_secs(args.seconds);
    let origin = Instant::now();
    let until = origin + span;
    let channels = session::channels(&endpoints)?;
    let run = kubernetes::start(&channels, until, seed, progress_requests);
    let clients: Vec<_> = (0..args.clients as u64)
        .map(|i| {
            let session = Session::new(i, channels.clone(), origin).paced(args.clients, span);
            runtime.spawn(object_client(session, until, seed, run.history.clone()))
        })
        .collect();
    let outcome = nemesis(&mut cluster, span, seed)?;
    for task in clients {
        runtime.block_on(task)?;
    }
    std::thread::sleep(SETTLE);
    let verdict = runtime.block_on(run.finish(&channels, &system))?;
    Ok((verdict, outcome))
}

/// Kills, pauses and power-cuts etcd members until `span` has passed;
/// every member runs again at the end.
fn nemesis(cluster: &mut EtcdCluster, span: Duration, seed: u64) -> Result<Outcome> {
    let mut rng = Rng::new(seed);
    let mut outcome = Outcome::default();
    let start = std::time::Instant::now();
    let nodes = cluster.members().len();
    while start.elapsed() < span {
        std::thread::sleep(millis(&mut rng, 200, 1_000));
        restart_exited(cluster, &mut outcome)?;
        let member = rng.range(1, nodes as u64 + 1) as usize;
        let hold = millis(&mut rng, 300, 2_000);
        let action = match rng.range(0, 10) {
            0 => {
                for process in cluster.members_mut() {
                    process.kill()?;
                }
                for process in cluster.members_mut() {
                    process.wait_exit(Duration::from_secs(10))?;
                }
                std::thread::sleep(hold);
                for i in 1..=nodes {
                    cluster.restart(i)?;
                }
                "power cut (every etcd member killed at once)"
            }
            1..=5 => {
                let process = &mut cluster.members_mut()[member - 1];
                process.kill()?;
                process.wait_exit(Duration::from_secs(10))?;
                std::thread::sleep(hold);
                cluster.restart(member)?;
                "kill and restart an etcd member"
            }
            _ => {
                let Some(pid) = cluster.members()[member - 1].pid() else {
                    continue;
                };
                let stopped = Stopped::new(pid)?;
                std::thread::sleep(hold);
                drop(stopped);
                "pause an etcd member"
            }
        };
        *outcome.actions.entry(action.to_string()).or_default() += 1;
    }
    restart_exited(cluster, &mut outcome)?;
    Ok(outcome)
}

/// Restarts every member that exited on its own, noting it.
fn restart_exited(cluster: &mut EtcdCluster, outcome: &mut Outcome) -> Result<()> {
    for i in 1..=cluster.members().len() {
        let process = &mut cluster.members_mut()[i - 1];
        if let Err(exited) = process.check_running() {
            outcome.exits.push(format!(
                "etcd member {i}: {exited:#}; read {}",
                process.log_path().display()
            ));
            cluster.restart(i)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::progress_requests_in_step;

    #[test]
    fn only_an_etcd_with_the_progress_fix_is_asked_for_progress() {
        for (version, asked) in [
            ("3.4.23", false),
            ("3.4.30", false),
            ("3.4.31", true),
            ("3.5.12", false),
            ("3.5.13", true),
            ("3.6.0", true),
            ("v3.5.21", true),
            ("3.3.27", false),
            ("4.0.0", true),
            ("unknown", false),
        ] {
            assert_eq!(progress_requests_in_step(version), asked, "{version}");
        }
    }
}

//! `bellwether bench elector`: failover of real `bellwether peer` processes
//! after a SIGKILL of the leader, beside the simulator's figure for the same
//! algorithm, group size and timing.
//!
//! Each round waits until every live peer names the same leader, SIGKILLs
//! it, and times how long until every survivor has printed a view naming
//! one new leader that itself claims to lead (the bench reads the peers'
//! JSON lines as they are written). The killed peer is then restarted from
//! its data dir and the group settles before the next round. The simulator
//! runs the same core with the same settings on a simulated network with a
//! loopback-like latency of 50 to 300 µs one way, and disks whose fsync
//! takes what one persisted state took in the bench's data dir (measured
//! first; every term, vote or epoch is fsync'd before the messages that
//! depend on it leave).
//!
//! With `--silent` the leader is SIGSTOPped instead: its sockets stay open
//! and nothing resets, as with a hung host, so the survivors learn nothing
//! until a detector or timeout tells them. That is the case the adaptive
//! detector (`--detector-heartbeats`) exists for. The stopped leader is
//! killed and restarted once the others agree on a new one. The
//! simulator's figure for silent leaders is `sim compare`'s (at its own
//! timings), so this mode runs no simulation.

use anyhow::{bail, Context, Result};
use bellwether_sim::spec::{Algorithm as SimAlgorithm, FaultProfile, RunSpec};
use bellwether_sim::stats::percentile;
use bellwether_sim::sweep::sweep;
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Flags of `bellwether bench elector`.
#[derive(Args, Debug)]
pub struct ElectorArgs {
    /// raft, bully, ring or paxos.
    #[arg(long, default_value = "raft")]
    algorithm: String,
    /// Peers in the group.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Leader kills measured.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Heartbeat interval in ms.
    #[arg(long, default_value_t = 50)]
    heartbeat_ms: u64,
    /// Shortest election timeout in ms.
    #[arg(long, default_value_t = 150)]
    election_ms: u64,
    /// Simulated runs for the simulator's figure.
    #[arg(long, default_value_t = 1000)]
    sim_runs: u64,
    /// Peer i listens on 127.0.0.1:BASE+i.
    #[arg(long, default_value_t = 7700)]
    base_port: u16,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// SIGSTOP the leader instead of killing it: a silent failure.
    #[arg(long)]
    silent: bool,
    /// Passed to every peer (see `bellwether peer --help`); the peer's
    /// default when not given.
    #[arg(long)]
    detector_heartbeats: Option<u64>,
}

/// What the bench measured.
#[derive(Debug, Serialize)]
pub struct ElectorReport {
    algorithm: String,
    nodes: usize,
    heartbeat_ms: u64,
    election_ms: u64,
    /// The leader was SIGSTOPped, not killed.
    silent: bool,
    /// The detector floor given to the peers, if one was.
    detector_heartbeats: Option<u64>,
    rounds: usize,
    failover_ms: Vec<f64>,
    failover_ms_p50: Option<f64>,
    failover_ms_p99: Option<f64>,
    sim_runs: u64,
    /// One persisted state in the data dir, median, as the simulator's
    /// fsync time.
    persist_us: u64,
    sim_failover_ms_p50: Option<f64>,
    sim_failover_ms_p99: Option<f64>,
    /// Real p50 over simulated p50.
    ratio_to_sim_p50: Option<f64>,
}

/// One peer process; killed on drop.
struct Peer {
    child: Child,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A line a peer printed: its id, its view, when the bench read it.
type Line = (u64, Value, Instant);

struct Group {
    args_algorithm: String,
    nodes: usize,
    base_port: u16,
    heartbeat_ms: u64,
    election_ms: u64,
    detector_heartbeats: Option<u64>,
    dir: PathBuf,
    peers: BTreeMap<u64, Peer>,
    lines_tx: mpsc::Sender<Line>,
    lines: mpsc::Receiver<Line>,
    /// Each peer's latest view and when it was read.
    views: BTreeMap<u64, (Value, Instant)>,
}

impl Group {
    fn spawn(&mut self, id: u64) -> Result<()> {
        let peers: Vec<String> = (1..=self.nodes)
            .map(|i| format!("{i}=127.0.0.1:{}", self.base_port as usize + i))
            .collect();
        let mut command = Command::new(std::env::current_exe()?);
        command
            .arg("peer")
            .args(["--algorithm", &self.args_algorithm])
            .args(["--id", &id.to_string(), "--peers", &peers.join(",")])
            .arg("--data-dir")
            .arg(self.dir.join(format!("n{id}")))
            .args(["--heartbeat-ms", &self.heartbeat_ms.to_string()])
            .args(["--election-ms", &self.election_ms.to_string()]);
        if let Some(floor) = self.detector_heartbeats {
            command.args(["--detector-heartbeats", &floor.to_string()]);
        }
        let mut child = command
            .env("BELLWETHER_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start a peer")?;
        let stdout = child.stdout.take().expect("piped");
        let sender = self.lines_tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(view) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if sender.send((id, view, Instant::now())).is_err() {
                    break;
                }
            }
        });
        self.views.remove(&id);
        self.peers.insert(id, Peer { child });
        Ok(())
    }

    fn drain(&mut self, wait: Duration) {
        if let Ok((id, view, at)) = self.lines.recv_timeout(wait) {
            self.views.insert(id, (view, at));
        }
        while let Ok((id, view, at)) = self.lines.try_recv() {
            self.views.insert(id, (view, at));
        }
    }

    /// Reads every line for `time`: a peer that prints often (a Paxos
    /// leader with leases prints its deadline every heartbeat) must not
    /// cut the wait short, or its followers' detectors would not have
    /// learned its heartbeats before the next round.
    fn settle(&mut self, time: Duration) {
        let end = Instant::now() + time;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            self.drain(left.min(Duration::from_millis(50)));
        }
    }

    /// (leader, when the last live peer learned it) once all live peers
    /// agree and the leader claims to lead.
    fn agreed(&self) -> Option<(u64, Instant)> {
        let live: Vec<&u64> = self.peers.keys().collect();
        let views: Vec<&(Value, Instant)> =
            live.iter().filter_map(|id| self.views.get(id)).collect();
        if views.len() != live.len() {
            return None;
        }
        let leader = views[0].0["leader"].as_u64()?;
        let same = views
            .iter()
            .all(|(v, _)| v["leader"].as_u64() == Some(leader));
        let claims = self
            .views
            .get(&leader)
            .is_some_and(|(v, _)| v["is_leader"] == true && self.peers.contains_key(&leader));
        let learned = views.iter().map(|(_, at)| *at).max()?;
        (same && claims).then_some((leader, learned))
    }

    fn wait_agreed(&mut self, limit: Duration) -> Result<(u64, Instant)> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(found) = self.agreed() {
                return Ok(found);
            }
            if Instant::now() > deadline {
                bail!("no agreed leader within {limit:?}; views: {:?}", self.views);
            }
            self.drain(Duration::from_millis(5));
        }
    }
}

/// Runs the bench and prints its report.
pub fn execute(args: ElectorArgs) -> Result<ExitCode> {
    let sim_algorithm = match args.algorithm.as_str() {
        "raft" => SimAlgorithm::Raft,
        "bully" => SimAlgorithm::Bully,
        "ring" => SimAlgorithm::Ring,
        "paxos" => SimAlgorithm::Paxos,
        other => bail!("unknown algorithm {other:?}: use raft, bully, ring or paxos"),
    };
    if args.nodes < 2 || args.rounds == 0 {
        bail!("--nodes must be at least 2 and --rounds at least 1");
    }
    let report = run(&args, sim_algorithm)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        let simulator =
            if report.silent {
                "simulator: see `sim compare` (silent failover at its own timings)".to_string()
            } else {
                format!(
                "simulator p50 {} ms p99 {} ms ({} runs, fsync {} µs as measured); real/sim p50 {}",
                cell(report.sim_failover_ms_p50),
                cell(report.sim_failover_ms_p99),
                report.sim_runs,
                report.persist_us,
                report.ratio_to_sim_p50.map_or("-".into(), |r| format!("{r:.2}")),
            )
            };
        println!(
            "elector failover{}, {} n={} heartbeat {} ms, election {} ms, detector floor {}: real processes p50 {} ms p99 {} ms ({} rounds); {simulator}",
            if report.silent { " (silent leader, SIGSTOP)" } else { "" },
            report.algorithm,
            report.nodes,
            report.heartbeat_ms,
            report.election_ms,
            report
                .detector_heartbeats
                .map_or("the peer's default".to_string(), |n| n.to_string()),
            cell(report.failover_ms_p50),
            cell(report.failover_ms_p99),
            report.rounds,
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run(args: &ElectorArgs, sim_algorithm: SimAlgorithm) -> Result<ElectorReport> {
    let dir = std::env::temp_dir().join(format!("bw-bench-elector-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let persist_us = (bellwether_elector::persist_latency(&dir, 50)?.as_micros() as u64).max(1);
    let (lines_tx, lines) = mpsc::channel();
    let mut group = Group {
        args_algorithm: args.algorithm.clone(),
        nodes: args.nodes,
        base_port: args.base_port,
        heartbeat_ms: args.heartbeat_ms,
        election_ms: args.election_ms,
        detector_heartbeats: args.detector_heartbeats,
        dir: dir.clone(),
        peers: BTreeMap::new(),
        lines_tx,
        lines,
        views: BTreeMap::new(),
    };
    for id in 1..=args.nodes as u64 {
        group.spawn(id)?;
    }
    let settle = Duration::from_millis(3 * args.election_ms);
    let mut failover_ms = Vec::new();
    for round in 0..args.rounds {
        let (leader, _) = group.wait_agreed(Duration::from_secs(10))?;
        group.settle(settle);
        let killed_at = Instant::now();
        let removed = group
            .peers
            .remove(&leader)
            .expect("the agreed leader is live");
        // Silent: stopped, its sockets open, until the others agree; then
        // killed (dropped) like the others. Otherwise killed now.
        let stopped = if args.silent {
            bellwether_cli_common::signals::send_signal(
                removed.child.id(),
                bellwether_cli_common::signals::SIGSTOP,
            )?;
            Some(removed)
        } else {
            drop(removed);
            None
        };
        group.views.remove(&leader);
        let (next, learned) = group.wait_agreed(Duration::from_secs(10))?;
        drop(stopped);
        let ms = learned.saturating_duration_since(killed_at).as_secs_f64() * 1e3;
        eprintln!(
            "round {}: n{leader} {}, n{next} agreed after {ms:.1} ms",
            round + 1,
            if args.silent { "stopped" } else { "killed" }
        );
        failover_ms.push(ms);
        group.spawn(leader)?;
    }
    drop(group);
    let _ = std::fs::remove_dir_all(&dir);
    let p50 = percentile(&failover_ms, 0.5);
    let mut report = ElectorReport {
        algorithm: args.algorithm.clone(),
        nodes: args.nodes,
        heartbeat_ms: args.heartbeat_ms,
        election_ms: args.election_ms,
        silent: args.silent,
        detector_heartbeats: args.detector_heartbeats,
        rounds: args.rounds,
        failover_ms_p50: p50,
        failover_ms_p99: percentile(&failover_ms, 0.99),
        failover_ms,
        sim_runs: 0,
        persist_us,
        sim_failover_ms_p50: None,
        sim_failover_ms_p99: None,
        ratio_to_sim_p50: None,
    };
    if args.silent {
        return Ok(report);
    }
    let mut spec = RunSpec::new(sim_algorithm, args.nodes, 1, FaultProfile::Crash);
    spec.fsync_us = persist_us;
    spec.latency_us_min = 50;
    spec.latency_us_max = 300;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let simulated = sweep(&spec, args.sim_runs, threads, &|_, _| {});
    report.sim_runs = args.sim_runs;
    report.sim_failover_ms_p50 = simulated.failover_ms.p50;
    report.sim_failover_ms_p99 = simulated.failover_ms.p99;
    report.ratio_to_sim_p50 = p50
        .zip(simulated.failover_ms.p50)
        .map(|(real, sim)| real / sim);
    Ok(report)
}

//! `bellwether bench zookeeper`: load over ZooKeeper's client protocol,
//! a measurement and never a test. It speaks only that protocol (through
//! the `zookeeper-client` crate), so the same command measures a
//! bellwether cluster or a real ZooKeeper. Closed loop, in three phases of
//! a fixed duration each (create, setData, getData; see [`load`]), and
//! the figures per phase: operations per second, p50 and p99 latency.
//!
//! With `--compare-zookeeper` it starts a 3-node bellwether cluster and a
//! 3-server ZooKeeper 3.8 ensemble itself, in alternating rounds, and
//! reports medians and ratios (see [`compare`]); then, with
//! `--failover-runs N` (3 by default), what sessions see when the leader
//! is SIGKILLed and when an election holder's process is SIGKILLed (see
//! [`failover`]).

pub(crate) mod compare;
pub(crate) mod failover;
pub(crate) mod kazoo_holder;
pub(crate) mod load;
pub(crate) mod systems;

use anyhow::{bail, Result};
use compare::CompareSettings;
use load::{Phase, ZkLoad, ZkLoadSpec};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Most rounds of a comparison.
const ROUNDS_MAX: usize = 100;

/// Flags of `bench zookeeper`.
#[derive(clap::Args, Debug, Clone)]
pub struct ZookeeperArgs {
    /// ZooKeeper client endpoints (host:port), comma-separated; session i
    /// goes to endpoint i mod N. The default is `bellwether up`'s. Not
    /// with --compare-zookeeper, which starts its own.
    #[arg(long, value_delimiter = ',', default_values_t = ["127.0.0.1:7301".to_string(), "127.0.0.1:7302".to_string(), "127.0.0.1:7303".to_string()])]
    endpoints: Vec<String>,
    /// Concurrent closed-loop clients.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// ZooKeeper sessions (one connection each) shared by the clients.
    #[arg(long, default_value_t = 8)]
    conns: usize,
    /// Measured duration of each phase (create, set, get).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Unmeasured lead-in before each phase's measured duration.
    #[arg(long, default_value_t = 1.0)]
    warmup_seconds: f64,
    /// Node data size in bytes (creates and sets).
    #[arg(long, default_value_t = 256)]
    value_bytes: usize,
    /// Start a 3-node bellwether cluster and a 3-server ZooKeeper 3.8
    /// ensemble (Debian's zookeeper; installed with apt-get when missing),
    /// run the same load against each in alternating rounds, and report
    /// medians, ratios and the largest member's memory.
    #[arg(long, conflicts_with = "endpoints")]
    compare_zookeeper: bool,
    /// With --compare-zookeeper: rounds (bellwether, then ZooKeeper, each
    /// started afresh). 0 runs only the failover runs.
    #[arg(long, default_value_t = 3, requires = "compare_zookeeper")]
    rounds: usize,
    /// With --compare-zookeeper: failover runs after the rounds, each on a
    /// fresh bellwether cluster and then a fresh ZooKeeper ensemble: a
    /// kazoo Election holder's process SIGKILLed (time until the next
    /// contender holds, against the session timeout; kazoo 2.10.0 from
    /// BELLWETHER_KAZOO_PYTHON, ./target/zk-venv or a venv made once in
    /// ~/.cache/bellwether), then the leader SIGKILLed under 8 writing
    /// sessions (time until writes are accepted again, sessions expired).
    /// 0: none.
    #[arg(long, default_value_t = 3, requires = "compare_zookeeper")]
    failover_runs: usize,
    /// With --compare-zookeeper: bellwether member i uses ports base+i
    /// (peers), base+100+i (HTTP), base+200+i (etcd API) and base+300+i
    /// (ZooKeeper); ZooKeeper uses 2181/2888/3888 on its own loopback IPs.
    #[arg(long, default_value_t = 18400, requires = "compare_zookeeper")]
    base_port: u16,
    /// With --compare-zookeeper: directory for data and logs (must be
    /// empty; kept). Default: a temporary directory, removed afterwards.
    #[arg(long, requires = "compare_zookeeper")]
    dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl ZookeeperArgs {
    fn spec(&self) -> ZkLoadSpec {
        ZkLoadSpec {
            endpoints: self.endpoints.clone(),
            clients: self.clients,
            conns: self.conns,
            seconds: self.seconds,
            warmup_seconds: self.warmup_seconds,
            value_bytes: self.value_bytes,
        }
    }

    /// The comparison's settings, after checking the flags.
    fn compare_settings(&self) -> Result<CompareSettings> {
        if self.base_port < 1024
            || self.base_port as usize + 300 + systems::NODES > u16::MAX as usize
        {
            bail!("--base-port must be at least 1024 and leave room for base+300+3");
        }
        if self.rounds > ROUNDS_MAX {
            bail!("--rounds must be at most {ROUNDS_MAX}");
        }
        if self.failover_runs > failover::RUNS_MAX {
            bail!("--failover-runs must be at most {}", failover::RUNS_MAX);
        }
        if self.rounds == 0 && self.failover_runs == 0 {
            bail!("--rounds and --failover-runs are both 0: nothing to run");
        }
        let load = self.spec();
        load.validate()?;
        Ok(CompareSettings {
            load,
            rounds: self.rounds,
            base_port: self.base_port,
            dir: self.dir.clone(),
            failover_runs: self.failover_runs,
        })
    }
}

/// Runs the load (or the comparison) and prints the report.
pub fn execute(args: ZookeeperArgs) -> Result<std::process::ExitCode> {
    if args.compare_zookeeper {
        let report = compare::run(&args.compare_settings()?)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            compare::print_text(&report);
        }
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let spec = args.spec();
    spec.validate()?;
    let interrupted = crate::bench_support::watch_for_interruption();
    let runtime = load::runtime()?;
    let reports = runtime.block_on(run_phases(&spec, &interrupted))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
        return Ok(std::process::ExitCode::SUCCESS);
    }
    println!(
        "zookeeper bench: {} clients · {} sessions · {} s per phase (after {} s warm-up) · {}-byte data · {}",
        spec.clients,
        spec.conns,
        spec.seconds,
        spec.warmup_seconds,
        spec.value_bytes,
        spec.endpoints.join(",")
    );
    for report in &reports {
        println!(
            "  {:<6} {:>8.0} op/s  p50 {:.3} ms  p99 {:.3} ms  ({} ok, {} errors)",
            report.phase.name(),
            report.per_second,
            report.latency_ms_p50,
            report.latency_ms_p99,
            report.completed,
            report.errors
        );
        println!("    one op: {}", report.phase.describe());
        if let Some(error) = &report.first_error {
            println!("    first error: {error}");
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Opens the sessions, runs every phase and closes the sessions. The
/// run's parent node and what it created stay (the cluster is the user's).
async fn run_phases(
    spec: &ZkLoadSpec,
    interrupted: &Arc<AtomicBool>,
) -> Result<Vec<load::PhaseReport>> {
    let mut load = ZkLoad::connect(spec, interrupted).await?;
    tracing::info!(parent = load.parent(), "loading");
    let mut reports = Vec::with_capacity(Phase::ALL.len());
    for phase in Phase::ALL {
        reports.push(load.run_phase(phase, interrupted).await?);
    }
    load.close().await;
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        zookeeper: ZookeeperArgs,
    }

    fn parse(args: &[&str]) -> Result<ZookeeperArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("zookeeper").chain(args.iter().copied()))
            .map(|c| c.zookeeper)
    }

    #[test]
    fn the_defaults_are_64_clients_over_8_sessions_and_3_rounds() {
        let args = parse(&["--compare-zookeeper"]).unwrap();
        let settings = args.compare_settings().unwrap();
        assert_eq!((settings.load.clients, settings.load.conns), (64, 8));
        assert_eq!((settings.rounds, settings.failover_runs), (3, 3));
        assert_eq!(parse(&[]).unwrap().endpoints.len(), 3);
    }

    #[test]
    fn compare_refuses_explicit_endpoints_and_its_flags_need_it() {
        assert!(parse(&["--compare-zookeeper", "--endpoints", "127.0.0.1:2181"]).is_err());
        assert!(parse(&["--rounds", "5"]).is_err());
        assert!(parse(&["--base-port", "20000"]).is_err());
        assert!(parse(&["--failover-runs", "1"]).is_err());
        assert!(parse(&["--compare-zookeeper", "--rounds", "5"]).is_ok());
    }

    #[test]
    fn compare_settings_refuse_bad_rounds_ports_and_loads() {
        let refused = |args: &[&str], flag: &str| {
            let error = parse(args)
                .unwrap()
                .compare_settings()
                .unwrap_err()
                .to_string();
            assert!(error.contains(flag), "{error}");
        };
        refused(&["--compare-zookeeper", "--rounds", "101"], "--rounds");
        refused(
            &[
                "--compare-zookeeper",
                "--rounds",
                "0",
                "--failover-runs",
                "0",
            ],
            "nothing to run",
        );
        refused(
            &["--compare-zookeeper", "--failover-runs", "51"],
            "--failover-runs",
        );
        assert!(parse(&["--compare-zookeeper", "--rounds", "0"])
            .unwrap()
            .compare_settings()
            .is_ok());
        refused(
            &["--compare-zookeeper", "--base-port", "65300"],
            "--base-port",
        );
        refused(&["--compare-zookeeper", "--clients", "0"], "--clients");
    }
}

//! `bellwether bench election`: how fast leadership moves between
//! application instances, through the `bellwether-client` crate, on a
//! bellwether cluster and (with `--compare-etcd`) on a real etcd 3.4
//! cluster measured by the same code in the same run.
//!
//! - handover: the leader resigns; time until the next campaigner, already
//!   waiting, leads (its own view). An observer's view of the same change
//!   gives the observer latency.
//! - crash, release on disconnect: a `bellwether elect
//!   --release-on-disconnect 300` process leads and is SIGKILLed; time until
//!   a waiting campaigner leads. bellwether only (etcd ignores the option
//!   and waits for the TTL, which the next row measures).
//! - crash, TTL 5 s: the same without the option, on both systems.
//! - cycles: closed-loop workers campaign and resign on 1,000 names;
//!   cycles per second.
//!
//! A benchmark, not a test: it prints what it measured.

use crate::contender::Contender;
use crate::etcd_cluster::{self, EtcdCluster, EtcdLayout};
use crate::latency::Latencies;
use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::{bail, Context, Result};
use bellwether_client::{Client, Election, Session, SessionOptions};
use serde::Serialize;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Members per cluster.
const NODES: usize = 3;

/// Flags of `bench election`.
#[derive(clap::Args, Debug, Clone)]
pub struct ElectionArgs {
    /// Graceful handovers measured.
    #[arg(long, default_value_t = 50)]
    handovers: usize,
    /// Crashes with release on disconnect measured.
    #[arg(long, default_value_t = 10)]
    crashes: usize,
    /// Crashes without the option (each waits the 5 s TTL) measured.
    #[arg(long, default_value_t = 3)]
    ttl_crashes: usize,
    /// Campaign + resign workers, and seconds they run.
    #[arg(long, default_value_t = 64)]
    workers: usize,
    /// Seconds of campaign + resign cycles.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Also run everything on a 3-member etcd 3.4 cluster (Debian's
    /// etcd-server; installed with apt-get when missing).
    #[arg(long)]
    compare_etcd: bool,
    /// Ports: bellwether member i uses base+i, base+100+i, base+200+i.
    #[arg(long, default_value_t = 18500)]
    base_port: u16,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// What one system measured.
#[derive(Serialize, Debug)]
pub struct ElectionReport {
    /// The system and its version.
    pub system: String,
    /// Resign → next campaigner leads, ms: p50 and p99.
    pub handover_ms: Percentiles,
    /// Resign → an observer sees the next leader, ms.
    pub observed_ms: Percentiles,
    /// SIGKILL of a holder with release on disconnect (300 ms) → the next
    /// leads, ms (bellwether only).
    pub crash_released_ms: Option<Percentiles>,
    /// SIGKILL of a holder with a 5 s TTL → the next leads, ms.
    pub crash_ttl_ms: Percentiles,
    /// Campaign + resign cycles per second over 1,000 names.
    pub cycles_per_second: f64,
}

/// p50 and p99 of a sample, in ms.
#[derive(Serialize, Debug, Clone, Copy)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile (the largest value for fewer than 100 samples).
    pub p99: f64,
    /// Samples.
    pub samples: usize,
}

impl Percentiles {
    pub(crate) fn of(values: Vec<f64>) -> Percentiles {
        assert!(!values.is_empty(), "no samples");
        let latencies = Latencies::of_ms(values.iter().copied());
        Percentiles {
            p50: latencies.quantile_ms(0.5),
            p99: latencies.quantile_ms(0.99),
            samples: values.len(),
        }
    }
}

/// Runs the benchmark and prints the reports.
pub fn execute(args: ElectionArgs) -> Result<std::process::ExitCode> {
    if args.handovers == 0 || args.ttl_crashes == 0 || args.workers == 0 || args.seconds <= 0.0 {
        bail!("--handovers, --ttl-crashes, --workers and --seconds must be above 0");
    }
    let dir = std::env::temp_dir().join(format!("bw-bench-election-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = run_all(&args, &dir);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let reports = result.with_context(|| format!("logs are kept in {}", dir.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        for report in &reports {
            print_text(report);
        }
        if let [ours, etcd] = reports.as_slice() {
            println!(
                "ratios (bellwether / etcd): handover p50 {:.2}, observed p99 {:.2}, cycles/s {:.2}",
                ours.handover_ms.p50 / etcd.handover_ms.p50,
                ours.observed_ms.p99 / etcd.observed_ms.p99,
                ours.cycles_per_second / etcd.cycles_per_second
            );
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn print_text(report: &ElectionReport) {
    let p = |x: &Percentiles| {
        format!(
            "p50 {:.2} ms, p99 {:.2} ms ({} runs)",
            x.p50, x.p99, x.samples
        )
    };
    println!("{}:", report.system);
    println!(
        "  handover (resign -> next leads):    {}",
        p(&report.handover_ms)
    );
    println!(
        "  observer sees the change:           {}",
        p(&report.observed_ms)
    );
    if let Some(released) = &report.crash_released_ms {
        println!("  SIGKILL, release on disconnect 300: {}", p(released));
    }
    println!(
        "  SIGKILL, TTL 5 s:                   {}",
        p(&report.crash_ttl_ms)
    );
    println!(
        "  campaign + resign, 1,000 names:     {:.0} cycles/s",
        report.cycles_per_second
    );
}

fn run_all(args: &ElectionArgs, dir: &std::path::Path) -> Result<Vec<ElectionReport>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut reports = Vec::new();
    {
        let cluster = ProcessCluster::start(ClusterLayout {
            dir: dir.join("bellwether"),
            net: 240,
            base_port: args.base_port,
            nodes: NODES,
            heartbeat_ms: 100,
            election_ms: 1000,
        })?;
        reports.push(measure(
            &cluster,
            args,
            &runtime,
            true,
            &dir.join("bw-holders"),
        )?);
    }
    if args.compare_etcd {
        let version = etcd_cluster::ensure_installed(dir)?;
        let cluster = EtcdCluster::start(
            EtcdLayout {
                dir: dir.join("etcd"),
                net: 241,
                nodes: NODES,
                heartbeat_ms: 100,
                election_ms: 1000,
            },
            version,
        )?;
        reports.push(measure(
            &cluster,
            args,
            &runtime,
            false,
            &dir.join("etcd-holders"),
        )?);
    }
    Ok(reports)
}

fn measure(
    cluster: &dyn Contender,
    args: &ElectionArgs,
    runtime: &tokio::runtime::Runtime,
    released: bool,
    holders_dir: &std::path::Path,
) -> Result<ElectionReport> {
    let endpoints = cluster.client_endpoints();
    let system = cluster.system();
    runtime.block_on(async {
        let client = Client::connect(&endpoints)?;
        wait_ready(&client).await?;
        let (handover, observed) = handovers(&client, args.handovers).await?;
        std::fs::create_dir_all(holders_dir)?;
        let crash_released = if released {
            Some(crashes(&client, &endpoints, args.crashes, Some(300), holders_dir).await?)
        } else {
            None
        };
        let crash_ttl = crashes(&client, &endpoints, args.ttl_crashes, None, holders_dir).await?;
        let cycles = cycles(&client, args.workers, args.seconds).await?;
        Ok(ElectionReport {
            system,
            handover_ms: Percentiles::of(handover),
            observed_ms: Percentiles::of(observed),
            crash_released_ms: crash_released.map(Percentiles::of),
            crash_ttl_ms: Percentiles::of(crash_ttl),
            cycles_per_second: cycles,
        })
    })
}

/// Waits until the cluster answers writes.
pub(crate) async fn wait_ready(client: &Client) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if client.put("bench-election/ready", "1").await.is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the cluster did not accept a write within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// A session with `ttl` seconds.
async fn session(client: &Client, ttl: u64) -> Result<Session> {
    Ok(Session::new(client, SessionOptions::with_ttl(Duration::from_secs(ttl))).await?)
}

/// `count` handovers along a line of campaigners, timed from the resign
/// call to the next one leading, and to an observer seeing it.
async fn handovers(client: &Client, count: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let name = "bench-handover";
    let mut observer = Election::observe(client, name)?;
    let first = session(client, 30).await?;
    let mut leader = Election::new(&first, name)?.campaign("0").await?;
    let mut sessions = vec![first];
    let mut handover = Vec::new();
    let mut observed = Vec::new();
    // Drain what the observer saw so far.
    while tokio::time::timeout(Duration::from_millis(200), observer.recv())
        .await
        .is_ok()
    {}
    for round in 1..=count {
        let next_session = session(client, 30).await?;
        let next = Election::new(&next_session, name)?
            .start_campaign(round.to_string())
            .await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let token = next.token();
        let started = Instant::now();
        leader.resign().await?;
        let seen = async {
            loop {
                match observer.recv().await {
                    Some(Some(info)) if info.token == token => return Ok(ms(started)),
                    Some(_) => continue,
                    None => bail!("the observer stopped"),
                }
            }
        };
        let (led, seen) = tokio::join!(
            async {
                next.wait_leader().await?;
                Ok::<_, anyhow::Error>(ms(started))
            },
            seen
        );
        handover.push(led?);
        observed.push(seen?);
        leader = next;
        sessions.push(next_session);
        if sessions.len() > 2 {
            let old = sessions.remove(0);
            old.close().await.ok();
        }
    }
    leader.resign().await.ok();
    for s in sessions {
        s.close().await.ok();
    }
    Ok((handover, observed))
}

/// `count` crashes of a `bellwether elect` holder process, timed from its
/// SIGKILL to a waiting campaigner leading.
async fn crashes(
    client: &Client,
    endpoints: &[String],
    count: usize,
    release_ms: Option<u64>,
    dir: &std::path::Path,
) -> Result<Vec<f64>> {
    let name = match release_ms {
        Some(_) => "bench-crash-released",
        None => "bench-crash-ttl",
    };
    let mut samples = Vec::new();
    for run in 0..count {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .args(["elect", name, "--ttl", "5", "--grace", "50"])
            .args(["--endpoints", &endpoints.join(",")]);
        if let Some(ms) = release_ms {
            command.args(["--release-on-disconnect", &ms.to_string()]);
        }
        let marker = dir.join(format!("{name}-{run}"));
        command
            .args(["--", "sh", "-c"])
            .arg(format!(
                "echo $$ > {0}.tmp && mv {0}.tmp {0} && exec sleep 600",
                marker.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut holder = command.spawn().context("cannot start a holder")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !marker.exists() {
            if Instant::now() > deadline {
                let _ = holder.kill();
                bail!("the holder never led");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let child: u32 = std::fs::read_to_string(&marker)?.trim().parse()?;
        let waiter_session = session(client, 30).await?;
        let waiter = Election::new(&waiter_session, name)?
            .start_campaign("waiter")
            .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        if waiter.is_leader() {
            bail!("the waiter led while the holder held the name");
        }
        let started = Instant::now();
        holder.kill()?;
        let _ = holder.wait();
        tokio::time::timeout(Duration::from_secs(60), waiter.wait_leader())
            .await
            .context("the waiter never led")??;
        samples.push(ms(started));
        // The holder's program outlives a SIGKILLed wrapper: stop it.
        let _ = bellwether_cli_common::signals::send_signal(child, 9);
        waiter.resign().await?;
        waiter_session.close().await.ok();
    }
    Ok(samples)
}

/// Closed-loop campaign + resign on 1,000 names for `seconds`.
async fn cycles(client: &Client, workers: usize, seconds: f64) -> Result<f64> {
    let stop = Instant::now() + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let session = session(&client, 30).await?;
            let mut done = 0u64;
            let mut name = worker;
            while Instant::now() < stop {
                let election = Election::new(&session, &format!("bench-cycle-{}", name % 1000))?;
                let leadership = election.campaign("x").await?;
                leadership.resign().await?;
                done += 1;
                name += workers;
            }
            session.close().await.ok();
            Ok::<u64, anyhow::Error>(done)
        }));
    }
    let started = Instant::now();
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64().max(seconds))
}

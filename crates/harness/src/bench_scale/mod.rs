//! `bellwether bench scale`: what a large store costs. For each size in
//! `--keys`, a fresh 3-member cluster is started and:
//!
//! 1. optionally granted `--leases` leases and given `--watches` watchers
//!    (each on one key of those to be loaded), held through the load;
//! 2. loaded with that many keys in txns of `--batch` puts of
//!    `--value-bytes`-byte values from `--clients` clients over every
//!    member, printing progress;
//! 3. made to update `--updates-percent` of the keys, spread over the key
//!    space, the same way;
//! 4. asked, after a short settle, for each member's memory, its leader
//!    changes during the load and, for bellwether, the new terms, the
//!    longest gap its followers saw between the leader's messages and the
//!    longest turn of any member's loop;
//! 5. made to restart one follower (SIGKILL, then started again on its
//!    data), timed until it answers a serializable range at the revision
//!    the cluster had when it was killed.
//!
//! With `--compare-etcd` a 3-member etcd 3.4 cluster goes through the same
//! steps after bellwether, one cluster at a time, with the same heartbeat
//! and election timeout. A measurement, not a test: the figures go to
//! docs/benchmarks.md.

mod loader;

use crate::bench_kv::compare::{self, wait_agreement, RssSampler};
use crate::bench_support::{watch_for_interruption, ScratchDir};
use crate::contender::Contender;
use crate::etcd_cluster::{self, EtcdCluster, EtcdLayout};
use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::{bail, Context, Result};
use bellwether_cli_common::http_get;
use loader::Keys;
use serde::Serialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Members of each cluster.
const NODES: usize = 3;
/// Pause after the load before memory is read, so a snapshot started by
/// the load's last writes is counted in the peak, not in the settled figure.
const SETTLE: Duration = Duration::from_secs(5);
/// Longest wait for a restarted member's first answer.
const RESTART_LIMIT: Duration = Duration::from_secs(300);
/// Longest wait for one `/metrics` page.
const METRICS_TIMEOUT: Duration = Duration::from_secs(5);

/// Flags of `bench scale`.
#[derive(clap::Args, Debug, Clone)]
pub struct ScaleArgs {
    /// Store sizes to measure, in keys, comma-separated; each gets fresh
    /// clusters.
    #[arg(long, value_delimiter = ',', default_values_t = [10_000u64, 100_000, 1_000_000])]
    keys: Vec<u64>,
    /// Value size in bytes.
    #[arg(long, default_value_t = 256)]
    value_bytes: usize,
    /// Storage quota of both systems, bytes (`--quota-backend-bytes` on
    /// each member); unset, each keeps its default (2 GiB on both), which
    /// a few million keys of 256-byte values fill.
    #[arg(long)]
    quota_bytes: Option<u64>,
    /// Puts per txn.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Concurrent clients, each on its own connection, spread over the
    /// members.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Percent of the keys updated after the load (at most 200,000 keys).
    #[arg(long, default_value_t = 20)]
    updates_percent: u64,
    /// Leases granted (one-hour TTL) before the load.
    #[arg(long, default_value_t = 0)]
    leases: usize,
    /// Watchers held open through the load, each on one key.
    #[arg(long, default_value_t = 0)]
    watches: usize,
    /// Run the same steps against a 3-member etcd 3.4 cluster after
    /// bellwether's (Debian's etcd-server, installed when missing).
    #[arg(long)]
    compare_etcd: bool,
    /// Heartbeat interval, ms (both systems).
    #[arg(long, default_value_t = 100)]
    heartbeat_ms: u64,
    /// Election timeout, ms (both systems).
    #[arg(long, default_value_t = 1000)]
    election_ms: u64,
    /// bellwether member i uses ports base+i (peers), base+100+i (HTTP)
    /// and base+200+i (etcd API).
    #[arg(long, default_value_t = 18400)]
    base_port: u16,
    /// Directory for data and logs (must be empty; kept). Default: a
    /// temporary directory, removed afterwards.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// One system at one size.
#[derive(Debug, Clone, Serialize)]
pub struct ScalePoint {
    /// Name and version.
    pub system: String,
    /// Keys loaded.
    pub keys: u64,
    /// Leases granted before the load, and how long the grants took.
    pub leases: u64,
    /// See `leases`.
    pub lease_seconds: f64,
    /// Watchers held through the load, and the events they received.
    pub watchers: u64,
    /// See `watchers`.
    pub watch_events: u64,
    /// The load: keys per second, seconds, batches sent again.
    pub load_keys_per_second: f64,
    /// See `load_keys_per_second`.
    pub load_seconds: f64,
    /// See `load_keys_per_second`.
    pub load_retried_batches: u64,
    /// The updates: keys, keys per second, batches sent again.
    pub updated_keys: u64,
    /// See `updated_keys`.
    pub update_keys_per_second: f64,
    /// See `updated_keys`.
    pub update_retried_batches: u64,
    /// The largest member's memory before the load, KiB.
    pub idle_kib: u64,
    /// The largest member's memory after the load and a settle, KiB.
    pub settled_kib: u64,
    /// The largest memory any member reached during the load, KiB.
    pub peak_kib: u64,
    /// Leader changes during the load and the updates (the most any member
    /// counted). bellwether counts a leader whose term of office lapsed and
    /// resumed in the same term as two changes.
    pub leader_changes: u64,
    /// bellwether: new terms during the load and the updates (elections).
    pub term_changes: Option<u64>,
    /// bellwether: the longest gap a member saw between its leader's
    /// messages, ms (since the cluster started).
    pub longest_leader_gap_ms: Option<f64>,
    /// bellwether: the longest turn of any member's loop, ms.
    pub longest_loop_turn_ms: Option<f64>,
    /// Seconds from a killed follower's restart to its first answer at the
    /// revision the cluster had when it was killed.
    pub follower_restart_seconds: f64,
}

/// The whole run.
#[derive(Debug, Serialize)]
pub struct ScaleReport {
    /// Value size, puts per txn, clients.
    pub value_bytes: usize,
    /// See `value_bytes`.
    pub batch: usize,
    /// See `value_bytes`.
    pub clients: usize,
    /// Heartbeat and election timeout, ms.
    pub heartbeat_ms: u64,
    /// See `heartbeat_ms`.
    pub election_ms: u64,
    /// Every system at every size, in the order measured.
    pub points: Vec<ScalePoint>,
}

/// Which system a cluster runs, for the names of its metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Bellwether,
    Etcd,
}

impl Side {
    /// The counter of leader changes a member has seen.
    fn leader_changes_metric(self) -> &'static str {
        match self {
            Side::Bellwether => "bellwether_leader_changes_total",
            Side::Etcd => "etcd_server_leader_changes_seen_total",
        }
    }
}

/// Runs `bench scale`.
pub fn execute(args: ScaleArgs) -> Result<std::process::ExitCode> {
    if args.keys.is_empty() || args.keys.contains(&0) {
        bail!("--keys needs sizes above zero");
    }
    if !(1..=128).contains(&args.batch) {
        bail!("--batch must be 1 to 128 (etcd's default txn bound is 128 ops)");
    }
    if args.clients == 0 || args.updates_percent > 100 {
        bail!("--clients must be at least 1 and --updates-percent at most 100");
    }
    let interrupted = watch_for_interruption();
    let mut scratch = ScratchDir::create(args.dir.as_deref(), "scale")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = measure_all(&args, &scratch.path, &runtime, &interrupted).map_err(|error| {
        scratch.keep_logs = true;
        anyhow::anyhow!("{error:#}\nlogs are kept in {}", scratch.path.display())
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Every size, bellwether then etcd at each.
fn measure_all(
    args: &ScaleArgs,
    dir: &Path,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<ScaleReport> {
    let (bellwether_net, etcd_net) = compare::nets(args.base_port);
    let etcd_version = if args.compare_etcd {
        Some(etcd_cluster::ensure_installed(dir)?)
    } else {
        None
    };
    let mut points = Vec::new();
    for &keys in &args.keys {
        let round = dir.join(format!("{keys}"));
        let layout = ClusterLayout {
            dir: round.join("bellwether"),
            net: bellwether_net,
            base_port: args.base_port,
            nodes: NODES,
            heartbeat_ms: args.heartbeat_ms,
            election_ms: args.election_ms,
        };
        let quota: Vec<String> = args
            .quota_bytes
            .map(|bytes| vec!["--quota-backend-bytes".into(), bytes.to_string()])
            .unwrap_or_default();
        let mut cluster = ProcessCluster::start_with_args(layout, quota.clone())?;
        let metrics = (1..=NODES)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], (args.base_port as usize + 100 + i) as u16)))
            .collect();
        let point = measure(
            &mut cluster,
            Side::Bellwether,
            metrics,
            keys,
            args,
            runtime,
            interrupted,
        )?;
        print_point(&point);
        points.push(point);
        drop(cluster);
        if let Some(version) = &etcd_version {
            let mut cluster = EtcdCluster::start_with_args(
                EtcdLayout {
                    dir: round.join("etcd"),
                    net: etcd_net,
                    nodes: NODES,
                    heartbeat_ms: args.heartbeat_ms,
                    election_ms: args.election_ms,
                },
                version.clone(),
                quota,
            )?;
            let metrics = cluster
                .client_endpoints()
                .iter()
                .map(|e| e.parse().context("an etcd client endpoint"))
                .collect::<Result<_>>()?;
            let point = measure(
                &mut cluster,
                Side::Etcd,
                metrics,
                keys,
                args,
                runtime,
                interrupted,
            )?;
            print_point(&point);
            points.push(point);
        }
    }
    Ok(ScaleReport {
        value_bytes: args.value_bytes,
        batch: args.batch,
        clients: args.clients,
        heartbeat_ms: args.heartbeat_ms,
        election_ms: args.election_ms,
        points,
    })
}

/// The steps of the module docs on one started cluster.
fn measure(
    cluster: &mut dyn Contender,
    side: Side,
    metrics: Vec<SocketAddr>,
    keys: u64,
    args: &ScaleArgs,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<ScalePoint> {
    let system = cluster.system();
    wait_agreement(cluster, interrupted)?;
    let endpoints = cluster.client_endpoints();
    let pids: Vec<Option<u32>> = cluster.members().iter().map(|m| m.pid()).collect();
    let idle_kib = largest_kib(cluster);
    let changes_before = leader_changes(side, &metrics)?;
    let term_before = match side {
        Side::Bellwether => Some(largest_metric(&metrics, "bellwether_term")?),
        Side::Etcd => None,
    };
    let sampler = RssSampler::start(pids);
    let label = format!("{system}, {keys} keys");
    let (leases, lease_seconds) = if args.leases > 0 {
        eprintln!("{label}: granting {} leases", args.leases);
        runtime.block_on(loader::grant_leases(&endpoints, args.leases))?
    } else {
        (0, 0.0)
    };
    let watchers = if args.watches > 0 {
        eprintln!("{label}: opening {} watchers", args.watches);
        Some(runtime.block_on(loader::hold_watchers(&endpoints, args.watches, keys))?)
    } else {
        None
    };
    let load = runtime.block_on(loader::put_phase(
        &endpoints,
        args.clients,
        args.batch,
        args.value_bytes,
        Keys::Load(keys),
        &format!("{label}, loading"),
        interrupted,
    ))?;
    let updates = (keys * args.updates_percent / 100).min(200_000);
    let update = runtime.block_on(loader::put_phase(
        &endpoints,
        args.clients,
        args.batch,
        args.value_bytes,
        Keys::Update {
            count: updates,
            of: keys,
        },
        &format!("{label}, updating"),
        interrupted,
    ))?;
    std::thread::sleep(SETTLE);
    let (watchers, watch_events) = match watchers {
        Some(held) => {
            let created = held.created;
            (created, runtime.block_on(held.close()))
        }
        None => (0, 0),
    };
    let (peak, _) = sampler.stop();
    let settled_kib = largest_kib(cluster);
    let changes_after = leader_changes(side, &metrics)?;
    let leader_changes = changes_before
        .iter()
        .zip(&changes_after)
        .map(|(before, after)| after.saturating_sub(*before))
        .max()
        .unwrap_or(0);
    let term_changes = match term_before {
        Some(before) => Some((largest_metric(&metrics, "bellwether_term")? - before) as u64),
        None => None,
    };
    let (longest_leader_gap_ms, longest_loop_turn_ms) = match side {
        Side::Bellwether => (
            Some(largest_metric(&metrics, "bellwether_leader_gap_max_seconds")? * 1000.0),
            Some(largest_metric(&metrics, "bellwether_loop_turn_max_seconds")? * 1000.0),
        ),
        Side::Etcd => (None, None),
    };
    for member in cluster.members_mut() {
        member
            .check_running()
            .with_context(|| format!("{system}: a member died during the load"))?;
    }
    let follower_restart_seconds = restart_a_follower(cluster, &endpoints, runtime, interrupted)?;
    Ok(ScalePoint {
        system,
        keys,
        leases,
        lease_seconds,
        watchers,
        watch_events,
        load_keys_per_second: load.keys_per_second(),
        load_seconds: load.seconds,
        load_retried_batches: load.retried_batches,
        updated_keys: update.keys,
        update_keys_per_second: update.keys_per_second(),
        update_retried_batches: update.retried_batches,
        idle_kib,
        settled_kib,
        peak_kib: peak.iter().flatten().copied().max().unwrap_or(0),
        leader_changes,
        term_changes,
        longest_leader_gap_ms,
        longest_loop_turn_ms,
        follower_restart_seconds,
    })
}

/// SIGKILLs a follower, starts it again on its data, and times it until
/// it answers at the revision the cluster had when it was killed.
fn restart_a_follower(
    cluster: &mut dyn Contender,
    endpoints: &[String],
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<f64> {
    let leader = wait_agreement(cluster, interrupted)?.member;
    let follower = (1..=NODES).find(|i| *i != leader).expect("three members");
    let revision = runtime.block_on(loader::revision(&endpoints[leader - 1]))?;
    let member = &mut cluster.members_mut()[follower - 1];
    member.kill()?;
    member.wait_exit(Duration::from_secs(10))?;
    let started = Instant::now();
    cluster.restart(follower)?;
    runtime.block_on(loader::first_answer(
        &endpoints[follower - 1],
        revision,
        started,
        RESTART_LIMIT,
    ))
}

/// The largest member's resident memory now, KiB.
fn largest_kib(cluster: &dyn Contender) -> u64 {
    cluster
        .members()
        .iter()
        .filter_map(|m| m.resident_kib())
        .max()
        .unwrap_or(0)
}

/// Each member's count of leader changes.
fn leader_changes(side: Side, metrics: &[SocketAddr]) -> Result<Vec<u64>> {
    metrics
        .iter()
        .map(|address| Ok(metric(*address, side.leader_changes_metric())?.unwrap_or(0.0) as u64))
        .collect()
}

/// The largest value of `name` over the members.
fn largest_metric(metrics: &[SocketAddr], name: &str) -> Result<f64> {
    let mut largest = 0.0f64;
    for address in metrics {
        let value =
            metric(*address, name)?.with_context(|| format!("{address}/metrics has no {name}"))?;
        largest = largest.max(value);
    }
    Ok(largest)
}

/// The value of the unlabelled metric `name` on the `/metrics` page at
/// `address`; `None` when the page does not have it.
fn metric(address: SocketAddr, name: &str) -> Result<Option<f64>> {
    let page = http_get::get(address, "/metrics", METRICS_TIMEOUT)
        .with_context(|| format!("GET {address}/metrics"))?;
    Ok(metric_in(&page, name))
}

/// The value of the unlabelled metric `name` in a Prometheus text page.
fn metric_in(page: &str, name: &str) -> Option<f64> {
    page.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(' ')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// One point, as soon as it is measured.
fn print_point(p: &ScalePoint) {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let optional = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.0} ms"));
    eprintln!(
        "{} at {} keys: load {:.0} keys/s ({:.1} s, {} batches again), update {:.0} keys/s ({} keys, {} again); memory idle {:.0} MiB, settled {:.0} MiB, peak {:.0} MiB; {} leader changes ({} new terms); longest leader gap {}, longest loop turn {}; follower restart {:.2} s; {} leases ({:.1} s), {} watchers ({} events)",
        p.system,
        p.keys,
        p.load_keys_per_second,
        p.load_seconds,
        p.load_retried_batches,
        p.update_keys_per_second,
        p.updated_keys,
        p.update_retried_batches,
        mib(p.idle_kib),
        mib(p.settled_kib),
        mib(p.peak_kib),
        p.leader_changes,
        p.term_changes.map_or("n/a".to_string(), |t| t.to_string()),
        optional(p.longest_leader_gap_ms),
        optional(p.longest_loop_turn_ms),
        p.follower_restart_seconds,
        p.leases,
        p.lease_seconds,
        p.watchers,
        p.watch_events,
    );
}

/// The table, with ratios against etcd where both ran.
fn print_text(report: &ScaleReport) {
    println!(
        "scale: {}-byte values, {} puts per txn, {} clients, heartbeat {} ms, election {} ms",
        report.value_bytes, report.batch, report.clients, report.heartbeat_ms, report.election_ms
    );
    println!(
        "{:<22} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>6} {:>8} {:>8} {:>8}",
        "system",
        "keys",
        "load/s",
        "update/s",
        "idle MiB",
        "set. MiB",
        "peak MiB",
        "leader±",
        "terms",
        "gap ms",
        "turn ms",
        "restart"
    );
    let optional = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.0}"));
    for p in &report.points {
        println!(
            "{:<22} {:>9} {:>10.0} {:>10.0} {:>9.0} {:>9.0} {:>9.0} {:>7} {:>6} {:>8} {:>8} {:>7.2}s",
            p.system,
            p.keys,
            p.load_keys_per_second,
            p.update_keys_per_second,
            p.idle_kib as f64 / 1024.0,
            p.settled_kib as f64 / 1024.0,
            p.peak_kib as f64 / 1024.0,
            p.leader_changes,
            p.term_changes.map_or("n/a".to_string(), |t| t.to_string()),
            optional(p.longest_leader_gap_ms),
            optional(p.longest_loop_turn_ms),
            p.follower_restart_seconds
        );
    }
    for pair in report.points.chunks(2) {
        if let [ours, theirs] = pair {
            if ours.keys == theirs.keys && theirs.system.starts_with("etcd") {
                println!(
                    "at {} keys, bellwether / etcd: load {:.2}x, update {:.2}x, settled memory {:.2}x, peak memory {:.2}x, restart {:.2}x",
                    ours.keys,
                    ours.load_keys_per_second / theirs.load_keys_per_second,
                    ours.update_keys_per_second / theirs.update_keys_per_second,
                    ours.settled_kib as f64 / theirs.settled_kib.max(1) as f64,
                    ours.peak_kib as f64 / theirs.peak_kib.max(1) as f64,
                    ours.follower_restart_seconds / theirs.follower_restart_seconds,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_is_read_by_its_exact_name() {
        let page = "# HELP x\nbellwether_leader_changes_total 3\n\
                    bellwether_leader_changes_total_other 9\n\
                    etcd_server_leader_changes_seen_total 1.5e+00\n";
        assert_eq!(
            metric_in(page, "bellwether_leader_changes_total"),
            Some(3.0)
        );
        assert_eq!(
            metric_in(page, "etcd_server_leader_changes_seen_total"),
            Some(1.5)
        );
        assert_eq!(metric_in(page, "bellwether_leader_changes"), None);
    }
}

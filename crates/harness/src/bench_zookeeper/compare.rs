//! `bench zookeeper --compare-zookeeper`: the same load against a 3-node
//! bellwether cluster serving ZooKeeper's protocol and a real 3-server
//! ZooKeeper 3.8 ensemble, in alternating rounds of one run (bellwether,
//! ZooKeeper, bellwether, ...), reported per round and as medians with
//! bellwether/ZooKeeper ratios.
//!
//! - bellwether: `bellwether node` processes of this executable
//!   ([`crate::process_cluster::ProcessCluster`]), each also serving ZooKeeper's protocol on
//!   `127.0.0.1:base+300+i` (`--zookeeper-listen`, as `bellwether up`
//!   places it); the write-ahead log is fsynced before an answer.
//! - ZooKeeper: Debian's `zookeeper` ([`ZookeeperEnsemble`], installed
//!   with apt-get when missing), the package's example settings, fsync on.
//!
//! Each round starts each system afresh (new data directories), waits for
//! its leader, loads it and stops it before the other starts, so the two
//! never compete for the machine. During each phase a thread keeps the
//! largest resident set size (`VmRSS`, and `RssAnon`) of every member.
//!
//! Every process started is a [`crate::member_process::Member`], killed
//! when dropped: on success, on error, and on SIGINT/SIGTERM, which set a
//! flag that every wait and the load check, so the run unwinds through the
//! guards. A temporary directory is removed afterwards; when the run
//! failed only the logs are kept.

use super::failover::{self, FailoverReport};
use super::load::{self, Phase, PhaseReport, ZkLoad, ZkLoadSpec};
use super::systems::{median, start_bellwether, Side, NODES};
use crate::bench_kv::compare::{nets, ratio, wait_agreement, RssSampler};
use crate::contender::Contender;
use crate::member_process::Member;
use crate::zookeeper_ensemble::{self, EnsembleLayout, ZookeeperEnsemble};
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Settings of the comparison.
#[derive(Clone, Debug)]
pub struct CompareSettings {
    /// The load, without endpoints (each system supplies its own).
    pub load: ZkLoadSpec,
    /// Rounds; each runs bellwether, then ZooKeeper.
    pub rounds: usize,
    /// bellwether member i: peers base+i, HTTP base+100+i, etcd API
    /// base+200+i, ZooKeeper's protocol base+300+i. Also picks the
    /// loopback nets (see [`nets`]).
    pub base_port: u16,
    /// Data and logs; a temporary directory when `None`.
    pub dir: Option<PathBuf>,
    /// Failover runs after the load rounds (see [`failover`]); 0: none.
    pub failover_runs: usize,
}

/// One phase of one run: the load and the members' memory during it.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseRun {
    /// Throughput and latency.
    pub load: PhaseReport,
    /// Largest VmRSS per member (index 0 is member 1) during the phase, KiB.
    pub rss_kib_max: Vec<Option<u64>>,
    /// Largest `RssAnon` per member during the phase, KiB: resident memory
    /// of the member's own (heap, stacks), without pages mapped from files.
    pub anon_kib_max: Vec<Option<u64>>,
}

impl PhaseRun {
    /// The largest member's peak RSS, KiB.
    pub fn largest_member_kib(&self) -> Option<u64> {
        self.rss_kib_max.iter().flatten().copied().max()
    }

    /// The largest member's peak anonymous memory, KiB.
    pub fn largest_member_anon_kib(&self) -> Option<u64> {
        self.anon_kib_max.iter().flatten().copied().max()
    }
}

/// One system loaded once.
#[derive(Clone, Debug, Serialize)]
pub struct SideRun {
    /// Round, from 1.
    pub round: usize,
    /// Which system.
    pub side: Side,
    /// Name and version.
    pub system: String,
    /// The ZooKeeper endpoints loaded.
    pub endpoints: Vec<String>,
    /// The member that led when the load started (1-based).
    pub leader: usize,
    /// The phases, in the order they ran.
    pub phases: Vec<PhaseRun>,
}

/// One system's medians over the rounds for one phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Medians {
    /// Answered per second.
    pub per_second: Option<f64>,
    /// Median latency, of rounds that completed something.
    pub latency_ms_p50: Option<f64>,
    /// 99th percentile latency, likewise.
    pub latency_ms_p99: Option<f64>,
    /// Largest member's peak RSS, KiB.
    pub largest_member_kib: Option<f64>,
    /// Largest member's peak anonymous memory, KiB.
    pub largest_member_anon_kib: Option<f64>,
    /// Failed operations, all rounds together.
    pub errors: u64,
}

/// bellwether's median over ZooKeeper's; `None` when either is missing
/// or ZooKeeper's is zero.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ratios {
    /// Above 1: bellwether answers more per second.
    pub throughput: Option<f64>,
    /// Below 1: bellwether's median latency is lower.
    pub latency_p50: Option<f64>,
    /// Below 1: bellwether's 99th percentile is lower.
    pub latency_p99: Option<f64>,
    /// Largest member's peak RSS; below 1: bellwether uses less.
    pub memory: Option<f64>,
    /// The same for anonymous memory.
    pub anon_memory: Option<f64>,
}

/// One phase over all rounds.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseSummary {
    /// The phase.
    pub phase: Phase,
    /// What one operation is.
    pub description: String,
    /// bellwether's medians.
    pub bellwether: Medians,
    /// ZooKeeper's medians.
    pub zookeeper: Medians,
    /// bellwether over ZooKeeper, of the medians.
    pub ratios: Ratios,
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    /// Closed-loop clients.
    pub clients: usize,
    /// ZooKeeper sessions the clients share.
    pub conns: usize,
    /// Measured seconds per phase.
    pub seconds: f64,
    /// Unmeasured lead-in per phase.
    pub warmup_seconds: f64,
    /// Data size of creates and sets.
    pub value_bytes: usize,
    /// Rounds run.
    pub rounds: usize,
    /// bellwether's name and version.
    pub bellwether_system: String,
    /// ZooKeeper's name and version.
    pub zookeeper_system: String,
    /// Every run, in the order they ran.
    pub runs: Vec<SideRun>,
    /// Per phase: medians and ratios.
    pub summary: Vec<PhaseSummary>,
    /// The failover runs, when asked for.
    pub failover: Option<FailoverReport>,
}

/// Runs the comparison.
pub fn run(settings: &CompareSettings) -> Result<CompareReport> {
    let interrupted = crate::bench_support::watch_for_interruption();
    let mut scratch =
        crate::bench_support::ScratchDir::create(settings.dir.as_deref(), "zookeeper")?;
    let runtime = load::runtime()?;
    let measured = measure_rounds(settings, &scratch.path, &runtime, &interrupted);
    measured.map_err(|error| {
        scratch.keep_logs = true;
        anyhow::anyhow!("{error:#}\nlogs are kept in {}", scratch.path.display())
    })
}

/// Installs ZooKeeper if needed (before any round, so that no round waits
/// for apt-get), then runs the rounds.
fn measure_rounds(
    settings: &CompareSettings,
    dir: &Path,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<CompareReport> {
    zookeeper_ensemble::ensure_installed(dir)?;
    let (bellwether_net, zookeeper_net) = nets(settings.base_port);
    let mut runs = Vec::with_capacity(2 * settings.rounds);
    for round in 1..=settings.rounds {
        let bellwether =
            measure_bellwether(dir, round, bellwether_net, settings, runtime, interrupted)?;
        runs.push(bellwether);
        let zookeeper =
            measure_zookeeper(dir, round, zookeeper_net, settings, runtime, interrupted)?;
        runs.push(zookeeper);
    }
    let failover = (settings.failover_runs > 0)
        .then(|| {
            failover::run(
                settings.failover_runs,
                dir,
                settings.base_port,
                (bellwether_net, zookeeper_net),
                runtime,
                interrupted,
            )
        })
        .transpose()?;
    let system_of = |side: Side| {
        runs.iter()
            .find(|r| r.side == side)
            .map_or_else(String::new, |r| r.system.clone())
    };
    Ok(CompareReport {
        clients: settings.load.clients,
        conns: settings.load.conns,
        seconds: settings.load.seconds,
        warmup_seconds: settings.load.warmup_seconds,
        value_bytes: settings.load.value_bytes,
        rounds: settings.rounds,
        bellwether_system: system_of(Side::Bellwether),
        zookeeper_system: system_of(Side::Zookeeper),
        summary: summarize(&runs),
        runs,
        failover,
    })
}

/// Starts a fresh bellwether cluster, loads it, and kills its members
/// before returning.
fn measure_bellwether(
    dir: &Path,
    round: usize,
    net: u8,
    settings: &CompareSettings,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<SideRun> {
    let base = settings.base_port;
    let zookeeper_address = |i| bellwether_cli_common::up_layout::zookeeper_address(base, i);
    let mut cluster = start_bellwether(&dir.join(format!("round{round}-bellwether")), net, base)?;
    let system = cluster.system();
    let leader = wait_agreement(&mut cluster, interrupted)?.member;
    let endpoints: Vec<String> = (1..=NODES).map(zookeeper_address).collect();
    let pids = cluster.members().iter().map(Member::pid).collect();
    let phases = load_side(&system, &endpoints, pids, settings, runtime, interrupted)?;
    for member in cluster.members_mut() {
        member
            .check_running()
            .with_context(|| format!("{system}: a member died during the load"))?;
    }
    Ok(SideRun {
        round,
        side: Side::Bellwether,
        system,
        endpoints,
        leader,
        phases,
    })
    // The members are killed here, before ZooKeeper starts.
}

/// Starts a fresh ZooKeeper ensemble, loads it, and kills its servers
/// before returning.
fn measure_zookeeper(
    dir: &Path,
    round: usize,
    net: u8,
    settings: &CompareSettings,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<SideRun> {
    let mut ensemble = ZookeeperEnsemble::start(EnsembleLayout {
        dir: dir.join(format!("round{round}-zookeeper")),
        net,
        servers: NODES,
    })?;
    let (leader, version) = ensemble.wait_ready(interrupted)?;
    let system = format!("zookeeper {version}");
    let endpoints = ensemble.client_endpoints();
    let pids = ensemble.servers().iter().map(Member::pid).collect();
    let phases = load_side(&system, &endpoints, pids, settings, runtime, interrupted)?;
    for server in ensemble.servers_mut() {
        server
            .check_running()
            .with_context(|| format!("{system}: a server died during the load"))?;
    }
    Ok(SideRun {
        round,
        side: Side::Zookeeper,
        system,
        endpoints,
        leader,
        phases,
    })
}

/// Opens the sessions on `endpoints` and runs every phase, sampling the
/// memory of `pids` during each.
fn load_side(
    system: &str,
    endpoints: &[String],
    pids: Vec<Option<u32>>,
    settings: &CompareSettings,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<Vec<PhaseRun>> {
    let spec = ZkLoadSpec {
        endpoints: endpoints.to_vec(),
        ..settings.load.clone()
    };
    let mut load = runtime
        .block_on(ZkLoad::connect(&spec, interrupted))
        .with_context(|| format!("{system}: cannot start the load"))?;
    let mut phases = Vec::with_capacity(Phase::ALL.len());
    for phase in Phase::ALL {
        let sampler = RssSampler::start(pids.clone());
        let report = runtime.block_on(load.run_phase(phase, interrupted));
        let (rss_kib_max, anon_kib_max) = sampler.stop();
        let report =
            report.with_context(|| format!("{system}: the {} phase failed", phase.name()))?;
        tracing::info!(
            system,
            phase = phase.name(),
            per_second = report.per_second.round(),
            p50_ms = report.latency_ms_p50,
            errors = report.errors,
            "phase done"
        );
        phases.push(PhaseRun {
            load: report,
            rss_kib_max,
            anon_kib_max,
        });
    }
    runtime.block_on(load.close());
    Ok(phases)
}

/// One side's medians for `phase` over `runs`.
fn medians(runs: &[SideRun], side: Side, phase: Phase) -> Medians {
    let phases: Vec<&PhaseRun> = runs
        .iter()
        .filter(|r| r.side == side)
        .flat_map(|r| r.phases.iter().filter(|p| p.load.phase == phase))
        .collect();
    let of = |pick: &dyn Fn(&PhaseRun) -> Option<f64>| {
        median(phases.iter().filter_map(|p| pick(p)).collect())
    };
    // A run that completed nothing has no latency (its 0 is no figure).
    let latency = |p: &PhaseRun, value: f64| (p.load.completed > 0).then_some(value);
    Medians {
        per_second: of(&|p| Some(p.load.per_second)),
        latency_ms_p50: of(&|p| latency(p, p.load.latency_ms_p50)),
        latency_ms_p99: of(&|p| latency(p, p.load.latency_ms_p99)),
        largest_member_kib: of(&|p| p.largest_member_kib().map(|k| k as f64)),
        largest_member_anon_kib: of(&|p| p.largest_member_anon_kib().map(|k| k as f64)),
        errors: phases.iter().map(|p| p.load.errors).sum(),
    }
}

/// Medians and ratios of every phase.
fn summarize(runs: &[SideRun]) -> Vec<PhaseSummary> {
    Phase::ALL
        .into_iter()
        .map(|phase| {
            let ours = medians(runs, Side::Bellwether, phase);
            let theirs = medians(runs, Side::Zookeeper, phase);
            let ratios = Ratios {
                throughput: ratio(ours.per_second, theirs.per_second),
                latency_p50: ratio(ours.latency_ms_p50, theirs.latency_ms_p50),
                latency_p99: ratio(ours.latency_ms_p99, theirs.latency_ms_p99),
                memory: ratio(ours.largest_member_kib, theirs.largest_member_kib),
                anon_memory: ratio(ours.largest_member_anon_kib, theirs.largest_member_anon_kib),
            };
            PhaseSummary {
                phase,
                description: phase.describe().to_string(),
                bellwether: ours,
                zookeeper: theirs,
                ratios,
            }
        })
        .collect()
}

/// Prints every run, then the medians and ratios.
pub fn print_text(report: &CompareReport) {
    if report.rounds > 0 {
        print_rounds(report);
    }
    if let Some(failover) = &report.failover {
        failover::print_text(failover);
    }
}

/// Prints the load rounds, then their medians and ratios.
fn print_rounds(report: &CompareReport) {
    println!(
        "zookeeper compare: {} clients · {} sessions · {} s per phase (after {} s warm-up) · {}-byte data · {} rounds, alternating · {} against {}",
        report.clients,
        report.conns,
        report.seconds,
        report.warmup_seconds,
        report.value_bytes,
        report.rounds,
        report.bellwether_system,
        report.zookeeper_system
    );
    for summary in &report.summary {
        println!("  {}: {}", summary.phase.name(), summary.description);
    }
    for run in &report.runs {
        println!(
            "  round {} · {} (leader #{}, endpoints {})",
            run.round,
            run.system,
            run.leader,
            run.endpoints.join(",")
        );
        for phase in &run.phases {
            let load = &phase.load;
            println!(
                "    {:<6} {:>8.0} op/s  p50 {:.3} ms  p99 {:.3} ms  ({} ok, {} errors)  RSS max {}; anonymous max {}",
                load.phase.name(),
                load.per_second,
                load.latency_ms_p50,
                load.latency_ms_p99,
                load.completed,
                load.errors,
                mib_list(&phase.rss_kib_max),
                mib_list(&phase.anon_kib_max)
            );
            if let Some(error) = &load.first_error {
                println!("      first error: {error}");
            }
        }
    }
    println!(
        "  medians of {} rounds, bellwether / zookeeper (ratio bellwether/zookeeper):",
        report.rounds
    );
    for summary in &report.summary {
        let (ours, theirs, ratios) = (&summary.bellwether, &summary.zookeeper, &summary.ratios);
        println!(
            "    {:<6} {} / {} op/s ({})  p50 {} / {} ms ({})  p99 {} / {} ms ({})  largest member RSS {} / {} MiB ({}), anonymous {} / {} MiB ({})  errors {} / {}",
            summary.phase.name(),
            figure(ours.per_second, 0),
            figure(theirs.per_second, 0),
            times(ratios.throughput),
            figure(ours.latency_ms_p50, 3),
            figure(theirs.latency_ms_p50, 3),
            times(ratios.latency_p50),
            figure(ours.latency_ms_p99, 3),
            figure(theirs.latency_ms_p99, 3),
            times(ratios.latency_p99),
            figure(ours.largest_member_kib.map(|k| k / 1024.0), 1),
            figure(theirs.largest_member_kib.map(|k| k / 1024.0), 1),
            times(ratios.memory),
            figure(ours.largest_member_anon_kib.map(|k| k / 1024.0), 1),
            figure(theirs.largest_member_anon_kib.map(|k| k / 1024.0), 1),
            times(ratios.anon_memory),
            ours.errors,
            theirs.errors
        );
    }
}

fn figure(value: Option<f64>, decimals: usize) -> String {
    value.map_or("n/a".to_string(), |v| format!("{v:.decimals$}"))
}

fn times(value: Option<f64>) -> String {
    value.map_or("n/a".to_string(), |v| format!("{v:.2}×"))
}

fn mib_list(kib: &[Option<u64>]) -> String {
    kib.iter()
        .enumerate()
        .map(|(i, k)| match k {
            Some(k) => format!("#{} {:.1} MiB", i + 1, *k as f64 / 1024.0),
            None => format!("#{} n/a", i + 1),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(side: Side, round: usize, per_second: f64, p50: f64, kib: u64) -> SideRun {
        let phase = |phase| PhaseRun {
            load: PhaseReport {
                phase,
                completed: 10,
                errors: 0,
                first_error: None,
                per_second,
                latency_ms_p50: p50,
                latency_ms_p99: p50 * 4.0,
            },
            rss_kib_max: vec![Some(kib / 2), Some(kib), None],
            anon_kib_max: vec![Some(kib / 4), None, None],
        };
        SideRun {
            round,
            side,
            system: format!("{side:?}"),
            endpoints: vec![],
            leader: 1,
            phases: Phase::ALL.map(phase).to_vec(),
        }
    }

    #[test]
    fn medians_take_the_middle_round_and_ratios_put_bellwether_over_zookeeper() {
        let runs = vec![
            run(Side::Bellwether, 1, 3000.0, 1.0, 20_480),
            run(Side::Zookeeper, 1, 1000.0, 4.0, 204_800),
            run(Side::Bellwether, 2, 9000.0, 0.5, 10_240),
            run(Side::Zookeeper, 2, 2000.0, 2.0, 102_400),
            run(Side::Bellwether, 3, 6000.0, 2.0, 30_720),
            run(Side::Zookeeper, 3, 3000.0, 3.0, 409_600),
        ];
        let summary = summarize(&runs);
        assert_eq!(summary.len(), 3);
        let create = &summary[0];
        assert_eq!(create.phase, Phase::Create);
        assert_eq!(create.bellwether.per_second, Some(6000.0));
        assert_eq!(create.zookeeper.per_second, Some(2000.0));
        assert_eq!(create.ratios.throughput, Some(3.0));
        assert_eq!(create.ratios.latency_p50, Some(1.0 / 3.0));
        assert_eq!(create.bellwether.largest_member_kib, Some(20_480.0));
        assert_eq!(create.ratios.memory, Some(0.1));
        assert_eq!(create.bellwether.largest_member_anon_kib, Some(5_120.0));
    }

    #[test]
    fn a_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![f64::NAN]), None);
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn a_run_that_completed_nothing_has_no_latency() {
        let mut failed = run(Side::Zookeeper, 1, 0.0, 0.0, 1024);
        for phase in &mut failed.phases {
            phase.load.completed = 0;
        }
        let runs = vec![run(Side::Bellwether, 1, 10.0, 1.0, 1024), failed];
        let summary = summarize(&runs);
        assert_eq!(summary[0].zookeeper.latency_ms_p50, None);
        assert_eq!(summary[0].ratios.latency_p50, None);
        assert_eq!(
            summary[0].ratios.throughput, None,
            "zero throughput is no divisor"
        );
    }
}

//! `bellwether bench failover`: how long a real cluster of member processes
//! on loopback goes without a leader that can commit when its leader fails,
//! and, with `--compare-etcd`, the same measurement on a real etcd cluster
//! with the same heartbeat and election timeout.
//!
//! Three faults, each repeated `--runs` times, one of each per run:
//! - crash: SIGKILL of the leader. Its peers see the connections reset.
//! - graceful: SIGTERM of the leader, which hands leadership over before
//!   exiting (bellwether and etcd both do).
//! - silent: the leader is cut off by nftables rules that drop its packets,
//!   so nothing resets; its followers only notice that heartbeats stop
//!   (the election timeout of Raft §5.2).
//!
//! A failover lasts from the instant just before the fault is injected
//! (T0) until a poll of a survivor sees it lead, in a term above the old
//! leader's, with a commit in that term (T1): the point where the cluster
//! can serve again (Raft §5.4.2, §8: a leader commits a no-op of its term).
//! Survivors are polled back to back with a 1 ms pause, so T1 is late by
//! up to one poll interval, which the report states. After each fault the
//! member is restarted on its data (or the partition healed) and the
//! benchmark waits until every member follows one leader and has its
//! commit index again.
//!
//! Everything started is undone on every exit path: members are killed by
//! their guards, nftables tables are deleted by theirs, the temporary
//! directory is removed (only logs are kept when the run failed). This is a
//! measurement, not a test: it asserts nothing about the times.

use crate::contender::{Contender, Leadership};
use crate::etcd_cluster::{self, EtcdCluster, EtcdLayout};
use crate::member_process::Member;
use crate::partition::{delete_table, nft_unavailable, partition_script, Partition};
use crate::process_cluster::{ClusterLayout, ProcessCluster, MEMBERS_MAX};
use anyhow::{bail, Context, Result};
use bellwether_cli_common::signals::SIGTERM;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Most runs per scenario: bounds the benchmark's length.
const RUNS_MAX: usize = 100;
/// Pause between two poll rounds of the survivors while a failover is on.
const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// Pause between two polls while waiting for agreement (nothing is timed).
const AGREEMENT_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// A failover must complete within this many election timeouts (and at
/// least `FAILOVER_TIME_MIN`), else the run fails.
const FAILOVER_ELECTIONS_MAX: u32 = 20;
/// Lower bound of the failover deadline, for tiny election timeouts.
const FAILOVER_TIME_MIN: Duration = Duration::from_secs(5);
/// Base of the deadline for a cluster to agree on a leader (plus
/// `FAILOVER_ELECTIONS_MAX` election timeouts): covers process start-up.
const AGREEMENT_TIME_BASE: Duration = Duration::from_secs(30);
/// Base of the deadline for a process to exit after SIGTERM or SIGKILL
/// (plus five election timeouts, for a leader that hands over first).
const EXIT_TIME_BASE: Duration = Duration::from_secs(10);
/// Quiet time after the first agreement before idle memory is read, so
/// start-up allocations have settled.
const IDLE_SETTLE: Duration = Duration::from_secs(3);
/// Quiet time after each recovery before the next fault, in election
/// timeouts (at least `SETTLE_MIN`), so that every fault hits a cluster in
/// its steady state: agreement only proves that the leader reaches every
/// follower, not that every peer connection is back. After a partition,
/// bellwether's transport may still be in a reconnect backoff (up to 1 s)
/// behind a dial that times out (1 s); etcd's streams re-dial likewise.
/// Without this pause a crash right after a healed partition sometimes
/// missed the connection-reset fast path.
const SETTLE_ELECTIONS: u32 = 2;
/// Lower bound of the settle time.
const SETTLE_MIN: Duration = Duration::from_millis(300);

/// Set when SIGINT or SIGTERM reaches the benchmark; every wait checks it
/// and fails, so guards clean up before the process exits.
/// Set once per process, by the first run.
static INTERRUPTED: std::sync::OnceLock<std::sync::Arc<AtomicBool>> = std::sync::OnceLock::new();

/// Flags of `bellwether bench failover`.
#[derive(clap::Args, Debug, Clone)]
pub struct FailoverArgs {
    /// Members per cluster (3 to 9).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Measurements per scenario.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Heartbeat interval in ms (etcd: --heartbeat-interval).
    #[arg(long, default_value_t = 100)]
    pub heartbeat_ms: u64,
    /// Minimum election timeout in ms (etcd: --election-timeout).
    #[arg(long, default_value_t = 1000)]
    pub election_ms: u64,
    /// bellwether's adaptive detector floor, in heartbeats (the member's
    /// `--detector-heartbeats`; 0: off, the fixed election timeout alone).
    #[arg(long, default_value_t = 3)]
    pub detector_heartbeats: u64,
    /// Also measure a real etcd cluster of the same size (Debian's
    /// etcd-server; installed with apt-get when missing).
    #[arg(long)]
    pub compare_etcd: bool,
    /// Instead of failovers: SECONDS of put load during which a follower
    /// is SIGSTOPped for 300 ms every 10 s; reports leader changes and the
    /// detectors' suspicions (what fast detection costs).
    #[arg(long, value_name = "SECONDS", conflicts_with = "compare_etcd")]
    pub pauses: Option<u64>,
    /// With --pauses: members reach each other through relays that hold
    /// every chunk this long each way (this kernel has no netem).
    #[arg(long, default_value_t = 0, requires = "pauses")]
    pub delay_ms: u64,
    /// With --delay-ms: each chunk's delay is drawn from delay ± this.
    #[arg(long, default_value_t = 0, requires = "pauses")]
    pub jitter_ms: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Member i: peer port base+i on 127.0.<net>.<i>, HTTP on
    /// 127.0.0.1:base+100+i. The loopback nets (bellwether, then etcd) are
    /// 230 + 2·((base / 100) mod 12) and the next one.
    #[arg(long, default_value_t = 17000)]
    pub base_port: u16,
    /// Directory for data and logs (must be empty; kept afterwards).
    /// Default: a temporary directory, removed afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// The faults measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// SIGKILL of the leader.
    Crash,
    /// SIGTERM of the leader (it hands over first).
    Graceful,
    /// The leader's packets are dropped (nftables); nothing resets.
    Silent,
}

impl Scenario {
    /// In the order of each run.
    pub const ALL: [Scenario; 3] = [Scenario::Crash, Scenario::Graceful, Scenario::Silent];

    fn name(self) -> &'static str {
        match self {
            Scenario::Crash => "crash",
            Scenario::Graceful => "graceful",
            Scenario::Silent => "silent",
        }
    }

    fn fault(self) -> &'static str {
        match self {
            Scenario::Crash => "SIGKILL of the leader",
            Scenario::Graceful => "SIGTERM of the leader (it hands over)",
            Scenario::Silent => "nftables drop of the leader's packets",
        }
    }
}

/// Everything measured, for `--json`.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverReport {
    /// Members per cluster.
    pub nodes: usize,
    /// Measurements per scenario.
    pub runs: usize,
    /// Heartbeat interval, ms (both systems).
    pub heartbeat_ms: u64,
    /// Minimum election timeout, ms (both systems).
    pub election_ms: u64,
    /// bellwether's adaptive detector floor in heartbeats (0: off).
    pub detector_heartbeats: u64,
    /// The bellwether cluster.
    pub bellwether: SystemReport,
    /// The etcd cluster, with `--compare-etcd`.
    pub etcd: Option<SystemReport>,
    /// Medians side by side, with `--compare-etcd`.
    pub comparison: Vec<Comparison>,
}

/// One system's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct SystemReport {
    /// Name and version.
    pub system: String,
    /// One entry per scenario, in `Scenario::ALL` order.
    pub scenarios: Vec<ScenarioReport>,
    /// Resident memory of the members.
    pub memory: MemoryReport,
    /// Mean time between two polls of the same survivor while waiting for
    /// the new leader: the typical lateness of T1.
    pub poll_interval_ms_mean: f64,
    /// Longest such gap: the worst lateness of T1.
    pub poll_interval_ms_max: f64,
    /// How a new leader is recognised.
    pub leader_detection: String,
    /// The nftables rules of the silent scenario.
    pub partition_rules: String,
}

/// One scenario's failover times, in ms.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// Which fault.
    pub scenario: Scenario,
    /// The fault, in words.
    pub fault: String,
    /// Every measured failover, in run order.
    pub samples_ms: Vec<f64>,
    /// Median of the samples.
    pub median_ms: Option<f64>,
    /// Smallest sample.
    pub min_ms: Option<f64>,
    /// Largest sample.
    pub max_ms: Option<f64>,
    /// Longest time the fault took to inject (the `kill` or `nft`
    /// command); included in the samples, since T0 precedes it.
    pub injection_ms_max: Option<f64>,
    /// Why the scenario was not measured.
    pub skipped: Option<String>,
}

/// Resident set sizes (`VmRSS`), KiB, per member (index 0 is member 1).
#[derive(Clone, Debug, Serialize)]
pub struct MemoryReport {
    /// After the first agreement and `IDLE_SETTLE` of quiet.
    pub idle_kib: Vec<Option<u64>>,
    /// Largest value sampled right after each new leader was detected and
    /// right after each recovery; see `note`.
    pub after_failover_kib_max: Vec<Option<u64>>,
    /// Sampled during a put load over the etcd API (see `load`).
    pub under_load_kib: Vec<Option<u64>>,
    /// The load: clients, value size, duration and throughput.
    pub load: String,
    /// What "after failover" means.
    pub note: String,
}

/// Medians of one scenario side by side.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Which fault.
    pub scenario: Scenario,
    /// bellwether's median failover, ms.
    pub bellwether_median_ms: Option<f64>,
    /// etcd's median failover, ms.
    pub etcd_median_ms: Option<f64>,
    /// etcd's median over bellwether's: above 1, bellwether fails over faster.
    pub ratio_etcd_over_bellwether: Option<f64>,
}

const MEMORY_NOTE: &str = "'under load' is VmRSS sampled during the put load described; 'after failover' is the \
    largest VmRSS sampled from each running member right after each new leader was detected and right after each \
    restarted or healed member caught up (the store then holds the load's keys)";

/// Deadlines and pauses derived from the flags.
#[derive(Clone, Copy, Debug)]
struct Timing {
    /// Longest failover accepted.
    failover_max: Duration,
    /// Longest wait for agreement.
    agreement_max: Duration,
    /// Longest wait for a signalled member to exit.
    exit_max: Duration,
    /// Quiet time between a recovery and the next fault.
    settle: Duration,
}

impl Timing {
    fn new(args: &FailoverArgs) -> Timing {
        let election = Duration::from_millis(args.election_ms);
        Timing {
            failover_max: (election * FAILOVER_ELECTIONS_MAX).max(FAILOVER_TIME_MIN),
            agreement_max: AGREEMENT_TIME_BASE + election * FAILOVER_ELECTIONS_MAX,
            exit_max: EXIT_TIME_BASE + election * 5,
            settle: (election * SETTLE_ELECTIONS).max(SETTLE_MIN),
        }
    }
}

/// Runs the benchmark: bellwether, then etcd with `--compare-etcd`.
pub fn run(args: &FailoverArgs) -> Result<FailoverReport> {
    validate(args)?;
    watch_for_interruption();
    let mut scratch = crate::bench_support::ScratchDir::create(args.dir.as_deref(), "failover")?;
    match measure_all(args, &scratch.path) {
        Ok(report) => Ok(report),
        Err(error) => {
            scratch.keep_logs = true;
            Err(anyhow::anyhow!(
                "{error:#}\nlogs are kept in {}",
                scratch.path.display()
            ))
        }
    }
}

fn validate(args: &FailoverArgs) -> Result<()> {
    if !(3..=MEMBERS_MAX).contains(&args.nodes) {
        bail!("--nodes must be between 3 and {MEMBERS_MAX}: the survivors of a failed leader must still be a majority");
    }
    if !(1..=RUNS_MAX).contains(&args.runs) {
        bail!("--runs must be between 1 and {RUNS_MAX}");
    }
    if args.heartbeat_ms == 0
        || args.election_ms < 2 * args.heartbeat_ms
        || args.election_ms > 60_000
    {
        bail!("--election-ms must be at least twice --heartbeat-ms (at least 1) and at most 60000");
    }
    if args.detector_heartbeats.saturating_mul(args.heartbeat_ms) > args.election_ms {
        bail!("--detector-heartbeats × --heartbeat-ms must not exceed --election-ms (0 turns the detector off)");
    }
    if args.jitter_ms > args.delay_ms {
        bail!("--jitter-ms must not exceed --delay-ms: a delay is never negative");
    }
    if args.compare_etcd && (args.election_ms < 5 * args.heartbeat_ms || args.election_ms > 50_000)
    {
        bail!("etcd refuses an --election-timeout under 5 heartbeats or over 50000 ms; pick --election-ms accordingly");
    }
    if args.base_port < 1024 || args.base_port as usize + 100 + args.nodes > u16::MAX as usize {
        bail!("--base-port must leave room for ports base+1 ..= base+100+nodes, from 1024 up");
    }
    Ok(())
}

/// The third octets of the two clusters' loopback IPs (see `--base-port`).
/// The bellwether cluster `args` describe, in `dir/bellwether` on
/// loopback net `net`, with its detector setting.
pub(crate) fn start_bellwether(args: &FailoverArgs, dir: &Path, net: u8) -> Result<ProcessCluster> {
    ProcessCluster::start_with_args(bellwether_layout(args, dir, net), detector_args(args))
}

/// Where and how the bellwether cluster of `args` runs.
pub(crate) fn bellwether_layout(args: &FailoverArgs, dir: &Path, net: u8) -> ClusterLayout {
    ClusterLayout {
        dir: dir.join("bellwether"),
        net,
        base_port: args.base_port,
        nodes: args.nodes,
        heartbeat_ms: args.heartbeat_ms,
        election_ms: args.election_ms,
    }
}

/// The members' detector setting.
pub(crate) fn detector_args(args: &FailoverArgs) -> Vec<String> {
    vec![
        "--detector-heartbeats".to_string(),
        args.detector_heartbeats.to_string(),
    ]
}

pub(crate) fn nets(base_port: u16) -> (u8, u8) {
    let bellwether = 230 + ((base_port / 100) % 12) as u8 * 2;
    (bellwether, bellwether + 1)
}

fn measure_all(args: &FailoverArgs, dir: &Path) -> Result<FailoverReport> {
    let (bellwether_net, etcd_net) = nets(args.base_port);
    let timing = Timing::new(args);
    let partitioning = nft_unavailable().map_or(Ok(()), Err);
    let bellwether = {
        let mut cluster = start_bellwether(args, dir, bellwether_net)?;
        let detection =
            "a survivor's GET /status shows role=leader, committed_in_term=true and a higher term";
        measure(
            &mut cluster,
            args,
            timing,
            &partitioning,
            bellwether_net,
            detection,
        )?
    };
    let etcd = if args.compare_etcd {
        let version = etcd_cluster::ensure_installed(dir)?;
        let layout = EtcdLayout {
            dir: dir.join("etcd"),
            net: etcd_net,
            nodes: args.nodes,
            heartbeat_ms: args.heartbeat_ms,
            election_ms: args.election_ms,
        };
        let mut cluster = EtcdCluster::start(layout, version)?;
        let detection = "a survivor's POST /v3/maintenance/status shows leader == its member_id, a higher raftTerm \
            and a raftIndex (commit index) above the old leader's";
        Some(measure(
            &mut cluster,
            args,
            timing,
            &partitioning,
            etcd_net,
            detection,
        )?)
    } else {
        None
    };
    let comparison = etcd
        .as_ref()
        .map_or_else(Vec::new, |etcd| compare(&bellwether, etcd));
    Ok(FailoverReport {
        nodes: args.nodes,
        runs: args.runs,
        heartbeat_ms: args.heartbeat_ms,
        election_ms: args.election_ms,
        detector_heartbeats: args.detector_heartbeats,
        bellwether,
        etcd,
        comparison,
    })
}

/// Clients, value size and seconds of the load during which memory is
/// sampled.
const LOAD_CLIENTS: usize = 64;
const LOAD_VALUE_BYTES: usize = 256;
const LOAD_SECONDS: f64 = 4.0;

/// A thread that puts `value_bytes`-byte values from `clients` clients
/// over the etcd API at `endpoints` for `seconds`, on a runtime of its own.
pub(crate) fn put_load_thread(
    endpoints: Vec<String>,
    clients: usize,
    seconds: f64,
    value_bytes: usize,
) -> std::thread::JoinHandle<Result<crate::bench_kv::KvReport>> {
    std::thread::spawn(move || -> Result<crate::bench_kv::KvReport> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(crate::bench_kv::load(
            &endpoints,
            "put",
            clients,
            8,
            seconds,
            value_bytes,
        ))
    })
}

/// Puts from 64 clients for 4 s over the etcd API; memory is sampled after
/// 3 s of it. Returns the samples and a description with the throughput.
fn memory_under_load(contender: &dyn Contender) -> Result<(Vec<Option<u64>>, String)> {
    let load = put_load_thread(
        contender.client_endpoints(),
        LOAD_CLIENTS,
        LOAD_SECONDS,
        LOAD_VALUE_BYTES,
    );
    std::thread::sleep(Duration::from_secs_f64(LOAD_SECONDS - 1.0));
    let sampled: Vec<Option<u64>> = contender
        .members()
        .iter()
        .map(Member::resident_kib)
        .collect();
    let report = load
        .join()
        .map_err(|_| anyhow::anyhow!("the load thread panicked"))??;
    let description = format!(
        "{LOAD_CLIENTS} clients putting {LOAD_VALUE_BYTES}-byte values for {LOAD_SECONDS} s over the etcd API: {:.0} put/s, {} errors; sampled after {} s",
        report.per_second,
        report.errors,
        LOAD_SECONDS - 1.0
    );
    Ok((sampled, description))
}

fn compare(bellwether: &SystemReport, etcd: &SystemReport) -> Vec<Comparison> {
    bellwether
        .scenarios
        .iter()
        .zip(&etcd.scenarios)
        .map(|(ours, theirs)| {
            assert_eq!(
                ours.scenario, theirs.scenario,
                "both reports list the scenarios in the same order"
            );
            let ratio = match (ours.median_ms, theirs.median_ms) {
                (Some(ours), Some(theirs)) if ours > 0.0 => Some(theirs / ours),
                _ => None,
            };
            Comparison {
                scenario: ours.scenario,
                bellwether_median_ms: ours.median_ms,
                etcd_median_ms: theirs.median_ms,
                ratio_etcd_over_bellwether: ratio,
            }
        })
        .collect()
}

/// Per-system accumulators.
struct Measurement {
    /// (failover, injection) per scenario, in `Scenario::ALL` order.
    samples: [Vec<(Duration, Duration)>; 3],
    /// Largest RSS sampled per member after failovers.
    after_failover_kib_max: Vec<Option<u64>>,
    /// Poll rounds while waiting for new leaders.
    poll_rounds: u64,
    /// Total time of those waits.
    poll_time: Duration,
    /// Longest gap between two rounds.
    poll_gap_max: Duration,
}

impl Measurement {
    /// Nothing measured yet, for a cluster of `members`.
    fn new(members: usize) -> Measurement {
        Measurement {
            samples: [Vec::new(), Vec::new(), Vec::new()],
            after_failover_kib_max: vec![None; members],
            poll_rounds: 0,
            poll_time: Duration::ZERO,
            poll_gap_max: Duration::ZERO,
        }
    }

    fn sample_memory(&mut self, contender: &dyn Contender) {
        for (max, member) in self
            .after_failover_kib_max
            .iter_mut()
            .zip(contender.members())
        {
            if let Some(kib) = member.resident_kib() {
                *max = Some(max.map_or(kib, |m| m.max(kib)));
            }
        }
    }
}

fn measure(
    contender: &mut dyn Contender,
    args: &FailoverArgs,
    timing: Timing,
    partitioning: &Result<(), String>,
    net: u8,
    detection: &str,
) -> Result<SystemReport> {
    let system = contender.system();
    let table = format!("bwbench{net}");
    if partitioning.is_ok() {
        delete_table(&table); // A stale table from a killed run.
    }
    wait_agreement(contender, timing, "the first leader")?;
    std::thread::sleep(IDLE_SETTLE);
    wait_agreement(contender, timing, "the first leader, after the idle pause")?;
    let idle_kib: Vec<Option<u64>> = contender
        .members()
        .iter()
        .map(Member::resident_kib)
        .collect();
    let (under_load_kib, load) = memory_under_load(contender)?;
    tracing::info!(system = %system, ?idle_kib, ?under_load_kib, "cluster up; measuring failovers");
    let measurement = measure_failovers(contender, &system, args, timing, partitioning, &table)?;
    let scenarios = Scenario::ALL
        .into_iter()
        .zip(&measurement.samples)
        .map(|(scenario, samples)| summarize(scenario, samples, partitioning))
        .collect();
    let uid_rule = contender
        .socket_uid(1)
        .map_or("", |_| ", meta skuid <leader's uid> drop");
    Ok(SystemReport {
        system,
        scenarios,
        memory: MemoryReport {
            idle_kib,
            after_failover_kib_max: measurement.after_failover_kib_max,
            under_load_kib,
            load,
            note: MEMORY_NOTE.into(),
        },
        poll_interval_ms_mean: ms(measurement.poll_time) / measurement.poll_rounds.max(1) as f64,
        poll_interval_ms_max: ms(measurement.poll_gap_max),
        leader_detection: detection.to_string(),
        partition_rules: format!("table ip {table}, chain output (type filter hook output priority 0): ip saddr <leader IP> drop, ip daddr <leader IP> drop{uid_rule}"),
    })
}

/// `--runs` rounds of one failover per scenario, in `Scenario::ALL`
/// order (the silent one only where nftables can partition); `table` is
/// the nftables table the silent scenario uses.
fn measure_failovers(
    contender: &mut dyn Contender,
    system: &str,
    args: &FailoverArgs,
    timing: Timing,
    partitioning: &Result<(), String>,
    table: &str,
) -> Result<Measurement> {
    let mut measurement = Measurement::new(contender.members().len());
    for run in 1..=args.runs {
        for (slot, scenario) in Scenario::ALL.into_iter().enumerate() {
            if scenario == Scenario::Silent && partitioning.is_err() {
                continue;
            }
            let sample = failover_once(contender, scenario, timing, table, &mut measurement)
                .with_context(|| {
                    format!(
                        "{system}: {} scenario, run {run} of {}",
                        scenario.name(),
                        args.runs
                    )
                })?;
            tracing::info!(system = %system, scenario = scenario.name(), run, failover_ms = ms(sample.0), "failover measured");
            measurement.samples[slot].push(sample);
        }
    }
    Ok(measurement)
}

/// Injects one fault into the agreed leader, times the failover, then
/// restores the member and waits for agreement. Returns (failover,
/// injection time).
fn failover_once(
    contender: &mut dyn Contender,
    scenario: Scenario,
    timing: Timing,
    table: &str,
    measurement: &mut Measurement,
) -> Result<(Duration, Duration)> {
    let old = wait_agreement(contender, timing, "a leader before the fault")?;
    let survivors: Vec<usize> = (1..=contender.members().len())
        .filter(|i| *i != old.member)
        .collect();
    let rules = partition_script(
        table,
        contender.peer_ip(old.member),
        contender.socket_uid(old.member),
    );
    let t0 = Instant::now();
    let healer = inject(
        &mut contender.members_mut()[old.member - 1],
        scenario,
        table,
        &rules,
    )?;
    let injection = t0.elapsed();
    let (failover, new_leader) =
        wait_new_leader(contender, &survivors, &old, t0, timing, measurement)?;
    tracing::debug!(
        scenario = scenario.name(),
        old_leader = old.member,
        old_term = old.term,
        new_leader,
        "new leader"
    );
    measurement.sample_memory(contender);
    drop(healer); // Heals the partition, if any.
    if scenario != Scenario::Silent {
        reap(
            &mut contender.members_mut()[old.member - 1],
            scenario,
            timing,
        )?;
        contender.restart(old.member)?;
    }
    wait_agreement(
        contender,
        timing,
        "every member following one leader again after recovery",
    )?;
    measurement.sample_memory(contender);
    std::thread::sleep(timing.settle);
    Ok((failover, injection))
}

/// Injects `scenario`'s fault into the leader; the partition's guard, if
/// any, heals it when dropped.
fn inject(
    leader: &mut Member,
    scenario: Scenario,
    table: &str,
    rules: &str,
) -> Result<Option<Partition>> {
    match scenario {
        Scenario::Crash => leader.kill().map(|()| None),
        Scenario::Graceful => leader.terminate().map(|()| None),
        Scenario::Silent => {
            // The guard exists before nft runs, so the table is deleted
            // whatever happens next.
            let partition = Partition {
                table: table.to_string(),
            };
            partition.apply(rules)?;
            Ok(Some(partition))
        }
    }
}

/// Waits for the signalled leader's process to exit and reaps it.
fn reap(leader: &mut Member, scenario: Scenario, timing: Timing) -> Result<()> {
    let status = leader.wait_exit(timing.exit_max)?;
    // A clean stop exits with success, or by SIGTERM itself: etcd re-raises
    // the signal once its handlers (the handover) ran.
    let clean =
        status.success() || std::os::unix::process::ExitStatusExt::signal(&status) == Some(SIGTERM);
    if scenario == Scenario::Graceful && !clean {
        tracing::warn!(%status, log = %leader.log_path().display(), "the SIGTERM'd leader exited uncleanly");
    }
    Ok(())
}

/// Polls the survivors back to back until one is the new, committed leader;
/// returns the failover time and that member.
fn wait_new_leader(
    contender: &mut dyn Contender,
    survivors: &[usize],
    old: &Leadership,
    t0: Instant,
    timing: Timing,
    measurement: &mut Measurement,
) -> Result<(Duration, usize)> {
    let deadline = t0 + timing.failover_max;
    let mut previous_start: Option<Instant> = None;
    let mut rounds: u64 = 0;
    loop {
        let start = Instant::now();
        if let Some(previous) = previous_start {
            measurement.poll_gap_max = measurement.poll_gap_max.max(start - previous);
        }
        previous_start = Some(start);
        rounds += 1;
        let found = contender.new_leader(survivors, old);
        let t1 = Instant::now();
        if let Some(member) = found {
            assert!(survivors.contains(&member), "only survivors are polled");
            measurement.poll_rounds += rounds;
            measurement.poll_time += t1 - t0;
            return Ok((t1 - t0, member));
        }
        check_interrupted()?;
        for i in survivors {
            contender.members_mut()[i - 1].check_running()?;
        }
        if t1 >= deadline {
            let logs: Vec<String> = survivors
                .iter()
                .map(|i| contender.members()[i - 1].log_path().display().to_string())
                .collect();
            bail!(
                "no survivor (members {survivors:?}) led with a commit in a term above {} within {:?} of the fault; read {}",
                old.term,
                timing.failover_max,
                logs.join(", ")
            );
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Waits until every member follows one leader and has its commit index.
fn wait_agreement(contender: &mut dyn Contender, timing: Timing, what: &str) -> Result<Leadership> {
    let deadline = Instant::now() + timing.agreement_max;
    loop {
        if let Some(leadership) = contender.agreed_leader() {
            assert!((1..=contender.members().len()).contains(&leadership.member));
            return Ok(leadership);
        }
        check_interrupted()?;
        for member in contender.members_mut() {
            member.check_running()?;
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> = contender
                .members()
                .iter()
                .map(|m| m.log_path().display().to_string())
                .collect();
            bail!(
                "{}: no agreement on {what} within {:?}; read {}",
                contender.system(),
                timing.agreement_max,
                logs.join(", ")
            );
        }
        std::thread::sleep(AGREEMENT_POLL_INTERVAL);
    }
}

fn summarize(
    scenario: Scenario,
    samples: &[(Duration, Duration)],
    partitioning: &Result<(), String>,
) -> ScenarioReport {
    let mut sorted: Vec<f64> = samples.iter().map(|(failover, _)| ms(*failover)).collect();
    sorted.sort_by(f64::total_cmp);
    let median = match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[n / 2]),
        n => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    };
    let skipped = match (scenario, partitioning) {
        (Scenario::Silent, Err(reason)) => Some(reason.clone()),
        _ => None,
    };
    ScenarioReport {
        scenario,
        fault: scenario.fault().to_string(),
        samples_ms: samples.iter().map(|(failover, _)| ms(*failover)).collect(),
        median_ms: median,
        min_ms: sorted.first().copied(),
        max_ms: sorted.last().copied(),
        injection_ms_max: samples
            .iter()
            .map(|(_, injection)| ms(*injection))
            .reduce(f64::max),
        skipped,
    }
}

/// Milliseconds, to the microsecond.
fn ms(duration: Duration) -> f64 {
    duration.as_micros() as f64 / 1000.0
}

fn watch_for_interruption() {
    INTERRUPTED.get_or_init(crate::bench_support::watch_for_interruption);
}

fn check_interrupted() -> Result<()> {
    if INTERRUPTED
        .get()
        .is_some_and(|flag| flag.load(Ordering::SeqCst))
    {
        bail!("interrupted; every process the benchmark started is being stopped");
    }
    Ok(())
}

/// Prints the report as a table, then memory and resolution lines.
pub fn print_text(report: &FailoverReport) {
    let etcd = report.etcd.as_ref();
    println!(
        "failover: {} members, {} runs per scenario, heartbeat {} ms, election timeout {} ms, bellwether's detector floor {}",
        report.nodes,
        report.runs,
        report.heartbeat_ms,
        report.election_ms,
        match report.detector_heartbeats {
            0 => "off".to_string(),
            n => format!("{n} heartbeats"),
        }
    );
    let mut header = vec![
        format!("{:<10}", "scenario"),
        format!(
            "{:<36}",
            format!("{} median [min–max]", report.bellwether.system)
        ),
    ];
    if let Some(etcd) = etcd {
        header.push(format!(
            "{:<36}",
            format!("{} median [min–max]", etcd.system)
        ));
        header.push("etcd/bellwether".to_string());
    }
    println!("{}", header.join(" | "));
    for (index, ours) in report.bellwether.scenarios.iter().enumerate() {
        let mut row = vec![
            format!("{:<10}", ours.scenario.name()),
            format!("{:<36}", cell(ours)),
        ];
        if let Some(etcd) = etcd {
            row.push(format!("{:<36}", cell(&etcd.scenarios[index])));
            let ratio = report
                .comparison
                .get(index)
                .and_then(|c| c.ratio_etcd_over_bellwether);
            row.push(ratio.map_or("n/a".to_string(), |r| format!("{r:.2}×")));
        }
        println!("{}", row.join(" | ").trim_end());
    }
    for system in std::iter::once(&report.bellwether).chain(etcd) {
        println!(
            "memory {}: idle {}; under load {}; after failovers (max) {}\n  load: {}",
            system.system,
            memory_line(&system.memory.idle_kib),
            memory_line(&system.memory.under_load_kib),
            memory_line(&system.memory.after_failover_kib_max),
            system.memory.load
        );
    }
    for system in std::iter::once(&report.bellwether).chain(etcd) {
        let injection = system
            .scenarios
            .iter()
            .filter_map(|s| s.injection_ms_max)
            .reduce(f64::max)
            .unwrap_or(0.0);
        println!(
            "resolution {}: survivors polled every {:.2} ms on average (largest gap {:.2} ms); faults took up to {:.2} ms to inject (included)",
            system.system, system.poll_interval_ms_mean, system.poll_interval_ms_max, injection
        );
    }
    println!("memory note: {MEMORY_NOTE}");
}

fn cell(scenario: &ScenarioReport) -> String {
    if let Some(reason) = &scenario.skipped {
        return format!("skipped: {reason}");
    }
    match (scenario.median_ms, scenario.min_ms, scenario.max_ms) {
        (Some(median), Some(min), Some(max)) => format!("{median:.1} ms [{min:.1}–{max:.1}]"),
        _ => "no samples".to_string(),
    }
}

fn memory_line(kib: &[Option<u64>]) -> String {
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
    use std::net::Ipv4Addr;

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let samples: Vec<(Duration, Duration)> = [4, 1, 3, 2]
            .iter()
            .map(|ms| (Duration::from_millis(*ms), Duration::ZERO))
            .collect();
        let report = summarize(Scenario::Crash, &samples, &Ok(()));
        assert_eq!(report.median_ms, Some(2.5));
        assert_eq!((report.min_ms, report.max_ms), (Some(1.0), Some(4.0)));
        assert_eq!(
            report.samples_ms,
            vec![4.0, 1.0, 3.0, 2.0],
            "samples stay in run order"
        );
    }

    #[test]
    fn a_silent_scenario_without_nft_is_skipped_with_the_reason() {
        let report = summarize(Scenario::Silent, &[], &Err("nft cannot run".into()));
        assert_eq!(report.skipped.as_deref(), Some("nft cannot run"));
        assert_eq!(report.median_ms, None);
    }

    #[test]
    fn the_partition_drops_both_directions_of_the_leader_ip() {
        let script = partition_script("bwbench_unit", Ipv4Addr::new(127, 0, 234, 2), Some(61_001));
        assert!(script.contains("type filter hook output priority 0;"));
        assert!(
            script.contains("ip saddr 127.0.234.2 drop")
                && script.contains("ip daddr 127.0.234.2 drop")
        );
        assert!(script.contains("meta skuid 61001 drop"));
    }

    #[test]
    fn the_nets_stay_in_the_benchmark_range_and_differ() {
        for base in (1024..=65_000u16).step_by(100) {
            let (ours, theirs) = nets(base);
            assert!((230..=253).contains(&ours) && theirs == ours + 1);
        }
    }
}

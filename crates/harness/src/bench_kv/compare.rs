//! `bench kv --compare-etcd`: the same load against a 3-node bellwether
//! cluster and a 3-member etcd 3.4 cluster, one after the other in one run.
//!
//! - bellwether: `bellwether node` processes of this executable, as `bench
//!   failover` starts them ([`ProcessCluster`]); the write-ahead log is
//!   fsynced before anything is acknowledged (the only mode it has).
//! - etcd: Debian's `etcd-server` ([`EtcdCluster`], installed with apt-get
//!   when missing), default settings (fsync on) apart from the heartbeat and
//!   election timeout, which both systems get from the same flags.
//!
//! Each cluster is started, waited for until every member follows one
//! leader, loaded, and stopped before the next starts, so the two never
//! compete for the machine. While the load runs, a thread reads every
//! member's resident set size (`VmRSS`) every [`RSS_SAMPLE_INTERVAL`] and
//! keeps the largest per member.
//!
//! Every process started is a [`Member`], killed when dropped: on success,
//! on error, and on SIGINT/SIGTERM, which set a flag that every wait and the
//! load check, so the run unwinds through the guards. A temporary directory
//! is removed afterwards; when the run failed only the logs are kept.

use super::load::{self, KvReport, LoadSpec};
use crate::contender::{Contender, Leadership};
use crate::etcd_cluster::{self, EtcdCluster, EtcdLayout, EtcdTls};
use crate::member_process::Member;
use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Members of each cluster.
pub const NODES: usize = 3;
/// How often the members' memory is read during the load.
const RSS_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Longest wait for a fresh cluster to agree on a leader.
const AGREEMENT_TIME_MAX: Duration = Duration::from_secs(60);
/// Pause between two agreement polls.
const AGREEMENT_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Which members the clients connect to.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// Connection i goes to member `i mod 3 + 1`; followers forward.
    All,
    /// Every connection goes to the leader.
    Leader,
}

/// Cluster settings of the comparison.
#[derive(Clone, Debug)]
pub struct CompareSettings {
    /// The load, without endpoints (each cluster supplies its own).
    pub load: LoadSpec,
    /// Which members the clients use.
    pub target: Target,
    /// Heartbeat interval, ms (both systems).
    pub heartbeat_ms: u64,
    /// Election timeout, ms (both systems).
    pub election_ms: u64,
    /// bellwether member i: peer port base+i, HTTP base+100+i, etcd API
    /// base+200+i. Also picks the loopback nets (see [`nets`]).
    pub base_port: u16,
    /// Data and logs; a temporary directory when `None`.
    pub dir: Option<PathBuf>,
    /// TLS with client certificates on both systems' client and peer
    /// ports (a throwaway CA from `bellwether certs`).
    pub tls: bool,
    /// bellwether reads linearizably from the leader's lease.
    pub lease_reads: bool,
}

/// Both sides and their ratios.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    /// What one operation is.
    pub op_description: String,
    /// Measured seconds per side.
    pub seconds: f64,
    /// Unmeasured lead-in per side.
    pub warmup_seconds: f64,
    /// Value size.
    pub value_bytes: usize,
    /// Which members the clients used.
    pub target: Target,
    /// Heartbeat interval, ms (both systems).
    pub heartbeat_ms: u64,
    /// Election timeout, ms (both systems).
    pub election_ms: u64,
    /// Whether both systems ran with TLS on their client and peer ports.
    pub tls: bool,
    /// Whether bellwether read linearizably from the leader's lease.
    pub lease_reads: bool,
    /// The bellwether cluster.
    pub bellwether: SideReport,
    /// The etcd cluster.
    pub etcd: SideReport,
    /// bellwether over etcd.
    pub ratios: Ratios,
}

/// One system's load and memory.
#[derive(Clone, Debug, Serialize)]
pub struct SideReport {
    /// Name and version.
    pub system: String,
    /// The endpoints loaded.
    pub endpoints: Vec<String>,
    /// The member that led when the load started (1-based).
    pub leader: usize,
    /// Throughput and latency.
    pub load: KvReport,
    /// VmRSS per member (index 0 is member 1) just before the load, KiB.
    pub idle_kib: Vec<Option<u64>>,
    /// Largest VmRSS per member sampled during the load, KiB.
    pub under_load_kib_max: Vec<Option<u64>>,
    /// Largest `RssAnon` per member sampled during the load, KiB: the
    /// resident memory that is the member's own (heap, stacks), without
    /// the pages mapped from files (the program's code, which the three
    /// members share; etcd's mmapped database).
    pub under_load_anon_kib_max: Vec<Option<u64>>,
}

impl SideReport {
    /// The largest member's peak, KiB.
    pub fn largest_member_kib(&self) -> Option<u64> {
        self.under_load_kib_max.iter().flatten().copied().max()
    }

    /// The largest member's peak anonymous memory, KiB.
    pub fn largest_member_anon_kib(&self) -> Option<u64> {
        self.under_load_anon_kib_max.iter().flatten().copied().max()
    }
}

/// bellwether's figure over etcd's; `None` when etcd's is zero or missing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ratios {
    /// Above 1: bellwether answers more per second.
    pub throughput_bellwether_over_etcd: Option<f64>,
    /// Below 1: bellwether's median is lower.
    pub latency_p50_bellwether_over_etcd: Option<f64>,
    /// Below 1: bellwether's 99th percentile is lower.
    pub latency_p99_bellwether_over_etcd: Option<f64>,
    /// Largest member's peak RSS; below 1: bellwether uses less.
    pub memory_max_bellwether_over_etcd: Option<f64>,
    /// The same for anonymous memory (`RssAnon`), which leaves out pages
    /// mapped from files. Reported beside the RSS ratio, not instead.
    pub anon_memory_max_bellwether_over_etcd: Option<f64>,
}

impl Ratios {
    /// The ratios of two sides' figures.
    pub fn of(bellwether: &SideReport, etcd: &SideReport) -> Ratios {
        let memory = |side: &SideReport| side.largest_member_kib().map(|k| k as f64);
        let anon = |side: &SideReport| side.largest_member_anon_kib().map(|k| k as f64);
        // A side that completed nothing has no latency (its 0 is no figure).
        let latency = |side: &SideReport, pick: fn(&KvReport) -> f64| {
            (side.load.completed > 0).then(|| pick(&side.load))
        };
        let p50 = |load: &KvReport| load.latency_ms_p50;
        let p99 = |load: &KvReport| load.latency_ms_p99;
        Ratios {
            throughput_bellwether_over_etcd: ratio(
                Some(bellwether.load.per_second),
                Some(etcd.load.per_second),
            ),
            latency_p50_bellwether_over_etcd: ratio(latency(bellwether, p50), latency(etcd, p50)),
            latency_p99_bellwether_over_etcd: ratio(latency(bellwether, p99), latency(etcd, p99)),
            memory_max_bellwether_over_etcd: ratio(memory(bellwether), memory(etcd)),
            anon_memory_max_bellwether_over_etcd: ratio(anon(bellwether), anon(etcd)),
        }
    }
}

/// `ours / theirs` when both are known and finite and `theirs` is positive.
pub fn ratio(ours: Option<f64>, theirs: Option<f64>) -> Option<f64> {
    let (ours, theirs) = (ours?, theirs?);
    (ours.is_finite() && theirs.is_finite() && theirs > 0.0).then(|| ours / theirs)
}

/// The third octets of the bellwether and etcd members' loopback IPs:
/// 200 + 2·((base / 100) mod 12) and the next one, apart from `bench
/// failover`'s 230 and up, so both benchmarks can run at once.
pub fn nets(base_port: u16) -> (u8, u8) {
    let bellwether = 200 + ((base_port / 100) % 12) as u8 * 2;
    (bellwether, bellwether + 1)
}

/// Runs the comparison: bellwether first, then etcd.
pub fn run(settings: &CompareSettings) -> Result<CompareReport> {
    let interrupted = crate::bench_support::watch_for_interruption();
    let mut scratch = crate::bench_support::ScratchDir::create(settings.dir.as_deref(), "kv")?;
    let runtime = load::runtime()?;
    let measured = measure_both(settings, &scratch.path, &runtime, &interrupted);
    measured.map_err(|error| {
        scratch.keep_logs = true;
        anyhow::anyhow!("{error:#}\nlogs are kept in {}", scratch.path.display())
    })
}

/// Issues the TLS material when asked for, then measures bellwether, then
/// etcd, one cluster at a time.
fn measure_both(
    settings: &CompareSettings,
    dir: &Path,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<CompareReport> {
    let (bellwether_net, etcd_net) = nets(settings.base_port);
    let mut settings = settings.clone();
    let tls = if settings.tls {
        Some(issue_tls(dir, bellwether_net, etcd_net, &mut settings)?)
    } else {
        None
    };
    let settings = &settings;
    let bellwether = measure_bellwether(
        dir,
        bellwether_net,
        settings,
        tls.as_ref(),
        runtime,
        interrupted,
    )?;
    let etcd = measure_etcd(dir, etcd_net, settings, tls, runtime, interrupted)?;
    let ratios = Ratios::of(&bellwether, &etcd);
    Ok(CompareReport {
        op_description: settings.load.op.describe().to_string(),
        seconds: settings.load.seconds,
        warmup_seconds: settings.load.warmup_seconds,
        value_bytes: settings.load.value_bytes,
        target: settings.target,
        heartbeat_ms: settings.heartbeat_ms,
        election_ms: settings.election_ms,
        tls: settings.tls,
        lease_reads: settings.lease_reads,
        bellwether,
        etcd,
        ratios,
    })
}

/// Issues a throwaway CA and certificates in `dir/tls` valid for both
/// clusters' member IPs, points the load's client at them, and returns
/// the members' files.
fn issue_tls(
    dir: &Path,
    bellwether_net: u8,
    etcd_net: u8,
    settings: &mut CompareSettings,
) -> Result<EtcdTls> {
    let tls_dir = dir.join("tls");
    let hosts: Vec<String> = std::iter::once("127.0.0.1".to_string())
        .chain(
            (1..=NODES)
                .flat_map(|i| [bellwether_net, etcd_net].map(|net| format!("127.0.{net}.{i}"))),
        )
        .collect();
    bellwether_cli_common::certs::issue(&tls_dir, &["member".into(), "client".into()], &hosts)?;
    bellwether_cli_common::certs::issue(&tls_dir.join("peer"), &["member".into()], &hosts)?;
    settings.load.tls = Some(super::tls_client_config(
        &tls_dir.join(bellwether_cli_common::certs::CA_FILE),
        Some((&tls_dir.join("client.pem"), &tls_dir.join("client-key.pem"))),
    )?);
    Ok(EtcdTls {
        cert: tls_dir.join("member.pem"),
        key: tls_dir.join("member-key.pem"),
        ca: tls_dir.join(bellwether_cli_common::certs::CA_FILE),
        peer_cert: tls_dir.join("peer/member.pem"),
        peer_key: tls_dir.join("peer/member-key.pem"),
        peer_ca: tls_dir
            .join("peer")
            .join(bellwether_cli_common::certs::CA_FILE),
    })
}

/// Starts the bellwether cluster (with `tls`'s files, if any), measures
/// it, and kills its members before returning, so etcd starts alone.
fn measure_bellwether(
    dir: &Path,
    net: u8,
    settings: &CompareSettings,
    tls: Option<&EtcdTls>,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<SideReport> {
    let mut args = match tls {
        None => Vec::new(),
        Some(tls) => member_tls_flags(tls),
    };
    if settings.lease_reads {
        args.push("--lease-reads".to_string());
    }
    let mut cluster = ProcessCluster::start_with_args(
        ClusterLayout {
            dir: dir.join("bellwether"),
            net,
            base_port: settings.base_port,
            nodes: NODES,
            heartbeat_ms: settings.heartbeat_ms,
            election_ms: settings.election_ms,
        },
        args,
    )?;
    measure(&mut cluster, settings, runtime, interrupted)
    // The members are killed here, before etcd starts.
}

/// The `bellwether node` flags that make a member use `tls`'s files on
/// its client and peer ports and ask clients for certificates.
fn member_tls_flags(tls: &EtcdTls) -> Vec<String> {
    let path = |p: &std::path::Path| p.display().to_string();
    let (cert, key, ca) = (path(&tls.cert), path(&tls.key), path(&tls.ca));
    let (peer_cert, peer_key, peer_ca) = (
        path(&tls.peer_cert),
        path(&tls.peer_key),
        path(&tls.peer_ca),
    );
    [
        "--cert-file",
        &cert,
        "--key-file",
        &key,
        "--trusted-ca-file",
        &ca,
        "--client-cert-auth",
        "--peer-cert-file",
        &peer_cert,
        "--peer-key-file",
        &peer_key,
        "--peer-trusted-ca-file",
        &peer_ca,
    ]
    .map(String::from)
    .to_vec()
}

/// Installs etcd if it is missing, starts its cluster (with `tls`, if
/// any) and measures it.
fn measure_etcd(
    dir: &Path,
    net: u8,
    settings: &CompareSettings,
    tls: Option<EtcdTls>,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<SideReport> {
    let version = etcd_cluster::ensure_installed(dir)?;
    let mut cluster = EtcdCluster::start_with_tls(
        EtcdLayout {
            dir: dir.join("etcd"),
            net,
            nodes: NODES,
            heartbeat_ms: settings.heartbeat_ms,
            election_ms: settings.election_ms,
        },
        version,
        tls,
    )?;
    measure(&mut cluster, settings, runtime, interrupted)
}

/// Waits for a leader, loads the cluster while sampling memory.
fn measure(
    contender: &mut dyn Contender,
    settings: &CompareSettings,
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<SideReport> {
    let system = contender.system();
    let leadership = wait_agreement(contender, interrupted)?;
    let all = contender.client_endpoints();
    assert_eq!(all.len(), NODES, "one endpoint per member");
    let endpoints = match settings.target {
        Target::All => all,
        Target::Leader => vec![all[leadership.member - 1].clone()],
    };
    let pids: Vec<Option<u32>> = contender.members().iter().map(Member::pid).collect();
    let idle_kib: Vec<Option<u64>> = pids
        .iter()
        .map(|p| p.and_then(resident_kib).map(|(rss, _)| rss))
        .collect();
    let spec = LoadSpec {
        endpoints: endpoints.clone(),
        ..settings.load.clone()
    };
    tracing::info!(system = %system, leader = leadership.member, ?endpoints, "loading");
    let sampler = RssSampler::start(pids);
    let report = runtime.block_on(load::run(&spec, interrupted.clone()));
    let (under_load_kib_max, under_load_anon_kib_max) = sampler.stop();
    let report = report.with_context(|| format!("{system}: the load failed"))?;
    for member in contender.members_mut() {
        member
            .check_running()
            .with_context(|| format!("{system}: a member died during the load"))?;
    }
    Ok(SideReport {
        system,
        endpoints,
        leader: leadership.member,
        load: report,
        idle_kib,
        under_load_kib_max,
        under_load_anon_kib_max,
    })
}

/// Waits until every member follows one leader with its commit index.
pub(crate) fn wait_agreement(
    contender: &mut dyn Contender,
    interrupted: &AtomicBool,
) -> Result<Leadership> {
    let deadline = Instant::now() + AGREEMENT_TIME_MAX;
    loop {
        if let Some(leadership) = contender.agreed_leader() {
            assert!((1..=contender.members().len()).contains(&leadership.member));
            return Ok(leadership);
        }
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted while waiting for a leader");
        }
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
                "{}: the members did not agree on a leader within {AGREEMENT_TIME_MAX:?}; read {}",
                contender.system(),
                logs.join(", ")
            );
        }
        std::thread::sleep(AGREEMENT_POLL_INTERVAL);
    }
}

/// `VmRSS` and `RssAnon` of a process, KiB.
fn resident_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("VmRSS:")?, field("RssAnon:")?))
}

/// The largest RSS and the largest anonymous memory seen per process, KiB.
pub(crate) type MemoryMaxima = (Vec<Option<u64>>, Vec<Option<u64>>);

/// A thread that keeps the largest RSS seen per process until stopped.
pub(crate) struct RssSampler {
    /// Set to end the sampling.
    stop: Arc<AtomicBool>,
    /// The thread; it returns the maxima.
    thread: std::thread::JoinHandle<MemoryMaxima>,
}

impl RssSampler {
    pub(crate) fn start(pids: Vec<Option<u32>>) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut rss_max: Vec<Option<u64>> = vec![None; pids.len()];
            let mut anon_max: Vec<Option<u64>> = vec![None; pids.len()];
            let keep = |slot: &mut Option<u64>, kib: u64| {
                *slot = Some(slot.map_or(kib, |m| m.max(kib)));
            };
            while !flag.load(Ordering::SeqCst) {
                for (i, pid) in pids.iter().enumerate() {
                    if let Some((rss, anon)) = pid.and_then(resident_kib) {
                        keep(&mut rss_max[i], rss);
                        keep(&mut anon_max[i], anon);
                    }
                }
                std::thread::sleep(RSS_SAMPLE_INTERVAL);
            }
            (rss_max, anon_max)
        });
        RssSampler { stop, thread }
    }

    /// Stops sampling; returns the largest RSS and anonymous memory seen
    /// per process.
    pub(crate) fn stop(self) -> MemoryMaxima {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the sampler does not panic")
    }
}

/// Prints both sides and the ratios.
pub fn print_text(report: &CompareReport) {
    println!(
        "kv compare: {} · {} clients · {} conns · {} s (after {} s warm-up) · {}-byte values · target {:?} · heartbeat {} ms, election {} ms{}{}",
        report.bellwether.load.op,
        report.bellwether.load.clients,
        report.bellwether.load.conns,
        report.seconds,
        report.warmup_seconds,
        report.value_bytes,
        report.target,
        report.heartbeat_ms,
        report.election_ms,
        if report.tls {
            " · TLS with client certificates, clients and peers"
        } else {
            ""
        },
        if report.lease_reads {
            " · bellwether reads by lease"
        } else {
            ""
        }
    );
    println!("  one op: {}", report.op_description);
    for side in [&report.bellwether, &report.etcd] {
        let load = &side.load;
        println!(
            "  {:<18} {:>9.0} op/s  p50 {:.3} ms  p99 {:.3} ms  ({} ok, {} errors)  RSS max {}; anonymous max {}",
            side.system,
            load.per_second,
            load.latency_ms_p50,
            load.latency_ms_p99,
            load.completed,
            load.errors,
            memory_line(&side.under_load_kib_max),
            memory_line(&side.under_load_anon_kib_max)
        );
        if let Some(error) = &load.first_error {
            println!("    first error: {error}");
        }
    }
    let show = |r: Option<f64>| r.map_or("n/a".to_string(), |r| format!("{r:.2}×"));
    let ratios = &report.ratios;
    println!(
        "  bellwether/etcd: throughput {}, p50 {}, p99 {}, memory (largest member) {}, anonymous memory {}",
        show(ratios.throughput_bellwether_over_etcd),
        show(ratios.latency_p50_bellwether_over_etcd),
        show(ratios.latency_p99_bellwether_over_etcd),
        show(ratios.memory_max_bellwether_over_etcd),
        show(ratios.anon_memory_max_bellwether_over_etcd)
    );
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

    fn side(per_second: f64, p50: f64, kib: Vec<Option<u64>>) -> SideReport {
        SideReport {
            system: "x".into(),
            endpoints: vec![],
            leader: 1,
            load: KvReport {
                op: "put".into(),
                clients: 1,
                conns: 1,
                completed: 1,
                errors: 0,
                first_error: None,
                per_second,
                latency_ms_p50: p50,
                latency_ms_p99: p50 * 2.0,
            },
            idle_kib: vec![None; kib.len()],
            under_load_anon_kib_max: kib.iter().map(|k| k.map(|k| k / 2)).collect(),
            under_load_kib_max: kib,
        }
    }

    #[test]
    fn ratios_put_bellwether_over_etcd_and_use_the_largest_member() {
        let ours = side(3000.0, 0.5, vec![Some(10), Some(30), None]);
        let theirs = side(1000.0, 1.0, vec![Some(100), Some(120), Some(90)]);
        let ratios = Ratios::of(&ours, &theirs);
        assert_eq!(ratios.throughput_bellwether_over_etcd, Some(3.0));
        assert_eq!(ratios.latency_p50_bellwether_over_etcd, Some(0.5));
        assert_eq!(ratios.latency_p99_bellwether_over_etcd, Some(0.5));
        assert_eq!(ratios.memory_max_bellwether_over_etcd, Some(0.25));
        assert_eq!(ratios.anon_memory_max_bellwether_over_etcd, Some(0.25));
    }

    #[test]
    fn a_ratio_over_zero_or_a_missing_figure_is_unknown() {
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(f64::NAN), Some(1.0)), None);
        let ours = side(10.0, 1.0, vec![None, None, None]);
        let mut theirs = side(0.0, 1.0, vec![Some(1), Some(1), Some(1)]);
        theirs.load.completed = 0;
        let ratios = Ratios::of(&ours, &theirs);
        assert_eq!(ratios.throughput_bellwether_over_etcd, None);
        assert_eq!(ratios.latency_p50_bellwether_over_etcd, None);
        assert_eq!(ratios.memory_max_bellwether_over_etcd, None);
        assert_eq!(ratios.anon_memory_max_bellwether_over_etcd, None);
    }

    #[test]
    fn the_nets_differ_and_stay_below_bench_failovers() {
        for base in (1024..=65_000u16).step_by(100) {
            let (ours, theirs) = nets(base);
            assert!((200..230).contains(&ours) && theirs == ours + 1 && theirs < 230);
        }
    }
}

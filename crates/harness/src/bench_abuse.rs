//! `bellwether bench abuse`: an abusive client against a member's limits,
//! while a well-behaved client measures what the abuse costs it.
//!
//! A 3-member cluster is started. A well-behaved client puts for a while
//! alone (the baseline), then keeps putting, in windows of a few seconds,
//! while the abuser in turn:
//!
//! - opens `--connections` TCP connections to member 1 and holds them
//!   (the member closes those past `client_connections_max` at once; the
//!   well-behaved client therefore uses members 2 and 3);
//! - asks member 2 for `--watches` watchers, 4,096 to a stream on one
//!   connection (past the member-wide bound each create is refused);
//! - grants `--leases` leases (one-hour TTL) through every member until
//!   the store's lease bound refuses one.
//!
//! Reported: how many of each the members accepted and refused (with the
//! refusal), every member's peak RSS, and the well-behaved client's p99
//! per window against its baseline. A measurement, not a test.

use crate::bench_kv::compare::{wait_agreement, MemoryMaxima, RssSampler};
use crate::bench_kv::load::{self, KvReport, LoadSpec, Op};
use crate::bench_support::{watch_for_interruption, ScratchDir};
use crate::contender::Contender;
use crate::member_process::Member;
use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::{Context, Result};
use bellwether_api::etcdserverpb as pb;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Third octet of the members' peer addresses (other benches use 240–243).
const NET: u8 = 244;

/// One window of the well-behaved load under abuse.
const WINDOW_SECONDS: f64 = 5.0;

/// Watchers the abuser creates on one stream (the per-stream bound).
const WATCHERS_PER_STREAM: usize = bellwether_server::etcd::watch_service::WATCHERS_PER_STREAM_MAX;

/// The resident memory a member stays under with every client bound
/// reached at once, MiB: the bound docs/architecture.md states. The
/// member holding 65,536 watchers peaked at 78–97 MiB over session 27's
/// full runs, the others at 44–64 MiB.
pub const RSS_BOUND_MIB: u64 = 128;

/// Concurrent lease grants of the abuser.
const GRANTERS: usize = 128;

/// What the abuser is doing, for labelling the well-behaved client's
/// windows.
static PHASE: std::sync::Mutex<&str> = std::sync::Mutex::new("connections");

fn set_phase(phase: &'static str) {
    *PHASE.lock().expect("phase lock") = phase;
}

fn phase() -> &'static str {
    *PHASE.lock().expect("phase lock")
}

/// `bench abuse` options.
#[derive(clap::Args, Debug)]
pub struct AbuseArgs {
    /// TCP connections the abuser opens to member 1.
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Watchers the abuser asks member 2 for.
    #[arg(long, default_value_t = 100_000)]
    watches: usize,
    /// Leases the abuser asks for (by default one past the store's bound,
    /// `bellwether_kv::LEASES_MAX`).
    #[arg(long, default_value_t = 1_000_001)]
    leases: usize,
    /// Seconds of the well-behaved load alone, before the abuse.
    #[arg(long, default_value_t = 10.0)]
    baseline_seconds: f64,
    /// Closed-loop clients of the well-behaved load (puts).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Member i listens for peers on base+i, HTTP on base+100+i and the
    /// etcd API on base+200+i.
    #[arg(long, default_value_t = 16_000)]
    base_port: u16,
    /// Directory for the members' data and logs (default: a temporary one).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// One window of the well-behaved load under abuse.
#[derive(Debug, Serialize)]
pub struct Window {
    /// The abuser's phases at its start and end.
    pub during: String,
    /// Its p99, ms.
    pub p99_ms: f64,
    /// Its puts per second.
    pub per_second: f64,
    /// Its errors.
    pub errors: u64,
}

/// What the bench measured.
#[derive(Debug, Serialize)]
pub struct AbuseReport {
    /// The well-behaved load alone: p50 and p99, ms.
    pub baseline_p50_ms: f64,
    /// See `baseline_p50_ms`.
    pub baseline_p99_ms: f64,
    /// The well-behaved load under abuse, window by window.
    pub windows: Vec<Window>,
    /// The worst window's p99 over the baseline's.
    pub worst_p99_over_baseline: f64,
    /// Errors the well-behaved client saw under abuse.
    pub victim_errors: u64,
    /// Connections member 1 kept open, and closed at once.
    pub connections_held: usize,
    /// See `connections_held`.
    pub connections_closed: usize,
    /// Watchers created and refused, and the first refusal.
    pub watchers_created: usize,
    /// See `watchers_created`.
    pub watchers_refused: usize,
    /// See `watchers_created`.
    pub watch_refusal: Option<String>,
    /// Watchers the member cancelled on the stream being filled: they fell
    /// behind a compaction (each gives its place back). Cancels on streams
    /// filled earlier are not read, so creates accepted can exceed the
    /// member's bound while live watchers stay within it.
    pub watchers_compacted: usize,
    /// Leases granted and refused, the first refusal, and the seconds the
    /// grants took.
    pub leases_granted: u64,
    /// See `leases_granted`.
    pub leases_refused: u64,
    /// See `leases_granted`.
    pub lease_refusal: Option<String>,
    /// See `leases_granted`.
    pub lease_seconds: f64,
    /// Grants that failed for another reason and were asked again.
    pub lease_errors: u64,
    /// Peak VmRSS per member during the abuse, KiB.
    pub rss_kib_max: Vec<Option<u64>>,
    /// Peak anonymous RSS per member during the abuse, KiB.
    pub anon_kib_max: Vec<Option<u64>>,
    /// The bound every member's peak RSS should stay under, MiB.
    pub rss_bound_mib: u64,
    /// True when every member's peak RSS was read and is under it.
    pub rss_within_bound: bool,
}

/// Runs the bench.
pub fn execute(args: AbuseArgs) -> Result<std::process::ExitCode> {
    let interrupted = watch_for_interruption();
    // The abuser needs more open files than the usual soft limit allows.
    if let Err(error) = bellwether_cli_common::open_files::raise_soft_open_files_limit() {
        eprintln!("cannot raise the open-files limit: {error}");
    }
    let scratch = ScratchDir::create(args.dir.as_deref(), "abuse")?;
    let mut cluster = ProcessCluster::start(ClusterLayout {
        dir: scratch.path.join("bellwether"),
        net: NET,
        base_port: args.base_port,
        nodes: 3,
        heartbeat_ms: 100,
        election_ms: 1_000,
    })?;
    wait_agreement(&mut cluster, &interrupted)?;
    let endpoints = cluster.client_endpoints();
    // The well-behaved client uses members 2 and 3: member 1's connection
    // slots are the abuser's to fill, and a client that connects once they
    // are full is turned away, by design.
    let victim = |seconds: f64| LoadSpec {
        endpoints: endpoints[1..].to_vec(),
        op: Op::Put,
        clients: args.clients,
        conns: args.clients.min(4),
        seconds,
        warmup_seconds: 1.0,
        value_bytes: 64,
        tls: None,
    };
    let baseline = load::runtime()?.block_on(load::run(
        &victim(args.baseline_seconds),
        interrupted.clone(),
    ))?;
    eprintln!(
        "baseline: {:.0} puts/s, p50 {:.2} ms, p99 {:.2} ms",
        baseline.per_second, baseline.latency_ms_p50, baseline.latency_ms_p99
    );

    let pids: Vec<Option<u32>> = cluster.members().iter().map(Member::pid).collect();
    let sampler = RssSampler::start(pids);
    let abusing = Arc::new(AtomicBool::new(true));
    let windows = spawn_victim(victim(WINDOW_SECONDS), abusing.clone(), interrupted.clone());
    let abuse = abuse(&args, &endpoints);
    abusing.store(false, Ordering::SeqCst);
    let windows = windows.join().expect("the victim does not panic")?;
    let memory = sampler.stop();
    let outcome = abuse?;
    for member in cluster.members_mut() {
        member
            .check_running()
            .context("a member died under abuse")?;
    }
    let report = abuse_report(&baseline, windows, outcome, memory);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Starts the well-behaved client on a thread of its own: it runs `spec`
/// window after window while `abusing`, and returns the windows.
fn spawn_victim(
    spec: LoadSpec,
    abusing: Arc<AtomicBool>,
    interrupted: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<Vec<Window>>> {
    std::thread::spawn(move || -> Result<Vec<Window>> {
        let runtime = load::runtime()?;
        let mut windows = Vec::new();
        while abusing.load(Ordering::SeqCst) && !interrupted.load(Ordering::SeqCst) {
            let during = phase();
            let report = runtime.block_on(load::run(&spec, interrupted.clone()))?;
            let window = Window {
                during: format!("{during}..{}", phase()),
                p99_ms: report.latency_ms_p99,
                per_second: report.per_second,
                errors: report.errors,
            };
            eprintln!(
                "  under abuse ({}): p99 {:.2} ms",
                window.during, window.p99_ms
            );
            windows.push(window);
        }
        Ok(windows)
    })
}

/// The report of the baseline, the windows under abuse, what the abuser
/// achieved and the members' peak memory.
fn abuse_report(
    baseline: &KvReport,
    windows: Vec<Window>,
    outcome: Outcome,
    (rss_kib_max, anon_kib_max): MemoryMaxima,
) -> AbuseReport {
    let worst = windows.iter().map(|w| w.p99_ms).fold(0.0, f64::max);
    AbuseReport {
        baseline_p50_ms: baseline.latency_ms_p50,
        baseline_p99_ms: baseline.latency_ms_p99,
        worst_p99_over_baseline: worst / baseline.latency_ms_p99,
        victim_errors: windows.iter().map(|w| w.errors).sum(),
        windows,
        connections_held: outcome.connections_held,
        connections_closed: outcome.connections_closed,
        watchers_created: outcome.watchers_created,
        watchers_refused: outcome.watchers_refused,
        watch_refusal: outcome.watch_refusal,
        watchers_compacted: outcome.watchers_compacted,
        leases_granted: outcome.leases_granted,
        leases_refused: outcome.leases_refused,
        lease_refusal: outcome.lease_refusal,
        lease_seconds: outcome.lease_seconds,
        lease_errors: outcome.lease_errors,
        rss_within_bound: rss_kib_max
            .iter()
            .all(|kib| kib.is_some_and(|kib| kib < RSS_BOUND_MIB * 1024)),
        rss_bound_mib: RSS_BOUND_MIB,
        rss_kib_max,
        anon_kib_max,
    }
}

fn print_text(report: &AbuseReport) {
    let mib =
        |kib: &Option<u64>| kib.map_or("?".to_string(), |k| format!("{:.0}", k as f64 / 1024.0));
    println!("abuse bench (3 members):");
    println!(
        "  connections to n1: {} held, {} closed at once",
        report.connections_held, report.connections_closed
    );
    println!(
        "  watchers on n2: {} created, {} refused ({}), {} seen cancelled by compaction",
        report.watchers_created,
        report.watchers_refused,
        report.watch_refusal.as_deref().unwrap_or("-"),
        report.watchers_compacted
    );
    println!(
        "  leases: {} granted in {:.1} s, {} refused ({}), {} other errors asked again",
        report.leases_granted,
        report.lease_seconds,
        report.leases_refused,
        report.lease_refusal.as_deref().unwrap_or("-"),
        report.lease_errors
    );
    println!(
        "  peak RSS per member: {} MiB (anonymous: {} MiB); bound {} MiB: {}",
        report
            .rss_kib_max
            .iter()
            .map(mib)
            .collect::<Vec<_>>()
            .join(" / "),
        report
            .anon_kib_max
            .iter()
            .map(mib)
            .collect::<Vec<_>>()
            .join(" / "),
        report.rss_bound_mib,
        if report.rss_within_bound {
            "every member under it"
        } else {
            "NOT MET"
        }
    );
    println!(
        "  well-behaved puts: baseline p50 {:.2} ms, p99 {:.2} ms; worst window under abuse {:.2}x the baseline p99; {} errors",
        report.baseline_p50_ms,
        report.baseline_p99_ms,
        report.worst_p99_over_baseline,
        report.victim_errors
    );
    for window in &report.windows {
        println!(
            "    {WINDOW_SECONDS} s during {}: p99 {:.2} ms, {:.0} puts/s",
            window.during, window.p99_ms, window.per_second
        );
    }
}

/// What the abuser achieved.
#[derive(Default)]
struct Outcome {
    connections_held: usize,
    connections_closed: usize,
    watchers_created: usize,
    watchers_refused: usize,
    watch_refusal: Option<String>,
    watchers_compacted: usize,
    leases_granted: u64,
    leases_refused: u64,
    lease_refusal: Option<String>,
    lease_errors: u64,
    lease_seconds: f64,
}

/// The three abuses in turn; connections and watch streams stay open until
/// the leases are done.
fn abuse(args: &AbuseArgs, endpoints: &[String]) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    let held = hold_connections(&endpoints[0], args.connections, &mut outcome)?;
    eprintln!(
        "connections: {} held, {} closed",
        outcome.connections_held, outcome.connections_closed
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        set_phase("watchers");
        let streams = hold_watchers(&endpoints[1], args.watches, &mut outcome).await?;
        set_phase("holding");
        tokio::time::sleep(Duration::from_secs_f64(WINDOW_SECONDS * 2.0)).await;
        set_phase("leases");
        eprintln!(
            "watchers: {} created, {} refused, {} cancelled by compaction",
            outcome.watchers_created, outcome.watchers_refused, outcome.watchers_compacted
        );
        // Not through member 1: its connection slots are full.
        grant_leases(&endpoints[1..], args.leases, &mut outcome).await?;
        set_phase("done");
        eprintln!(
            "leases: {} granted, {} refused",
            outcome.leases_granted, outcome.leases_refused
        );
        drop(streams);
        anyhow::Ok(())
    })?;
    drop(held);
    Ok(outcome)
}

/// Opens `count` connections to `endpoint`, then counts those the member
/// closed.
fn hold_connections(
    endpoint: &str,
    count: usize,
    outcome: &mut Outcome,
) -> Result<Vec<std::net::TcpStream>> {
    use std::io::Read;
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        match std::net::TcpStream::connect(endpoint) {
            Ok(stream) => streams.push(stream),
            // Refused outright (a full backlog, or out of files): closed.
            Err(_) => outcome.connections_closed += 1,
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let mut open = Vec::new();
    for mut stream in streams {
        stream.set_nonblocking(true)?;
        let mut byte = [0u8; 64];
        // A member closes a connection past its bound at once; one it
        // keeps has sent its HTTP/2 settings or nothing yet.
        match stream.read(&mut byte) {
            Ok(0) => outcome.connections_closed += 1,
            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => outcome.connections_closed += 1,
            _ => open.push(stream),
        }
    }
    outcome.connections_held = open.len();
    Ok(open)
}

/// Watch streams kept open: each one's request sender and answers.
type HeldStream = (
    tokio::sync::mpsc::Sender<pb::WatchRequest>,
    tonic::Streaming<pb::WatchResponse>,
);

/// Asks for `count` watchers on one connection to `endpoint`, a stream per
/// [`WATCHERS_PER_STREAM`]; counts what was created and refused.
async fn hold_watchers(
    endpoint: &str,
    count: usize,
    outcome: &mut Outcome,
) -> Result<Vec<HeldStream>> {
    use bellwether_api::etcdserverpb::watch_client::WatchClient;
    let channel = tonic::transport::Channel::from_shared(format!("http://{endpoint}"))?
        .connect()
        .await
        .context("the abuser cannot reach member 2")?;
    let mut held = Vec::new();
    let mut asked = 0;
    while asked < count {
        let batch = WATCHERS_PER_STREAM.min(count - asked);
        let (sender, receiver) = tokio::sync::mpsc::channel(256);
        let requests = tokio_stream_of(receiver);
        let mut answers = WatchClient::new(channel.clone())
            .watch(requests)
            .await?
            .into_inner();
        let feeder = {
            let sender = sender.clone();
            tokio::spawn(async move {
                for i in 0..batch {
                    let create = pb::WatchCreateRequest {
                        key: format!("abuse/{asked}/{i}").into_bytes(),
                        ..Default::default()
                    };
                    let request = pb::WatchRequest {
                        request_union: Some(pb::watch_request::RequestUnion::CreateRequest(create)),
                    };
                    if sender.send(request).await.is_err() {
                        return;
                    }
                }
            })
        };
        // Read until every create has its answer; a watcher cancelled by a
        // compaction meanwhile (it fell behind) is counted apart.
        let mut answered = 0;
        while answered < batch {
            let answer = tokio::time::timeout(Duration::from_secs(30), answers.message())
                .await
                .context("no watch answer within 30 s")??
                .context("the watch stream ended")?;
            if answer.created {
                answered += 1;
                if answer.canceled {
                    outcome.watchers_refused += 1;
                    outcome.watch_refusal.get_or_insert(answer.cancel_reason);
                } else {
                    outcome.watchers_created += 1;
                }
            } else if answer.canceled {
                outcome.watchers_compacted += 1;
            }
        }
        feeder.await?;
        held.push((sender, answers));
        asked += batch;
    }
    Ok(held)
}

fn tokio_stream_of(
    receiver: tokio::sync::mpsc::Receiver<pb::WatchRequest>,
) -> tonic::codegen::tokio_stream::wrappers::ReceiverStream<pb::WatchRequest> {
    tonic::codegen::tokio_stream::wrappers::ReceiverStream::new(receiver)
}

/// Grants up to `count` leases from [`GRANTERS`] concurrent callers over
/// every member, until a grant is refused for the store's bound.
async fn grant_leases(endpoints: &[String], count: usize, outcome: &mut Outcome) -> Result<()> {
    use bellwether_api::etcdserverpb::lease_client::LeaseClient;
    let mut clients = Vec::new();
    for endpoint in endpoints {
        let channel = tonic::transport::Channel::from_shared(format!("http://{endpoint}"))?
            .connect()
            .await?;
        clients.push(LeaseClient::new(channel));
    }
    let started = Instant::now();
    let asked = Arc::new(AtomicU64::new(0));
    let granted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let refusal = Arc::new(std::sync::Mutex::new(None::<String>));
    let mut tasks = Vec::new();
    for g in 0..GRANTERS {
        let mut client = clients[g % clients.len()].clone();
        let (asked, granted, refused, refusal, errors) = (
            asked.clone(),
            granted.clone(),
            refused.clone(),
            refusal.clone(),
            errors.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while asked.fetch_add(1, Ordering::SeqCst) < count as u64 {
                let grant = pb::LeaseGrantRequest { ttl: 3_600, id: 0 };
                match client.lease_grant(grant).await {
                    Ok(_) => {
                        granted.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                        refused.fetch_add(1, Ordering::SeqCst);
                        let mut first = refusal.lock().expect("refusal lock");
                        first.get_or_insert_with(|| status.message().to_string());
                        // The bound is reached: stop asking.
                        asked.store(u64::MAX / 2, Ordering::SeqCst);
                    }
                    Err(status) => {
                        // Anything else (a leader change) is not the
                        // bound: counted, and the grant is asked again.
                        asked.fetch_sub(1, Ordering::SeqCst);
                        if errors.fetch_add(1, Ordering::SeqCst) > 10_000 {
                            let mut first = refusal.lock().expect("refusal lock");
                            first.get_or_insert_with(|| status.message().to_string());
                            asked.store(u64::MAX / 2, Ordering::SeqCst);
                        }
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    outcome.leases_granted = granted.load(Ordering::SeqCst);
    outcome.leases_refused = refused.load(Ordering::SeqCst);
    outcome.lease_refusal = refusal.lock().expect("refusal lock").clone();
    outcome.lease_errors = errors.load(Ordering::SeqCst);
    outcome.lease_seconds = started.elapsed().as_secs_f64();
    Ok(())
}

//! `bellwether bench failover --pauses SECONDS`: what fast detection costs.
//!
//! A detector that suspects a silent leader after a few heartbeats is only
//! worth having if it does not depose healthy leaders. This run keeps a
//! 3-member cluster under a put load for SECONDS while, every 10 s, one
//! follower is SIGSTOPped for 300 ms (a GC pause, a stalled VM). The paused
//! follower wakes with its leader long silent, so its detector suspects it;
//! the others still hear the leader and refuse its pre-vote. The report
//! counts the leader changes seen (terms, polled every 50 ms from every
//! member) and the suspicions the members' detectors raised (their
//! `/status`), beside the load's throughput and errors. Leader changes must
//! stay 0; suspicions show the detector acting.
//!
//! With `--delay-ms` (and `--jitter-ms`) the members reach each other
//! through [`DelayRelay`]s, one in front of each member, so every peer
//! message and its answer pay the delay: the detector must not mistake a
//! slow network for a silent leader.

use crate::bench_failover::FailoverArgs;
use crate::contender::Contender;
use crate::delay_relay::{Delay, DelayRelay};
use crate::process_cluster::ProcessCluster;
use anyhow::{bail, Result};
use bellwether_cli_common::signals::{send_signal, SIGCONT, SIGSTOP};
use bellwether_server::NodeStatus;
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often a follower is paused, and for how long.
const PAUSE_EVERY: Duration = Duration::from_secs(10);
const PAUSE_FOR: Duration = Duration::from_millis(300);
/// How often every member's `/status` is read.
const POLL_EVERY: Duration = Duration::from_millis(50);
/// The load: clients and value size.
const LOAD_CLIENTS: usize = 16;
const LOAD_VALUE_BYTES: usize = 256;

/// What one disturbed run saw.
#[derive(Clone, Debug, Serialize)]
pub struct PausesReport {
    /// Length of the run, seconds.
    pub seconds: u64,
    /// Members.
    pub nodes: usize,
    /// Heartbeat, ms.
    pub heartbeat_ms: u64,
    /// Election timeout, ms.
    pub election_ms: u64,
    /// The detector's floor in heartbeats (0: off).
    pub detector_heartbeats: u64,
    /// Added one-way delay between members, ms (0: none).
    pub delay_ms: u64,
    /// Its jitter, ± ms.
    pub jitter_ms: u64,
    /// Followers paused.
    pub pauses: u64,
    /// How long each pause lasted, ms.
    pub pause_ms: u64,
    /// Times the term any member reported went up during the run.
    pub term_changes: u64,
    /// Leaders seen, in order (member numbers); one entry means no change.
    pub leaders: Vec<usize>,
    /// Suspicions the members' detectors raised during the run.
    pub suspicions: u64,
    /// The load's puts per second.
    pub puts_per_second: f64,
    /// The load's failed puts.
    pub put_errors: u64,
}

/// Runs the disturbed load for `seconds` (see the module docs), in
/// `--dir` or a temporary directory whose logs are kept on an error.
pub fn run(args: &FailoverArgs, seconds: u64) -> Result<PausesReport> {
    if seconds < PAUSE_EVERY.as_secs() {
        bail!("--pauses needs at least {} s", PAUSE_EVERY.as_secs());
    }
    let mut scratch = crate::bench_support::ScratchDir::create(args.dir.as_deref(), "pauses")?;
    run_in(args, seconds, &scratch.path).inspect_err(|_| scratch.keep_logs = true)
}

fn run_in(args: &FailoverArgs, seconds: u64, dir: &Path) -> Result<PausesReport> {
    let (net, _) = crate::bench_failover::nets(args.base_port);
    // Relays first: dropped after the cluster.
    let (_relays, mut cluster) = start_cluster(args, dir, net)?;
    let started = Instant::now();
    let first = loop {
        if let Some(leadership) = cluster.agreed_leader() {
            break leadership;
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("no leader within 30 s of starting");
        }
        std::thread::sleep(POLL_EVERY);
    };
    let suspicions_before = suspicions(&cluster);
    let load = crate::bench_failover::put_load_thread(
        cluster.client_endpoints(),
        LOAD_CLIENTS,
        seconds as f64,
        LOAD_VALUE_BYTES,
    );
    let mut leaders = vec![first.member];
    let mut term = first.term;
    let mut term_changes = 0;
    let mut pauses = 0;
    let mut next_pause = Instant::now() + PAUSE_EVERY / 2;
    let end = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < end {
        if Instant::now() >= next_pause {
            next_pause += PAUSE_EVERY;
            let leader = *leaders.last().expect("one leader at least");
            // Followers take turns.
            let followers: Vec<usize> = (1..=args.nodes).filter(|i| *i != leader).collect();
            let victim = followers[pauses as usize % followers.len()];
            pause(&cluster, victim)?;
            pauses += 1;
        }
        for status in statuses(&cluster) {
            if status.term > term {
                term_changes += status.term - term;
                term = status.term;
            }
            if status.role == bellwether_core::Role::Leader {
                let member = status.id.0 as usize;
                if leaders.last() != Some(&member) {
                    leaders.push(member);
                }
            }
        }
        std::thread::sleep(POLL_EVERY);
    }
    let report = load
        .join()
        .map_err(|_| anyhow::anyhow!("the load thread panicked"))??;
    Ok(PausesReport {
        seconds,
        nodes: args.nodes,
        heartbeat_ms: args.heartbeat_ms,
        election_ms: args.election_ms,
        detector_heartbeats: args.detector_heartbeats,
        delay_ms: args.delay_ms,
        jitter_ms: args.jitter_ms,
        pauses,
        pause_ms: PAUSE_FOR.as_millis() as u64,
        term_changes,
        leaders,
        suspicions: suspicions(&cluster).saturating_sub(suspicions_before),
        puts_per_second: report.per_second,
        put_errors: report.errors,
    })
}

/// Where member i's relay listens: its own peer IP, port base+50+i.
fn relay_address(args: &FailoverArgs, net: u8, i: usize) -> std::net::SocketAddr {
    let ip = std::net::Ipv4Addr::new(127, 0, net, i as u8);
    std::net::SocketAddr::from((ip, (args.base_port as usize + 50 + i) as u16))
}

/// The cluster, behind delaying relays when `--delay-ms` asks for them
/// (the relays come first, so that they outlive it).
fn start_cluster(
    args: &FailoverArgs,
    dir: &Path,
    net: u8,
) -> Result<(Vec<DelayRelay>, ProcessCluster)> {
    if args.delay_ms == 0 {
        return Ok((
            Vec::new(),
            crate::bench_failover::start_bellwether(args, dir, net)?,
        ));
    }
    let delay = Delay {
        mean: Duration::from_millis(args.delay_ms),
        jitter: Duration::from_millis(args.jitter_ms),
    };
    let layout = crate::bench_failover::bellwether_layout(args, dir, net);
    let relays = (1..=args.nodes)
        .map(|i| {
            let target = layout.peer_address(i).parse().expect("an IP and a port");
            DelayRelay::start(relay_address(args, net, i), target, delay, i as u64)
        })
        .collect::<Result<Vec<_>>>()?;
    let cluster = ProcessCluster::start_behind_relays(
        layout,
        crate::bench_failover::detector_args(args),
        |i| relay_address(args, net, i),
    )?;
    Ok((relays, cluster))
}

/// SIGSTOPs member `i` for [`PAUSE_FOR`]; a guard resumes it even if this
/// thread unwinds, so no member stays stopped.
fn pause(cluster: &ProcessCluster, i: usize) -> Result<()> {
    let Some(pid) = cluster.members()[i - 1].pid() else {
        bail!("member {i} is not running");
    };
    struct Resume(u32);
    impl Drop for Resume {
        fn drop(&mut self) {
            let _ = send_signal(self.0, SIGCONT);
        }
    }
    send_signal(pid, SIGSTOP)?;
    let _resume = Resume(pid);
    std::thread::sleep(PAUSE_FOR);
    Ok(())
}

/// Every member's `/status` that answered.
fn statuses(cluster: &ProcessCluster) -> Vec<NodeStatus> {
    (1..=cluster.members().len())
        .filter_map(|i| cluster.status(i))
        .collect()
}

/// The suspicions every member's detector has raised since it started.
fn suspicions(cluster: &ProcessCluster) -> u64 {
    statuses(cluster)
        .iter()
        .filter_map(|s| s.detector.map(|d| d.suspicions))
        .sum()
}

/// Prints the report.
pub fn print_text(report: &PausesReport) {
    println!(
        "pauses: {} s of {} clients putting {}-byte values on {} members (heartbeat {} ms, election timeout {} ms, detector floor {}, added delay {}), a follower SIGSTOPped for {} ms every {} s",
        report.seconds,
        LOAD_CLIENTS,
        LOAD_VALUE_BYTES,
        report.nodes,
        report.heartbeat_ms,
        report.election_ms,
        match report.detector_heartbeats {
            0 => "off".to_string(),
            n => format!("{n} heartbeats"),
        },
        match (report.delay_ms, report.jitter_ms) {
            (0, _) => "none".to_string(),
            (d, j) => format!("{d} ± {j} ms each way"),
        },
        report.pause_ms,
        PAUSE_EVERY.as_secs()
    );
    println!(
        "  pauses {} · suspicions {} · term changes {} · leaders {:?} · {:.0} put/s, {} errors",
        report.pauses,
        report.suspicions,
        report.term_changes,
        report.leaders,
        report.puts_per_second,
        report.put_errors
    );
}

//! `bench zookeeper --compare-zookeeper --failover-runs N`: what a
//! ZooKeeper client sees when a server fails, on a fresh 3-node bellwether
//! cluster and a fresh 3-server ZooKeeper 3.8 ensemble per run, in turn.
//! A measurement, never a test. Each run measures two things, in order:
//!
//! 1. **Election holder lost.** The holder is kazoo's `Election` recipe in
//!    a Python process of its own ([`super::kazoo_holder`]), its session
//!    on server 1, leading an election under a fresh parent; a contender
//!    session (on server 2) adds an ephemeral sequential node after it and
//!    watches the holder's node (`exists` with a watch), as the ZooKeeper
//!    election recipe and kazoo's `Election` do. The holder's process then
//!    gets SIGKILL (the kernel closes its socket; no closeSession). The
//!    figure is the time from the kill until the contender's watch fired
//!    and a fresh children list shows it alone (it holds), and that time
//!    minus the session timeout (4 s, both servers' smallest, granted to
//!    the holder and the contender alike), since the server may only end
//!    the session after that timeout.
//! 2. **Leader SIGKILL.** [`SESSIONS`] sessions, each given every server
//!    (the client picks one at random and moves on its own), each own an
//!    ephemeral node and setData it every [`WRITE_INTERVAL`], pipelined
//!    (at most [`INFLIGHT_MAX`] unanswered per session). The leader's
//!    process (bellwether: the member whose `/status` says leader;
//!    ZooKeeper: the server whose `srvr` says `Mode: leader`) gets SIGKILL.
//!    The figures: from the kill until the first write *sent after the
//!    kill* is acknowledged by any session (writes accepted again), until
//!    every session has had one acknowledged, the sessions that expired
//!    (the client reports `Expired`), and the ephemeral nodes that vanished
//!    (looked up afterwards through a live session).
//!
//! Only the leader commits a write in both systems, so a write sent after
//! the kill is acknowledged only once a new leader serves.

use super::kazoo_holder::KazooHolder;
use super::systems::{self, median, Side};
use crate::bench_kv::compare::{ratio, wait_agreement};
use crate::contender::Contender;
use crate::process_cluster::ProcessCluster;
use crate::zookeeper_ensemble::{EnsembleLayout, ZookeeperEnsemble};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// Sessions writing during a leader kill.
pub const SESSIONS: usize = 8;
/// Most failover runs.
pub const RUNS_MAX: usize = 50;
/// Each session sends a setData this often (open loop).
const WRITE_INTERVAL: Duration = Duration::from_millis(2);
/// Most unanswered writes of one session; a session that has this many
/// sends no more until one is answered.
const INFLIGHT_MAX: usize = 32;
/// Longest wait for one write's answer; later counts as failed.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Session timeout asked for by the leader-kill sessions (as the load's).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Session timeout asked for by the election sessions: ZooKeeper's
/// smallest at `tickTime=2000` (2 ticks), so a run waits less.
const ELECTION_SESSION_TIMEOUT: Duration = Duration::from_secs(4);
/// Longest wait after the kill for every session to write again.
const RECOVERY_TIME_MAX: Duration = Duration::from_secs(40);
/// Longest wait for the contender to hold after the holder's close.
const HOLD_TIME_MAX: Duration = Duration::from_secs(60);
/// Longest wait for one setup request (create, list).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the waits look at the sessions and the interruption flag.
const POLL: Duration = Duration::from_millis(2);
/// Writing before the kill, so every session is in its steady state.
const LEAD_IN: Duration = Duration::from_millis(1000);
/// What a member logs when its lease clock takes over as the leader's
/// (`bellwether_server::etcd::lessor`).
const LEASE_CLOCK_READY: &str = "lessor: primary";
/// Longest wait for that line.
const LEASE_CLOCK_WAIT_MAX: Duration = Duration::from_secs(10);
/// Data of each setData.
const VALUE_BYTES: usize = 64;

/// One leader kill.
#[derive(Clone, Debug, Serialize)]
pub struct LeaderKill {
    /// The member killed (1-based).
    pub killed: usize,
    /// Kill until the first write sent after it was acknowledged, ms.
    pub writes_again_ms: Option<f64>,
    /// Kill until every session had one acknowledged, ms; `None` when
    /// some session did not within [`RECOVERY_TIME_MAX`].
    pub all_sessions_ms: Option<f64>,
    /// Per session: kill until its first acknowledged write sent after
    /// it, ms.
    pub per_session_ms: Vec<Option<f64>>,
    /// Sessions the client reported expired.
    pub sessions_expired: usize,
    /// Sessions whose client saw its connection lost after the kill (its
    /// state left "connected"): those on the killed server, and any other
    /// server that dropped its clients.
    pub sessions_disconnected: usize,
    /// Sessions' ephemeral nodes missing afterwards.
    pub ephemerals_vanished: usize,
    /// Writes acknowledged before the kill (shows the sessions wrote).
    pub writes_before: u64,
}

/// One election holder lost.
#[derive(Clone, Debug, Serialize)]
pub struct HolderLoss {
    /// The holder's session timeout, ms.
    pub session_timeout_ms: f64,
    /// SIGKILL until the contender's watch fired, ms.
    pub watch_fired_ms: f64,
    /// SIGKILL until the contender saw itself alone (holds), ms.
    pub next_holds_ms: f64,
    /// `next_holds_ms` minus the session timeout, ms.
    pub over_timeout_ms: f64,
}

/// One system in one run.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverRun {
    /// Run, from 1.
    pub run: usize,
    /// Which system.
    pub side: Side,
    /// Name and version.
    pub system: String,
    /// The holder measure.
    pub holder: HolderLoss,
    /// The leader-kill measure.
    pub leader_kill: LeaderKill,
}

/// One system's medians over the runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailoverMedians {
    /// Kill until writes are accepted again, ms.
    pub writes_again_ms: Option<f64>,
    /// Kill until every session wrote again, ms.
    pub all_sessions_ms: Option<f64>,
    /// Holder's close until the next holds, ms.
    pub next_holds_ms: Option<f64>,
    /// That minus the session timeout, ms.
    pub over_timeout_ms: Option<f64>,
    /// Sessions expired, all runs together.
    pub sessions_expired: usize,
    /// Ephemeral nodes vanished, all runs together.
    pub ephemerals_vanished: usize,
}

/// The failover part of the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverReport {
    /// Runs per system.
    pub runs: usize,
    /// Writing sessions during a kill.
    pub sessions: usize,
    /// Every run, in the order they ran.
    pub all: Vec<FailoverRun>,
    /// bellwether's medians.
    pub bellwether: FailoverMedians,
    /// ZooKeeper's medians.
    pub zookeeper: FailoverMedians,
    /// ZooKeeper's median over bellwether's: how many times faster
    /// bellwether accepts writes again.
    pub writes_again_zookeeper_over_bellwether: Option<f64>,
    /// The same for every session writing again.
    pub all_sessions_zookeeper_over_bellwether: Option<f64>,
}

/// Runs `runs` failover runs, each on a fresh bellwether cluster and then
/// a fresh ZooKeeper ensemble.
pub fn run(
    runs: usize,
    dir: &Path,
    base_port: u16,
    nets: (u8, u8),
    runtime: &tokio::runtime::Runtime,
    interrupted: &Arc<AtomicBool>,
) -> Result<FailoverReport> {
    assert!((1..=RUNS_MAX).contains(&runs));
    let python = super::kazoo_holder::python()?;
    let mut all = Vec::with_capacity(2 * runs);
    for run in 1..=runs {
        let mut cluster = systems::start_bellwether(
            &dir.join(format!("failover{run}-bellwether")),
            nets.0,
            base_port,
        )?;
        let system = cluster.system();
        let leader = wait_agreement(&mut cluster, interrupted)?.member;
        wait_lease_clock(&cluster, leader, interrupted)?;
        let endpoints: Vec<String> = (1..=systems::NODES)
            .map(|i| bellwether_cli_common::up_layout::zookeeper_address(base_port, i))
            .collect();
        let holder = holder_loss(
            &python,
            &dir.join(format!("failover{run}-bellwether-holder")),
            &endpoints,
            runtime,
            interrupted,
        )
        .with_context(|| format!("{system}: the election holder measure failed"))?;
        let leader_kill = runtime
            .block_on(measure_leader_kill(&endpoints, interrupted, || {
                kill_bellwether(&mut cluster)
            }))
            .with_context(|| format!("{system}: the leader kill measure failed"))?;
        report_run(&system, &holder, &leader_kill);
        all.push(FailoverRun {
            run,
            side: Side::Bellwether,
            system,
            holder,
            leader_kill,
        });
        drop(cluster);
        let mut ensemble = ZookeeperEnsemble::start(EnsembleLayout {
            dir: dir.join(format!("failover{run}-zookeeper")),
            net: nets.1,
            servers: systems::NODES,
        })?;
        let (_, version) = ensemble.wait_ready(interrupted)?;
        let system = format!("zookeeper {version}");
        let endpoints = ensemble.client_endpoints();
        let holder = holder_loss(
            &python,
            &dir.join(format!("failover{run}-zookeeper-holder")),
            &endpoints,
            runtime,
            interrupted,
        )
        .with_context(|| format!("{system}: the election holder measure failed"))?;
        let leader_kill = runtime
            .block_on(measure_leader_kill(&endpoints, interrupted, || {
                kill_zookeeper(&mut ensemble)
            }))
            .with_context(|| format!("{system}: the leader kill measure failed"))?;
        report_run(&system, &holder, &leader_kill);
        all.push(FailoverRun {
            run,
            side: Side::Zookeeper,
            system,
            holder,
            leader_kill,
        });
    }
    Ok(summarize(runs, all))
}

fn report_run(system: &str, holder: &HolderLoss, kill: &LeaderKill) {
    tracing::info!(
        system,
        next_holds_ms = holder.next_holds_ms,
        over_timeout_ms = holder.over_timeout_ms,
        writes_again_ms = kill.writes_again_ms,
        all_sessions_ms = kill.all_sessions_ms,
        expired = kill.sessions_expired,
        "failover run done"
    );
}

/// Waits until the leader's lease clock has taken over (its log says
/// [`LEASE_CLOCK_READY`]), at most [`LEASE_CLOCK_WAIT_MAX`]. Why: at its
/// takeover a new leader restarts every lease, hence every session, with
/// its full TTL plus an extension, so a holder lost before then would be
/// measured with that takeover and not with its session timeout.
fn wait_lease_clock(
    cluster: &ProcessCluster,
    leader: usize,
    interrupted: &AtomicBool,
) -> Result<()> {
    let member = &cluster.members()[leader - 1];
    let deadline = Instant::now() + LEASE_CLOCK_WAIT_MAX;
    while !member.log_of_this_start().contains(LEASE_CLOCK_READY) {
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted while waiting for the leader's lease clock");
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                leader,
                "the leader's log did not say its lease clock took over; measuring anyway"
            );
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// SIGKILLs the member that says it leads; returns its number.
fn kill_bellwether(cluster: &mut ProcessCluster) -> Result<usize> {
    let leader = cluster
        .claimed_leader()
        .context("no bellwether member says it leads")?;
    cluster.members_mut()[leader - 1].kill()?;
    Ok(leader)
}

/// SIGKILLs the server whose `srvr` says it leads; returns its number.
fn kill_zookeeper(ensemble: &mut ZookeeperEnsemble) -> Result<usize> {
    let leader = ensemble
        .leader()
        .context("no ZooKeeper server says it leads")?;
    ensemble.servers_mut()[leader - 1].kill()?;
    Ok(leader)
}

/// A session on `connect_string` (one or more host:port, comma-separated).
async fn open(connect_string: &str, timeout: Duration) -> Result<zk::Client> {
    let attempt = zk::Client::connector()
        .with_session_timeout(timeout)
        .connect(connect_string);
    tokio::time::timeout(REQUEST_TIMEOUT, attempt)
        .await
        .map_err(|_| anyhow::anyhow!("no session on {connect_string} within {REQUEST_TIMEOUT:?}"))?
        .with_context(|| format!("cannot open a session on {connect_string}"))
}

/// One setup request within [`REQUEST_TIMEOUT`].
async fn request<T>(
    what: &str,
    future: impl std::future::Future<Output = Result<T, zk::Error>>,
) -> Result<T> {
    tokio::time::timeout(REQUEST_TIMEOUT, future)
        .await
        .map_err(|_| anyhow::anyhow!("{what}: no answer within {REQUEST_TIMEOUT:?}"))?
        .with_context(|| what.to_string())
}

/// A node name unique to this run.
fn unique(prefix: &str) -> String {
    let tag = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("/{prefix}-{tag}")
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The election holder measure (see the module's docs), its holder's
/// script and log in `dir`.
fn holder_loss(
    python: &Path,
    dir: &Path,
    endpoints: &[String],
    runtime: &tokio::runtime::Runtime,
    interrupted: &AtomicBool,
) -> Result<HolderLoss> {
    assert!(endpoints.len() >= 2);
    let parent = unique("bellwether-election");
    let mut holder = KazooHolder::start(python, dir, &endpoints[0], &parent)?;
    let contender = runtime.block_on(open(&endpoints[1], ELECTION_SESSION_TIMEOUT))?;
    if contender.session_timeout() != holder.session_timeout {
        bail!(
            "the contender was granted a session timeout of {:?}, not the {:?} both asked for",
            contender.session_timeout(),
            holder.session_timeout
        );
    }
    let sequential = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let watcher = runtime.block_on(async {
        request(
            "create the contender's node",
            contender.create(&format!("{parent}/n-"), &[], &sequential),
        )
        .await?;
        let children = request("list the candidates", contender.list_children(&parent)).await?;
        let held: Vec<&String> = children.iter().filter(|c| !c.starts_with("n-")).collect();
        let [held] = held[..] else {
            bail!("expected the holder's node and the contender's, found {children:?}");
        };
        let (stat, watcher) = request(
            "watch the holder's node",
            contender.check_and_watch_stat(&format!("{parent}/{held}")),
        )
        .await?;
        stat.context("the holder's node vanished before its session ended")?;
        Ok(watcher)
    })?;
    let session_timeout = holder.session_timeout;
    let closed = Instant::now();
    holder.kill()?;
    let (fired, holds) = runtime.block_on(wait_next_holds(
        &contender,
        &parent,
        watcher,
        closed,
        interrupted,
    ))?;
    drop(contender);
    let next_holds = holds - closed;
    Ok(HolderLoss {
        session_timeout_ms: ms(session_timeout),
        watch_fired_ms: ms(fired - closed),
        next_holds_ms: ms(next_holds),
        over_timeout_ms: ms(next_holds) - ms(session_timeout),
    })
}

/// Waits for the contender's watch on the holder's node, then lists the
/// candidates; returns when the watch fired and when the contender saw
/// itself alone, hence lowest (it holds).
async fn wait_next_holds(
    contender: &zk::Client,
    parent: &str,
    watcher: zk::OneshotWatcher,
    closed: Instant,
    interrupted: &AtomicBool,
) -> Result<(Instant, Instant)> {
    let deadline = closed + HOLD_TIME_MAX;
    let changed = watcher.changed();
    tokio::pin!(changed);
    let fired = loop {
        tokio::select! {
            _event = &mut changed => break Instant::now(),
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted while waiting for the holder's session to end");
        }
        if Instant::now() >= deadline {
            bail!("the holder's node did not go within {HOLD_TIME_MAX:?}");
        }
    };
    let children = request("list the candidates", contender.list_children(parent)).await?;
    if children.len() != 1 {
        bail!("after the holder's session ended, candidates {children:?} remain");
    }
    Ok((fired, Instant::now()))
}

/// What the writers share.
struct Shared {
    /// When the leader was killed (set just after the signal was sent).
    killed_at: OnceLock<Instant>,
    /// Per session: the first acknowledgement of a write sent after the
    /// kill.
    first_after: Mutex<Vec<Option<Instant>>>,
    /// Writes acknowledged before the kill.
    writes_before: AtomicUsize,
}

/// The leader-kill measure (see the module's docs); `kill` sends SIGKILL
/// and says which member it killed.
async fn measure_leader_kill(
    endpoints: &[String],
    interrupted: &AtomicBool,
    kill: impl FnOnce() -> Result<usize>,
) -> Result<LeaderKill> {
    let (sessions, paths) = open_writing_sessions(endpoints).await?;
    let shared = Arc::new(Shared {
        killed_at: OnceLock::new(),
        first_after: Mutex::new(vec![None; SESSIONS]),
        writes_before: AtomicUsize::new(0),
    });
    let mut writers = tokio::task::JoinSet::new();
    for (i, (session, path)) in sessions.iter().zip(&paths).enumerate() {
        writers.spawn(write_loop(i, session.clone(), path.clone(), shared.clone()));
    }
    tokio::time::sleep(LEAD_IN).await;
    // Any change of a connected session's state is a lost connection.
    let mut disconnected = tokio::task::JoinSet::new();
    for session in &sessions {
        let mut state = session.state_watcher();
        disconnected.spawn(async move {
            state.changed().await;
        });
    }
    let killed = kill()?;
    let killed_at = Instant::now();
    shared.killed_at.set(killed_at).expect("killed once");
    let deadline = killed_at + RECOVERY_TIME_MAX;
    loop {
        let all_wrote = shared
            .first_after
            .lock()
            .unwrap()
            .iter()
            .all(Option::is_some);
        let done = sessions
            .iter()
            .zip(shared.first_after.lock().unwrap().iter())
            .all(|(s, first)| first.is_some() || s.state().is_terminated());
        if all_wrote || done || Instant::now() >= deadline {
            break;
        }
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted during a leader kill");
        }
        tokio::time::sleep(POLL).await;
    }
    writers.abort_all();
    let mut sessions_disconnected = 0;
    while let Some(Ok(())) = disconnected.try_join_next() {
        sessions_disconnected += 1;
    }
    disconnected.abort_all();
    let first_after = shared.first_after.lock().unwrap().clone();
    let per_session_ms: Vec<Option<f64>> = first_after
        .iter()
        .map(|t| t.map(|t| ms(t - killed_at)))
        .collect();
    let sessions_expired = sessions
        .iter()
        .filter(|s| s.state() == zk::SessionState::Expired)
        .count();
    let ephemerals_vanished = vanished(&sessions, &first_after, &paths).await?;
    Ok(LeaderKill {
        killed,
        writes_again_ms: per_session_ms.iter().flatten().copied().reduce(f64::min),
        all_sessions_ms: per_session_ms
            .iter()
            .copied()
            .collect::<Option<Vec<f64>>>()
            .and_then(|all| all.into_iter().reduce(f64::max)),
        per_session_ms,
        sessions_expired,
        sessions_disconnected,
        ephemerals_vanished,
        writes_before: shared.writes_before.load(Ordering::SeqCst) as u64,
    })
}

/// Opens [`SESSIONS`] sessions, each given every server (its own first;
/// the client shuffles them anyway), and gives each an ephemeral node
/// under a fresh parent; returns the sessions and their nodes.
async fn open_writing_sessions(endpoints: &[String]) -> Result<(Vec<zk::Client>, Vec<String>)> {
    let mut sessions = Vec::with_capacity(SESSIONS);
    for i in 0..SESSIONS {
        // Every server, this session's own first (the client shuffles).
        let mut list = endpoints.to_vec();
        list.rotate_left(i % endpoints.len());
        sessions.push(open(&list.join(","), SESSION_TIMEOUT).await?);
    }
    let parent = unique("bellwether-failover");
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    request(
        "create the parent",
        sessions[0].create(&parent, &[], &persistent),
    )
    .await?;
    let paths: Vec<String> = (0..SESSIONS).map(|i| format!("{parent}/s{i}")).collect();
    for (session, path) in sessions.iter().zip(&paths) {
        request(
            "create a session's node",
            session.create(path, &[], &ephemeral),
        )
        .await?;
    }
    Ok((sessions, paths))
}

/// One session's open loop of setData, until aborted.
async fn write_loop(i: usize, session: zk::Client, path: String, shared: Arc<Shared>) {
    let inflight = Arc::new(AtomicUsize::new(0));
    let data: Arc<[u8]> = vec![b'x'; VALUE_BYTES].into();
    let mut ticks = tokio::time::interval(WRITE_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut writes = tokio::task::JoinSet::new();
    loop {
        ticks.tick().await;
        while writes.try_join_next().is_some() {}
        if inflight.load(Ordering::SeqCst) >= INFLIGHT_MAX {
            continue;
        }
        inflight.fetch_add(1, Ordering::SeqCst);
        let sent = Instant::now();
        let write = session.set_data(&path, &data, None);
        let (shared, inflight) = (shared.clone(), inflight.clone());
        writes.spawn(async move {
            let answer = tokio::time::timeout(WRITE_TIMEOUT, write).await;
            inflight.fetch_sub(1, Ordering::SeqCst);
            if !matches!(answer, Ok(Ok(_))) {
                return;
            }
            match shared.killed_at.get() {
                Some(killed_at) if sent >= *killed_at => {
                    let mut first = shared.first_after.lock().unwrap();
                    let now = Instant::now();
                    first[i] = Some(first[i].map_or(now, |t| t.min(now)));
                }
                Some(_) => {}
                None => {
                    shared.writes_before.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    }
}

/// How many of the sessions' ephemeral nodes are missing, looked up
/// through a session that wrote after the kill.
async fn vanished(
    sessions: &[zk::Client],
    first_after: &[Option<Instant>],
    paths: &[String],
) -> Result<usize> {
    let Some(live) = first_after.iter().position(Option::is_some) else {
        bail!("no session wrote after the kill within {RECOVERY_TIME_MAX:?}");
    };
    let mut missing = 0;
    for path in paths {
        let stat = request("look up a session's node", sessions[live].check_stat(path)).await?;
        missing += usize::from(stat.is_none());
    }
    Ok(missing)
}

/// Medians per system and ZooKeeper-over-bellwether ratios.
fn summarize(runs: usize, all: Vec<FailoverRun>) -> FailoverReport {
    let medians = |side: Side| {
        let of_side: Vec<&FailoverRun> = all.iter().filter(|r| r.side == side).collect();
        let of = |pick: &dyn Fn(&FailoverRun) -> Option<f64>| {
            median(of_side.iter().filter_map(|r| pick(r)).collect())
        };
        FailoverMedians {
            writes_again_ms: of(&|r| r.leader_kill.writes_again_ms),
            all_sessions_ms: of(&|r| r.leader_kill.all_sessions_ms),
            next_holds_ms: of(&|r| Some(r.holder.next_holds_ms)),
            over_timeout_ms: of(&|r| Some(r.holder.over_timeout_ms)),
            sessions_expired: of_side.iter().map(|r| r.leader_kill.sessions_expired).sum(),
            ephemerals_vanished: of_side
                .iter()
                .map(|r| r.leader_kill.ephemerals_vanished)
                .sum(),
        }
    };
    let (ours, theirs) = (medians(Side::Bellwether), medians(Side::Zookeeper));
    FailoverReport {
        runs,
        sessions: SESSIONS,
        writes_again_zookeeper_over_bellwether: ratio(theirs.writes_again_ms, ours.writes_again_ms),
        all_sessions_zookeeper_over_bellwether: ratio(theirs.all_sessions_ms, ours.all_sessions_ms),
        bellwether: ours,
        zookeeper: theirs,
        all,
    }
}

fn figure(value: Option<f64>) -> String {
    value.map_or("n/a".to_string(), |v| format!("{v:.1}"))
}

/// Prints every run, then the medians and ratios.
pub fn print_text(report: &FailoverReport) {
    println!(
        "  failover: {} runs per system, each on a fresh cluster; {} sessions writing (setData every {:?}, pipelined) during a leader SIGKILL",
        report.runs, report.sessions, WRITE_INTERVAL
    );
    for run in &report.all {
        let (holder, kill) = (&run.holder, &run.leader_kill);
        println!(
            "    run {} · {}: kazoo holder SIGKILL → watch fired {:.1} ms, next holds {:.1} ms (session timeout {:.0} ms, {:+.1} ms); leader #{} SIGKILL → writes again {} ms, all sessions {} ms (per session {}), expired {}, disconnected {}, ephemerals vanished {}, {} writes before",
            run.run,
            run.system,
            holder.watch_fired_ms,
            holder.next_holds_ms,
            holder.session_timeout_ms,
            holder.over_timeout_ms,
            kill.killed,
            figure(kill.writes_again_ms),
            figure(kill.all_sessions_ms),
            kill.per_session_ms
                .iter()
                .map(|t| figure(*t))
                .collect::<Vec<_>>()
                .join("/"),
            kill.sessions_expired,
            kill.sessions_disconnected,
            kill.ephemerals_vanished,
            kill.writes_before
        );
    }
    for (name, m) in [
        ("bellwether", &report.bellwether),
        ("zookeeper", &report.zookeeper),
    ] {
        println!(
            "    medians {name}: writes again {} ms, all sessions {} ms, next holder {} ms ({} ms over the session timeout); expired {}, vanished {}",
            figure(m.writes_again_ms),
            figure(m.all_sessions_ms),
            figure(m.next_holds_ms),
            figure(m.over_timeout_ms),
            m.sessions_expired,
            m.ephemerals_vanished
        );
    }
    println!(
        "    zookeeper / bellwether: writes again {}×, all sessions {}×",
        report
            .writes_again_zookeeper_over_bellwether
            .map_or("n/a".to_string(), |r| format!("{r:.1}")),
        report
            .all_sessions_zookeeper_over_bellwether
            .map_or("n/a".to_string(), |r| format!("{r:.1}"))
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(side: Side, run: usize, again: Option<f64>, holds: f64) -> FailoverRun {
        FailoverRun {
            run,
            side,
            system: format!("{side:?}"),
            holder: HolderLoss {
                session_timeout_ms: 4000.0,
                watch_fired_ms: holds - 1.0,
                next_holds_ms: holds,
                over_timeout_ms: holds - 4000.0,
            },
            leader_kill: LeaderKill {
                killed: 1,
                writes_again_ms: again,
                all_sessions_ms: again.map(|a| a * 2.0),
                per_session_ms: vec![again, again.map(|a| a * 2.0)],
                sessions_expired: usize::from(again.is_none()),
                sessions_disconnected: 1,
                ephemerals_vanished: 0,
                writes_before: 100,
            },
        }
    }

    #[test]
    fn medians_per_system_and_the_ratio_puts_zookeeper_over_bellwether() {
        let report = summarize(
            3,
            vec![
                run(Side::Bellwether, 1, Some(20.0), 4010.0),
                run(Side::Zookeeper, 1, Some(2000.0), 5000.0),
                run(Side::Bellwether, 2, Some(40.0), 4030.0),
                run(Side::Zookeeper, 2, Some(3000.0), 4500.0),
                run(Side::Bellwether, 3, None, 4020.0),
                run(Side::Zookeeper, 3, Some(1000.0), 4800.0),
            ],
        );
        assert_eq!(report.bellwether.writes_again_ms, Some(30.0));
        assert_eq!(report.zookeeper.writes_again_ms, Some(2000.0));
        assert_eq!(
            report.writes_again_zookeeper_over_bellwether,
            Some(2000.0 / 30.0)
        );
        assert_eq!(report.bellwether.over_timeout_ms, Some(20.0));
        assert_eq!(report.zookeeper.next_holds_ms, Some(4800.0));
        assert_eq!(report.bellwether.sessions_expired, 1);
        assert_eq!(report.zookeeper.sessions_expired, 0);
    }
}

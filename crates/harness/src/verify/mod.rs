//! `bellwether verify`: Jepsen-style runs of real member processes. Each
//! run starts a 3- or 5-member cluster of `bellwether node` processes,
//! runs one workload's clients over the etcd API while a nemesis kills,
//! pauses and partitions members (`nemesis.rs`), heals everything, and
//! checks the history. One file per workload, its clients and its check:
//!
//! - **register** (`register.rs`): linearizability, with the simulator's
//!   checker (`bellwether_sim::linearizability`);
//! - **set** (`set.rs`): every acknowledged write is read back at the end,
//!   and nothing appears that nobody wrote;
//! - **election** (`election.rs`): fenced writes land in token order;
//! - **lease** (`lease.rs`, `lease_check.rs`): leases expire exactly once,
//!   never early, each with all its keys in one revision;
//! - **zookeeper** (`zookeeper*.rs`): over ZooKeeper's protocol instead,
//!   contenders lead in turn through ephemeral sequential nodes and write
//!   a register through multi(check, setData) fencing: linearizable, never
//!   two holders at once, no acknowledged write lost.
//! - **kubernetes** (`kubernetes*.rs`): what kube-apiserver does to etcd
//!   (optimistic creates, updates and deletes, paginated lists at a
//!   revision, counts, watches from a list's revision with progress
//!   requests, resumed after breaks, re-listed after compaction), checked
//!   against etcd's watch guarantees; `--against-etcd` runs the same on a
//!   real etcd 3.4 cluster.
//!
//! It prints a verdict per run and exits 1 if any run found an anomaly,
//! keeping that run's history (`history.json`) and member logs.

mod disk_full;
mod disk_loss;
mod election;
mod health;
mod kubernetes;
mod kubernetes_check;
mod kubernetes_etcd;
mod kubernetes_history;
mod kubernetes_watch;
mod lease;
mod lease_check;
mod lease_watch;
mod nemesis;
mod register;
mod session;
mod set;
mod zookeeper;
mod zookeeper_check;
mod zookeeper_contender;
mod zookeeper_history;

use crate::contender::Contender;
use crate::partition::nft_unavailable;
use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::{bail, Context, Result};
use bellwether_client::Client;
use clap::{Args, ValueEnum};
use disk_full::{tmpfs_unavailable, DiskFull};
use disk_loss::Loss;
use election::ElectionHistory;
use lease::LeaseHistory;
use nemesis::{Fault, Faults, Outcome};
use register::RegisterHistory;
use set::SetHistory;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use zookeeper_contender::ZkSetup;
use zookeeper_history::ZkHistory;

/// Time after healing for the cluster to settle before the final reads.
const SETTLE: Duration = Duration::from_secs(2);
/// Clients per run, at most.
const CLIENTS_MAX: usize = 64;

/// What the clients do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Reads, writes and compare-and-sets on a few keys, checked for
    /// linearizability.
    Register,
    /// Unique writes, all read back at the end: none may be lost.
    Set,
    /// Campaigning clients whose fenced writes must land in token order.
    Election,
    /// Keys attached to leases, which must expire exactly once, never
    /// early, all of a lease's keys in one revision.
    Lease,
    /// Over ZooKeeper's protocol: contenders lead in turn (ephemeral
    /// sequential nodes) and write a register through multi(check,
    /// setData) fencing, which must be linearizable, never from two
    /// holders at once, and lose no acknowledged write.
    Zookeeper,
    /// What kube-apiserver does (KEP-4743's operations): optimistic
    /// writes, paginated lists at a revision, watches from a list's
    /// revision with progress requests; checked against etcd's watch
    /// guarantees (ordered, once, atomic txns, no gap, exact resumption,
    /// honest progress, list + watch replay = state).
    Kubernetes,
}

/// Flags of `bellwether verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// register (linearizability), set (no acknowledged write lost),
    /// election (fenced writes land in token order), lease (leases
    /// expire exactly once, never early) or zookeeper (fenced writes over
    /// ZooKeeper's protocol: linearizable, one holder at a time, none
    /// lost) or kubernetes (kube-apiserver's use of etcd: etcd's watch
    /// guarantees).
    #[arg(long, value_enum, default_value = "register")]
    workload: Workload,
    /// Members: 3 or 5.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// How long the clients and the nemesis run, per run.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Runs, each on a fresh cluster with the next seed.
    #[arg(long, default_value_t = 1)]
    runs: u64,
    /// Seed of the first run's schedule (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Members listen from this port up (peers +i, HTTP +100+i, etcd API
    /// +200+i, and for --workload zookeeper ZooKeeper's protocol +300+i).
    #[arg(long, default_value_t = 7_400)]
    base_port: u16,
    /// Third octet of the members' peer addresses (127.0.N.i).
    #[arg(long, default_value_t = 236)]
    net: u8,
    /// Where runs keep their data and logs (default: a temporary dir). A
    /// passing run's directory is removed.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// No nftables partitions (kills and pauses only), where nft cannot
    /// run.
    #[arg(long)]
    no_partitions: bool,
    /// No full disk: by default a small tmpfs is mounted under one
    /// member's data dir and filled now and then, which needs root.
    #[arg(long)]
    no_disk_full: bool,
    /// No damaged logs: by default a member is now and then stopped and
    /// its log deleted, cut short, corrupted or stripped of its newest
    /// write before it starts again, and it must repair from its peers.
    #[arg(long)]
    no_disk_loss: bool,
    /// Inject only this fault, every time: kill, pause, partition, bridge,
    /// power-cut, disk-full, disk-loss, disk-loss-behind-laggards or
    /// overlap (to reproduce one, or to show what one check catches).
    #[arg(long, value_name = "FAULT")]
    only_fault: Option<String>,
    /// How disk-loss faults damage a log: deleted, truncated, corrupted
    /// or lost-write (default: one of them at random each time).
    #[arg(long, value_name = "KIND")]
    disk_loss: Option<String>,
    /// UNSAFE, to show that the checks catch it: run the members with a
    /// runtime broken on purpose, answers-before-fsync,
    /// applies-before-commit or ignores-promises (see
    /// `bellwether_member::Runtime`).
    #[arg(long, value_name = "RUNTIME")]
    unsafe_mutation: Option<String>,
    /// Register reads that a member answers from its own state (etcd's
    /// serializable reads), which may be stale: a deliberately weak
    /// client, to show that the check catches what it must.
    #[arg(long)]
    serializable_reads: bool,
    /// Election (or zookeeper) writes without their fencing guard: a
    /// deliberately broken client, to show that the check catches a leader
    /// that woke from a hang and wrote after its successor.
    #[arg(long)]
    unfenced_writes: bool,
    /// With --workload kubernetes: run the same clients and check on a
    /// real etcd 3.4 cluster (`etcd` on 127.0.<net>.i:2379) instead, under
    /// kills, pauses and power cuts (no partitions, no full disk). An etcd
    /// older than 3.4.31 or 3.5.13 is asked for no progress, as
    /// kube-apiserver asks it for none (etcd-io/etcd#15220).
    #[arg(long)]
    against_etcd: bool,
}

/// One run's outcome.
struct Verdict {
    /// What was checked, for the report line.
    summary: String,
    /// The anomaly, if any.
    anomaly: Option<String>,
    /// The history, written out when the run failed.
    history_json: String,
}

/// Refuses flags a run cannot use, before anything starts: cluster size,
/// client count and length, and partitions where nftables cannot run.
fn check_args(args: &VerifyArgs) -> Result<()> {
    if args.nodes != 3 && args.nodes != 5 {
        bail!("--nodes must be 3 or 5");
    }
    if args.clients == 0 || args.clients > CLIENTS_MAX {
        bail!("--clients must be 1 to {CLIENTS_MAX}");
    }
    if args.seconds == 0 || args.runs == 0 {
        bail!("--seconds and --runs must be at least 1");
    }
    if args.against_etcd {
        if args.workload != Workload::Kubernetes || args.unsafe_mutation.is_some() {
            bail!("--against-etcd is for --workload kubernetes, without --unsafe-mutation");
        }
        return Ok(()); // neither partitions nor a full disk on etcd
    }
    if !args.no_partitions {
        if let Some(why) = nft_unavailable() {
            bail!("partitions need nftables: {why}; or pass --no-partitions");
        }
    }
    if args.serializable_reads && args.workload != Workload::Register {
        bail!("--serializable-reads is for --workload register");
    }
    if args.unfenced_writes && !matches!(args.workload, Workload::Election | Workload::Zookeeper) {
        bail!("--unfenced-writes is for --workload election or zookeeper");
    }
    if let Some(name) = &args.unsafe_mutation {
        if bellwether_member::Runtime::named(name).is_none() {
            bail!("--unsafe-mutation {name:?}: not a runtime (answers-before-fsync, applies-before-commit, ignores-promises)");
        }
    }
    if let Some(name) = &args.disk_loss {
        if Loss::named(name).is_none() {
            bail!("--disk-loss {name:?}: not a kind (deleted, truncated, corrupted, lost-write)");
        }
        if args.no_disk_loss {
            bail!("--disk-loss and --no-disk-loss contradict each other");
        }
    }
    if let Some(name) = &args.only_fault {
        let names: Vec<&str> = Fault::NAMES.iter().map(|(_, n)| *n).collect();
        let Some(fault) = Fault::named(name) else {
            bail!("--only-fault {name:?}: not a fault ({})", names.join(", "));
        };
        if !fault.allowed(faults_of(args), !args.no_disk_full) {
            bail!("--only-fault {name}: that fault is turned off by --no-partitions, --no-disk-full or --no-disk-loss");
        }
    }
    if !args.no_disk_full {
        if let Some(why) = tmpfs_unavailable() {
            bail!("a full disk needs a tmpfs mounted: {why}; or pass --no-disk-full");
        }
    }
    Ok(())
}

/// Runs `bellwether verify`.
pub fn execute(args: VerifyArgs) -> Result<ExitCode> {
    check_args(&args)?;
    let root = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("bellwether-verify-{}", std::process::id())),
    };
    let first_seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let mut failed = 0;
    for run in 0..args.runs {
        let seed = first_seed + run;
        let dir = root.join(format!("run-{seed}"));
        let started = std::time::Instant::now();
        let (mut verdict, outcome) = match args.against_etcd {
            true => kubernetes_etcd::run_once(&args, seed, &dir)?,
            false => run_once(&args, seed, &dir)?,
        };
        let took = started.elapsed().as_secs_f64();
        let faults: Vec<String> = outcome
            .actions
            .iter()
            .map(|(k, v)| format!("{v} × {k}"))
            .collect();
        if !outcome.exits.is_empty() {
            let exits = format!("members exited on their own: {}", outcome.exits.join("; "));
            verdict.anomaly = Some(match verdict.anomaly {
                Some(anomaly) => format!("{anomaly}; {exits}"),
                None => exits,
            });
        }
        match &verdict.anomaly {
            None => {
                println!(
                    "run {} seed {seed}: ok in {took:.0} s: {}; nemesis: {}",
                    run + 1,
                    verdict.summary,
                    faults.join(", ")
                );
                let _ = std::fs::remove_dir_all(&dir);
            }
            Some(anomaly) => {
                failed += 1;
                let path = dir.join("history.json");
                std::fs::write(&path, &verdict.history_json)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                println!(
                    "run {} seed {seed}: ANOMALY: {anomaly}; {}; nemesis: {}; history and member logs kept in {}",
                    run + 1,
                    verdict.summary,
                    faults.join(", "),
                    dir.display()
                );
            }
        }
    }
    let system = if args.against_etcd {
        "etcd"
    } else {
        "bellwether"
    };
    println!(
        "verify {:?} on {system}: {} of {} runs passed",
        args.workload,
        args.runs - failed,
        args.runs
    );
    if args.dir.is_none() && failed == 0 {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The flags every member of a run starts with: writes held until their
/// fsync (so that each SIGKILL is a power cut), and the mutation, if any.
fn member_args(args: &VerifyArgs) -> Vec<String> {
    let mut member_args = vec!["--hold-unsynced-writes".to_string()];
    if let Some(name) = &args.unsafe_mutation {
        member_args.push(format!("--unsafe-mutation={name}"));
    }
    member_args
}

/// Starts the run's members; for the zookeeper workload each also serves
/// ZooKeeper's protocol, where `bellwether up` would put it.
fn start_cluster(args: &VerifyArgs, layout: ClusterLayout) -> Result<ProcessCluster> {
    match args.workload {
        Workload::Zookeeper => {
            let base_port = args.base_port;
            let nodes = layout.nodes;
            ProcessCluster::start_with_member_args(layout, member_args(args), |i| {
                vec![
                    "--zookeeper-listen".to_string(),
                    zookeeper::zookeeper_address(base_port, i),
                    "--peer-zookeeper".to_string(),
                    bellwether_cli_common::up_layout::peer_zookeeper(base_port, nodes),
                ]
            })
        }
        _ => ProcessCluster::start_with_args(layout, member_args(args)),
    }
}

/// The faults a run may inject, as its flags say.
fn faults_of(args: &VerifyArgs) -> Faults {
    Faults {
        partitions: !args.no_partitions,
        disk_loss: !args.no_disk_loss,
        only: args.only_fault.as_deref().and_then(Fault::named),
        loss: args.disk_loss.as_deref().and_then(Loss::named),
    }
}

/// One run on a fresh cluster.
fn run_once(args: &VerifyArgs, seed: u64, dir: &Path) -> Result<(Verdict, Outcome)> {
    let _ = std::fs::remove_dir_all(dir);
    // Declared before the cluster, so dropped after its members stop.
    let disk = match args.no_disk_full {
        true => None,
        false => Some(DiskFull::mount(
            args.nodes,
            &dir.join(format!("n{}", args.nodes)),
        )?),
    };
    let layout = ClusterLayout {
        dir: dir.to_path_buf(),
        net: args.net,
        base_port: args.base_port,
        nodes: args.nodes,
        heartbeat_ms: 50,
        election_ms: 300,
    };
    if !args.no_partitions {
        nemesis::heal_leftovers(args.net);
    }
    let mut cluster = start_cluster(args, layout)?;
    let endpoints = cluster.client_endpoints();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let _inside = runtime.enter();
    let client = Client::connect(&endpoints)?;
    if let Err(error) = runtime.block_on(crate::bench_election::wait_ready(&client)) {
        // Members that fail at once (an assertion) are the anomaly.
        let mut outcome = Outcome::default();
        nemesis::restart_exited(&mut cluster, disk.as_ref(), &mut outcome)?;
        let verdict = Verdict {
            summary: "no operations".to_string(),
            anomaly: Some(format!("the cluster never took a write: {error:#}")),
            history_json: "{}".to_string(),
        };
        return Ok((verdict, outcome));
    }
    let span = Duration::from_secs(args.seconds);
    let origin = Instant::now();
    let until = origin + span;
    let channels = session::channels(&endpoints)?;
    let histories = Histories::default();
    let zookeeper = match args.workload {
        Workload::Zookeeper => {
            let addresses: Vec<String> = (1..=args.nodes)
                .map(|i| zookeeper::zookeeper_address(args.base_port, i))
                .collect();
            let setup = zookeeper::prepare(&addresses, seed, origin);
            Some(Arc::new(runtime.block_on(setup)?))
        }
        _ => None,
    };
    let watcher = match args.workload {
        Workload::Lease => Some(runtime.block_on(lease_watch::start_watcher(
            &client,
            channels.clone(),
            origin,
            histories.lease.clone(),
        ))?),
        _ => None,
    };
    let kubernetes = (args.workload == Workload::Kubernetes)
        .then(|| kubernetes::start(&channels, until, seed, true));
    let paced = |i| session::Session::new(i, channels.clone(), origin).paced(args.clients, span);
    let clients: Vec<_> = (0..args.clients as u64)
        .map(|i| match args.workload {
            Workload::Register => runtime.spawn(register::register_client(
                paced(i),
                until,
                seed,
                args.serializable_reads,
                histories.register.clone(),
            )),
            Workload::Set => runtime.spawn(set::set_client(paced(i), until, histories.set.clone())),
            Workload::Election => runtime.spawn(election::election_client(
                i,
                endpoints.clone(),
                until,
                !args.unfenced_writes,
                histories.election.clone(),
            )),
            Workload::Lease => runtime.spawn(lease::lease_client(
                session::Session::new(i, channels.clone(), origin),
                until,
                seed,
                histories.lease.clone(),
            )),
            Workload::Zookeeper => runtime.spawn(
                zookeeper_contender::Contender {
                    client: i,
                    setup: zookeeper
                        .clone()
                        .expect("set up for the zookeeper workload"),
                    until,
                    fenced: !args.unfenced_writes,
                    history: histories.zookeeper.clone(),
                    sequence: 0,
                }
                .run(),
            ),
            Workload::Kubernetes => runtime.spawn(kubernetes::object_client(
                paced(i),
                until,
                seed,
                kubernetes.as_ref().expect("started").history.clone(),
            )),
        })
        .collect();
    let faults = faults_of(args);
    let mut outcome = nemesis::run(&mut cluster, args.net, span, seed, faults, disk.as_ref())?;
    for task in clients {
        runtime.block_on(task)?;
    }
    std::thread::sleep(SETTLE);
    let mut verdict = match (watcher, &zookeeper) {
        _ if kubernetes.is_some() => {
            let run = kubernetes.expect("checked");
            runtime.block_on(run.finish(&channels, "bellwether"))?
        }
        (Some(watcher), _) => runtime.block_on(lease_watch::lease_verdict(
            &client,
            &channels,
            &histories.lease,
            watcher,
        ))?,
        (None, Some(setup)) => runtime.block_on(histories.zookeeper_verdict(setup))?,
        (None, None) => histories.verdict(args.workload, &runtime, &client)?,
    };
    if let Some(trouble) = runtime.block_on(health::final_health(&client, &channels)) {
        verdict.anomaly = Some(match verdict.anomaly {
            Some(anomaly) => format!("{anomaly}; {trouble}"),
            None => trouble,
        });
    }
    nemesis::restart_exited(&mut cluster, disk.as_ref(), &mut outcome)?;
    if verdict.anomaly.is_some() || !outcome.exits.is_empty() {
        if let Some(disk) = &disk {
            // Its data goes with the tmpfs: keep a copy with the logs.
            drop(cluster);
            disk.keep_copy(&dir.join(format!("n{}-data", args.nodes)));
        }
    }
    Ok((verdict, outcome))
}

/// What a run's clients record, one history per workload (only the chosen
/// workload's fills): shared with the client tasks, checked once they end.
#[derive(Default)]
struct Histories {
    register: Arc<Mutex<RegisterHistory>>,
    set: Arc<Mutex<SetHistory>>,
    election: Arc<Mutex<ElectionHistory>>,
    lease: Arc<Mutex<LeaseHistory>>,
    zookeeper: Arc<Mutex<ZkHistory>>,
}

impl Histories {
    /// Checks the history `workload` recorded; the set and election checks
    /// read the settled cluster through `client` first.
    fn verdict(
        &self,
        workload: Workload,
        runtime: &tokio::runtime::Runtime,
        client: &Client,
    ) -> Result<Verdict> {
        Ok(match workload {
            Workload::Register => {
                let history =
                    std::mem::take(&mut self.register.lock().expect("history").operations);
                register::register_verdict(history)
            }
            Workload::Set => {
                let history = std::mem::take(&mut *self.set.lock().expect("history"));
                runtime.block_on(set::set_verdict(client, history))?
            }
            Workload::Election => {
                let history = std::mem::take(&mut *self.election.lock().expect("history"));
                runtime.block_on(election::election_verdict(client, history))?
            }
            Workload::Lease => unreachable!("the lease verdict needs its watcher"),
            Workload::Zookeeper => unreachable!("the zookeeper verdict needs its setup"),
            Workload::Kubernetes => unreachable!("the kubernetes verdict needs its watchers"),
        })
    }

    /// Checks the zookeeper workload's history, with one more read of the
    /// register through `setup`.
    async fn zookeeper_verdict(&self, setup: &ZkSetup) -> Result<Verdict> {
        let history = std::mem::take(&mut *self.zookeeper.lock().expect("history"));
        zookeeper::zookeeper_verdict(setup, history).await
    }
}

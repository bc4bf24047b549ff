//! `bellwether bench raft`: commits per second of a 3-node Raft cluster
//! inside one process, with no network: messages pass between the nodes by
//! direct calls, as in openraft's `benchmarks/minimal`.
//!
//! Two threads: one "raft" thread drives all three nodes (proposals,
//! message delivery, persistence, application), and one tokio runtime runs
//! the clients. Each client sends a write and waits for its answer before
//! sending the next (closed loop). A write is answered once the leader has
//! applied it, that is after a quorum persisted it.
//!
//! `--storage memory` persists nothing (the log lives in the Raft core's
//! memory, like openraft's in-memory benchmark store). `--storage wal` gives
//! each node a write-ahead log in a temporary directory and fsyncs before
//! any message that depends on the write leaves: one fsync per node per
//! cycle, covering every write of that cycle (group commit).

use anyhow::{bail, Context, Result};
use bellwether_core::raft::{RaftConfig, RaftMessage, RaftNode, RaftOutput, RaftPersist};
use bellwether_core::{LogIndex, NodeId, Protocol, Rng, Role};
use bellwether_storage::{Storage, WalOptions, WalStorage};
use serde::Serialize;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Requests waiting for the raft thread, at most.
const REQUEST_QUEUE_MAX: usize = 65_536;
/// Requests taken per cycle, at most: bounds the batch and the latency of a
/// cycle.
const INTAKE_PER_CYCLE_MAX: usize = 4_096;
/// Every node compacts its log every this many entries.
const COMPACT_EVERY_ENTRIES: u64 = 65_536;
/// Wall-clock length of one Raft tick.
const TICK: Duration = Duration::from_millis(1);

/// Where the nodes persist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageKind {
    /// Nothing is written; the log lives in memory.
    Memory,
    /// A write-ahead log per node, fsync'd before acknowledging.
    Wal,
}

/// What the benchmark measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// Storage used.
    pub storage: StorageKind,
    /// Payload bytes per write.
    pub payload_bytes: usize,
    /// Measured wall time.
    pub seconds: f64,
    /// Writes answered.
    pub commits: u64,
    /// Writes answered per second.
    pub commits_per_second: f64,
    /// Latency from send to answer, median.
    pub latency_ms_p50: f64,
    /// Latency, 99th percentile.
    pub latency_ms_p99: f64,
    /// Threads: one for the three nodes, one for the clients.
    pub threads: usize,
    /// Cycles of the raft thread, and writes per cycle on average.
    pub cycles: u64,
}

type Reply = oneshot::Sender<()>;

/// Runs the benchmark.
pub fn run(
    nodes: usize,
    clients: usize,
    seconds: f64,
    storage: StorageKind,
    payload_bytes: usize,
) -> Result<BenchReport> {
    if nodes == 0 || clients == 0 || seconds <= 0.0 {
        bail!("--nodes, --clients and --seconds must be positive");
    }
    let (sender, receiver) = mpsc::channel::<(Vec<u8>, Reply)>(REQUEST_QUEUE_MAX);
    let directory = tempdir_for(storage)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let raft_stop = stop.clone();
    let raft_directory = directory.clone();
    let raft_thread = std::thread::Builder::new()
        .name("raft".into())
        .spawn(move || -> Result<u64> {
            let mut cluster = Cluster::new(nodes, storage, raft_directory.as_deref())?;
            cluster.elect()?;
            cluster.serve(receiver, &raft_stop)
        })
        .context("cannot start the raft thread")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("cannot start the client runtime")?;
    let (latencies, elapsed) =
        runtime.block_on(drive_clients(sender, clients, seconds, payload_bytes));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let cycles = raft_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the raft thread panicked"))??;
    if let Some(directory) = directory {
        let _ = std::fs::remove_dir_all(directory);
    }
    let mut all: Vec<u32> = latencies.into_iter().flatten().collect();
    all.sort_unstable();
    let pick = |q: f64| {
        all.get(((all.len() as f64 * q) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    Ok(BenchReport {
        nodes,
        clients,
        storage,
        payload_bytes,
        seconds: elapsed.as_secs_f64(),
        commits: all.len() as u64,
        commits_per_second: all.len() as f64 / elapsed.as_secs_f64(),
        latency_ms_p50: pick(0.5),
        latency_ms_p99: pick(0.99),
        threads: 2,
        cycles,
    })
}

fn tempdir_for(storage: StorageKind) -> Result<Option<PathBuf>> {
    if storage == StorageKind::Memory {
        return Ok(None);
    }
    let base = std::env::temp_dir().join(format!("bellwether-bench-{}", std::process::id()));
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    Ok(Some(base))
}

/// Closed-loop clients; returns each client's latencies in microseconds.
async fn drive_clients(
    sender: mpsc::Sender<(Vec<u8>, Reply)>,
    clients: usize,
    seconds: f64,
    payload_bytes: usize,
) -> (Vec<Vec<u32>>, Duration) {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let sender = sender.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let (reply, answer) = oneshot::channel();
                let sent = Instant::now();
                if sender
                    .send((vec![0u8; payload_bytes], reply))
                    .await
                    .is_err()
                {
                    break;
                }
                if answer.await.is_err() {
                    break;
                }
                latencies.push(sent.elapsed().as_micros().min(u32::MAX as u128) as u32);
            }
            latencies
        }));
    }
    drop(sender);
    let mut all = Vec::with_capacity(clients);
    for task in tasks {
        all.push(task.await.unwrap_or_default());
    }
    (all, start.elapsed())
}

/// Persistence of one node.
enum Disk {
    Memory,
    Wal(Box<WalStorage>),
}

impl Disk {
    fn persist(&mut self, persist: RaftPersist) -> Result<()> {
        let Disk::Wal(wal) = self else { return Ok(()) };
        if let Some(snapshot) = &persist.snapshot {
            wal.save_snapshot(snapshot)?;
        }
        if !persist.entries.is_empty() {
            wal.append(&persist.entries)?;
        }
        if let Some(hard_state) = &persist.hard_state {
            wal.save_hard_state(hard_state)?;
        }
        wal.sync()?;
        Ok(())
    }
}

/// Three Raft nodes wired by direct calls.
struct Cluster {
    nodes: Vec<RaftNode>,
    disks: Vec<Disk>,
    inboxes: Vec<VecDeque<(NodeId, RaftMessage)>>,
    /// Leader-side: clients waiting, in index order (`waiting_from` is the
    /// index of the first).
    waiting: VecDeque<Reply>,
    /// Log index of `waiting[0]`.
    waiting_from: LogIndex,
    leader: Option<usize>,
    last_tick: Instant,
    /// A compaction point reached by the leader's application.
    compact_due: Option<LogIndex>,
}

impl Cluster {
    fn new(
        count: usize,
        storage: StorageKind,
        directory: Option<&std::path::Path>,
    ) -> Result<Self> {
        let members: Vec<NodeId> = (1..=count as u64).map(NodeId).collect();
        let config = RaftConfig {
            uncommitted_entries_max: 1 << 20,
            ..RaftConfig::default()
        };
        let mut nodes = Vec::new();
        let mut disks = Vec::new();
        for id in &members {
            nodes.push(RaftNode::new(
                &config,
                *id,
                &members,
                Default::default(),
                Rng::new(id.0),
            ));
            disks.push(match (storage, directory) {
                (StorageKind::Wal, Some(dir)) => {
                    let path = dir.join(format!("n{}", id.0));
                    let mut wal = WalStorage::open(&path, WalOptions::default())
                        .with_context(|| format!("cannot open the WAL in {}", path.display()))?;
                    wal.recover()
                        .with_context(|| format!("cannot recover the WAL in {}", path.display()))?;
                    Disk::Wal(Box::new(wal))
                }
                _ => Disk::Memory,
            });
        }
        Ok(Cluster {
            inboxes: vec![VecDeque::new(); count],
            nodes,
            disks,
            waiting: VecDeque::new(),
            waiting_from: LogIndex(0),
            leader: None,
            last_tick: Instant::now(),
            compact_due: None,
        })
    }

    fn tick_if_due(&mut self) {
        while self.last_tick.elapsed() >= TICK {
            self.last_tick += TICK;
            for node in &mut self.nodes {
                node.tick();
            }
        }
    }

    /// Runs until a leader exists.
    fn elect(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.leader.is_none() {
            if Instant::now() > deadline {
                bail!("no leader elected within 10 s");
            }
            self.tick_if_due();
            self.pump()?;
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    /// Delivers messages and drains every node until all is quiet.
    fn pump(&mut self) -> Result<()> {
        loop {
            let mut busy = false;
            for i in 0..self.nodes.len() {
                while let Some((from, message)) = self.inboxes[i].pop_front() {
                    self.nodes[i].step(from, message);
                }
                if !self.nodes[i].has_ready() {
                    continue;
                }
                busy = true;
                let ready = self.nodes[i].ready();
                if let Some(persist) = ready.persist {
                    self.disks[i].persist(persist)?;
                }
                let from = NodeId(i as u64 + 1);
                for envelope in ready.messages {
                    self.inboxes[(envelope.to.0 - 1) as usize].push_back((from, envelope.message));
                }
                let is_leader = Some(i) == self.leader;
                for output in ready.output {
                    if let RaftOutput::Apply(entry) = output {
                        if is_leader && entry.index == self.waiting_from && !self.waiting.is_empty()
                        {
                            let reply = self.waiting.pop_front().expect("not empty");
                            let _ = reply.send(());
                            self.waiting_from = entry.index.next();
                        }
                        if is_leader && entry.index.0 % COMPACT_EVERY_ENTRIES == 0 {
                            self.compact_due = Some(entry.index);
                        }
                    }
                }
                if let Some(index) = self.compact_due.take() {
                    // Keep memory flat, as a state machine taking snapshots
                    // would; the payloads carry no state here.
                    for node in &mut self.nodes {
                        if node.applied_index() >= index {
                            let _ = node.compact(index, Vec::new());
                        }
                    }
                }
                if self.nodes[i].status().role == Role::Leader {
                    self.leader = Some(i);
                }
            }
            if !busy && self.inboxes.iter().all(|inbox| inbox.is_empty()) {
                return Ok(());
            }
        }
    }

    /// Serves client writes until told to stop. Returns the cycle count.
    fn serve(
        &mut self,
        mut requests: mpsc::Receiver<(Vec<u8>, Reply)>,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<u64> {
        let mut cycles = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let leader = self.leader.context("the leader was lost")?;
            let mut taken = 0;
            while taken < INTAKE_PER_CYCLE_MAX {
                let Ok((data, reply)) = requests.try_recv() else {
                    break;
                };
                taken += 1;
                match self.nodes[leader].propose(data) {
                    Ok(index) => {
                        if self.waiting.is_empty() {
                            self.waiting_from = index;
                        }
                        assert_eq!(
                            index.0,
                            self.waiting_from.0 + self.waiting.len() as u64,
                            "indexes are contiguous"
                        );
                        self.waiting.push_back(reply);
                    }
                    Err(error) => bail!("the leader refused a write: {error}"),
                }
            }
            self.tick_if_due();
            self.pump()?;
            cycles += 1;
            if taken == 0 && self.waiting.is_empty() {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Ok(cycles)
    }
}

//! `bellwether bench raft`: commits per second of a 3-node Raft cluster
//! inside one process, with no network: messages pass between the nodes by
//! direct calls, as in openraft's `benchmarks/minimal`.
//!
//! Two threads: one "raft" thread drives all three nodes (proposals,
//! message delivery, persistence, application), and one single-threaded
//! tokio runtime runs the clients, one task each. Each client sends a write
//! and waits for its own answer before sending the next (closed loop). A
//! write is answered once the leader has applied it, that is after a quorum
//! persisted it.
//!
//! The two threads meet at an [`Exchange`]: writes go one way and answers
//! the other, each as a vector swapped out whole, so one hand-off carries
//! every write (or answer) of a raft cycle and costs at most one wake-up.
//!
//! Latency is read from a coarse clock: the dispatcher task stamps it once
//! per batch of answers, just before waking that batch's clients, so a
//! client's send time is the stamp of the batch that woke it.
//!
//! `--storage memory` persists nothing (the log lives in the Raft core's
//! memory, like openraft's in-memory benchmark store). `--storage wal` gives
//! each node a write-ahead log in a temporary directory and fsyncs before
//! any message that depends on the write leaves: one fsync per node per
//! cycle, covering every write of that cycle (group commit).

use crate::latency::Latencies;
use anyhow::{bail, Context, Result};
use bellwether_core::raft::{RaftConfig, RaftMessage, RaftNode, RaftOutput, RaftPersist};
use bellwether_core::{LogIndex, NodeId, Protocol, Rng, Role};
use bellwether_storage::{Storage, WalOptions, WalStorage};
use serde::Serialize;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Clients, at most. Each has at most one write in flight, so this also
/// bounds the writes waiting for the raft thread and the writes of a cycle.
const CLIENTS_MAX: usize = 65_536;
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
    if clients > CLIENTS_MAX {
        bail!("--clients must be at most {CLIENTS_MAX}");
    }
    let exchange = Arc::new(Exchange::default());
    let directory = tempdir_for(storage)?;
    let stop = Arc::new(AtomicBool::new(false));
    let raft_stop = stop.clone();
    let raft_directory = directory.clone();
    let raft_exchange = exchange.clone();
    let raft_thread = std::thread::Builder::new()
        .name("raft".into())
        .spawn(move || -> Result<u64> {
            let served =
                Cluster::new(nodes, storage, raft_directory.as_deref()).and_then(|mut cluster| {
                    cluster.elect(&raft_exchange)?;
                    cluster.serve(&raft_exchange, &raft_stop)
                });
            raft_exchange.raft_stopped();
            served
        })
        .context("cannot start the raft thread")?;
    exchange
        .raft_thread
        .set(raft_thread.thread().clone())
        .expect("set once");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("cannot start the client runtime")?;
    let (latencies, elapsed) =
        runtime.block_on(drive_clients(exchange, clients, seconds, payload_bytes));
    stop.store(true, Ordering::Relaxed);
    let cycles = raft_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the raft thread panicked"))??;
    if let Some(directory) = directory {
        let _ = std::fs::remove_dir_all(directory);
    }
    let mut all = Latencies::default();
    for client in &latencies {
        all.merge(client);
    }
    Ok(BenchReport {
        nodes,
        clients,
        storage,
        payload_bytes,
        seconds: elapsed.as_secs_f64(),
        commits: all.count(),
        commits_per_second: all.count() as f64 / elapsed.as_secs_f64(),
        latency_ms_p50: all.quantile_ms(0.5),
        latency_ms_p99: all.quantile_ms(0.99),
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

/// A write on its way to the raft thread.
struct Request {
    /// The client that waits for it.
    client: u32,
    /// What it writes.
    data: Vec<u8>,
}

/// Where the client runtime and the raft thread meet. Each direction is a
/// vector swapped out whole under a mutex. Writes also raise a flag, so the
/// raft thread checks for them without taking the lock and is woken once
/// per batch; answers wake the dispatcher task through a `Notify`.
#[derive(Default)]
struct Exchange {
    /// Writes not yet taken by the raft thread, at most one per client.
    requests: Mutex<Vec<Request>>,
    /// `requests` gained a write since the raft thread last took them; the
    /// write that sets it unparks the raft thread.
    requests_posted: AtomicBool,
    /// The raft thread, unparked when a write arrives.
    raft_thread: OnceLock<std::thread::Thread>,
    /// Clients whose writes were applied and not yet told.
    answers: Mutex<Vec<u32>>,
    /// Wakes the dispatcher task.
    answers_ready: Notify,
    /// The raft thread is gone: no more answers will come.
    raft_stopped: AtomicBool,
}

impl Exchange {
    /// Client side: hands a write to the raft thread.
    fn submit(&self, request: Request) {
        self.requests.lock().expect("not poisoned").push(request);
        // Read before writing, so most writes of a batch leave the flag's
        // cache line shared. A stale `true` is impossible here: the raft
        // thread clears the flag before it takes the lock we just released.
        if !self.requests_posted.load(Ordering::Acquire)
            && !self.requests_posted.swap(true, Ordering::AcqRel)
        {
            if let Some(thread) = self.raft_thread.get() {
                thread.unpark();
            }
        }
    }

    /// Raft side: moves every waiting write into `into`, which is empty.
    fn take_requests(&self, into: &mut Vec<Request>) {
        assert!(into.is_empty(), "the previous batch was proposed");
        if !self.requests_posted.load(Ordering::Acquire) {
            return;
        }
        // Cleared before the swap: a write pushed after the swap sets it
        // again and is taken next cycle.
        self.requests_posted.store(false, Ordering::Release);
        std::mem::swap(&mut *self.requests.lock().expect("not poisoned"), into);
        assert!(into.len() <= CLIENTS_MAX, "one write per client at most");
    }

    /// Raft side: waits until a write arrives or about `timeout` passed.
    /// It sleeps rather than spins: on a machine as busy as ours (two cores,
    /// shared), spinning took the core from the very thread it waited for,
    /// and measured slower at 1, 64 and 256 clients.
    fn wait_for_requests(&self, timeout: Duration) {
        if !self.requests_posted.load(Ordering::Acquire) {
            std::thread::park_timeout(timeout);
        }
    }

    /// Raft side: tells the clients in `clients` (emptied) that their
    /// writes were applied.
    fn answer(&self, clients: &mut Vec<u32>) {
        if clients.is_empty() {
            return;
        }
        self.answers.lock().expect("not poisoned").append(clients);
        self.answers_ready.notify_one();
    }

    /// Raft side: no more answers will come.
    fn raft_stopped(&self) {
        self.raft_stopped.store(true, Ordering::Release);
        self.answers_ready.notify_one();
    }

    /// Client side: moves every posted answer into `into`, which is empty.
    fn take_answers(&self, into: &mut Vec<u32>) {
        assert!(into.is_empty(), "the previous answers were delivered");
        std::mem::swap(&mut *self.answers.lock().expect("not poisoned"), into);
    }
}

/// What the client tasks share with their dispatcher (all on the client
/// thread).
struct Board {
    /// One wake-up per client: its write was applied.
    answered: Vec<Notify>,
    /// Microseconds since the start, stamped once per batch of answers.
    clock_us: AtomicU64,
    /// The run is over: clients send no more writes.
    stop: AtomicBool,
    /// The raft thread failed: waiting clients give up.
    failed: AtomicBool,
    /// Every client finished: the dispatcher returns.
    closing: AtomicBool,
}

/// Closed-loop clients; returns each client's latencies.
async fn drive_clients(
    exchange: Arc<Exchange>,
    clients: usize,
    seconds: f64,
    payload_bytes: usize,
) -> (Vec<Latencies>, Duration) {
    let start = Instant::now();
    let board = Arc::new(Board {
        answered: (0..clients).map(|_| Notify::new()).collect(),
        clock_us: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        closing: AtomicBool::new(false),
    });
    let deadline_us = (seconds * 1e6) as u64;
    let dispatcher = tokio::spawn(dispatch(
        exchange.clone(),
        board.clone(),
        start,
        deadline_us,
    ));
    let mut tasks = Vec::with_capacity(clients);
    for client in 0..clients as u32 {
        let (exchange, board) = (exchange.clone(), board.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Latencies::default();
            while !board.stop.load(Ordering::Relaxed) {
                let sent_us = board.clock_us.load(Ordering::Relaxed);
                exchange.submit(Request {
                    client,
                    data: vec![0u8; payload_bytes],
                });
                board.answered[client as usize].notified().await;
                if board.failed.load(Ordering::Relaxed) {
                    break;
                }
                let answered_us = board.clock_us.load(Ordering::Relaxed);
                latencies.record_us(answered_us - sent_us);
            }
            latencies
        }));
    }
    let mut all = Vec::with_capacity(clients);
    for task in tasks {
        all.push(task.await.unwrap_or_default());
    }
    let elapsed = start.elapsed();
    board.closing.store(true, Ordering::Relaxed);
    exchange.answers_ready.notify_one();
    let _ = dispatcher.await;
    (all, elapsed)
}

/// Wakes the clients whose writes were applied, a batch at a time, and
/// keeps the coarse clock and the deadline.
async fn dispatch(exchange: Arc<Exchange>, board: Arc<Board>, start: Instant, deadline_us: u64) {
    let mut answered = Vec::new();
    loop {
        exchange.answers_ready.notified().await;
        if board.closing.load(Ordering::Relaxed) {
            return;
        }
        exchange.take_answers(&mut answered);
        let now_us = start.elapsed().as_micros() as u64;
        board.clock_us.store(now_us, Ordering::Relaxed);
        if now_us >= deadline_us {
            board.stop.store(true, Ordering::Relaxed);
        }
        for client in answered.drain(..) {
            board.answered[client as usize].notify_one();
        }
        if exchange.raft_stopped.load(Ordering::Acquire) {
            // Whoever still waits will never be answered.
            board.stop.store(true, Ordering::Relaxed);
            board.failed.store(true, Ordering::Relaxed);
            for answered in &board.answered {
                answered.notify_one();
            }
        }
    }
}

/// Persistence of one node.
enum Disk {
    Memory,
    Wal(Box<WalStorage>),
}

impl Disk {
    fn persist(&mut self, persist: RaftPersist) -> Result<()> {
        let Disk::Wal(wal) = self else { return Ok(()) };
        bellwether_storage::Storage::persist(&mut **wal, &persist)?;
        // What compaction set aside is deleted here, as the server does on
        // another thread.
        for path in wal.take_set_aside() {
            std::fs::remove_file(path)?;
        }
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
    waiting: VecDeque<u32>,
    /// Clients whose writes the leader applied this cycle, not yet told.
    answered: Vec<u32>,
    /// Log index of `waiting[0]`.
    waiting_from: LogIndex,
    leader: Option<usize>,
    last_tick: Instant,
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
            answered: Vec::new(),
            waiting_from: LogIndex(0),
            leader: None,
            last_tick: Instant::now(),
        })
    }

    /// Ticks every node once if a tick's worth of wall time passed. At most
    /// one tick per cycle: after a slow cycle (a long fsync on a busy disk)
    /// logical time runs late instead of jumping ahead by many ticks with no
    /// message delivered in between, which made followers time out and
    /// depose a healthy leader.
    fn tick_if_due(&mut self) {
        if self.last_tick.elapsed() >= TICK {
            self.last_tick = Instant::now();
            for node in &mut self.nodes {
                node.tick();
            }
        }
    }

    /// Runs until a leader exists.
    fn elect(&mut self, exchange: &Exchange) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.leader.is_none() {
            if Instant::now() > deadline {
                bail!("no leader elected within 10 s");
            }
            self.tick_if_due();
            self.pump(exchange)?;
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    /// Delivers messages and drains every node until all is quiet.
    fn pump(&mut self, exchange: &Exchange) -> Result<()> {
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
                            let client = self.waiting.pop_front().expect("not empty");
                            self.answered.push(client);
                            self.waiting_from = entry.index.next();
                        }
                    }
                }
                // Answer as soon as the leader applied, while the followers
                // still learn the new commit index.
                exchange.answer(&mut self.answered);
                self.compact_if_due(i);
                if self.nodes[i].status().role == Role::Leader {
                    self.leader = Some(i);
                }
            }
            if !busy && self.inboxes.iter().all(|inbox| inbox.is_empty()) {
                return Ok(());
            }
        }
    }

    /// Compacts node `i`'s log once it applied past a multiple of
    /// `COMPACT_EVERY_ENTRIES`, keeping memory flat as a state machine
    /// taking snapshots would (the payloads carry no state here). Each node
    /// compacts on its own progress: followers apply after the leader.
    fn compact_if_due(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let point =
            LogIndex(node.applied_index().0 / COMPACT_EVERY_ENTRIES * COMPACT_EVERY_ENTRIES);
        if point > node.log().snapshot_index() {
            node.compact(point, Vec::new())
                .expect("applied and not yet compacted");
        }
    }

    /// Serves client writes until told to stop. Returns the cycle count.
    fn serve(&mut self, exchange: &Exchange, stop: &AtomicBool) -> Result<u64> {
        let mut cycles = 0;
        let mut requests = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let leader = self.leader.context("the leader was lost")?;
            exchange.take_requests(&mut requests);
            let taken = requests.len();
            for request in requests.drain(..) {
                let index = match self.nodes[leader].propose(request.data) {
                    Ok(index) => index,
                    Err(error) => bail!("the leader refused a write: {error}"),
                };
                if self.waiting.is_empty() {
                    self.waiting_from = index;
                }
                assert_eq!(
                    index.0,
                    self.waiting_from.0 + self.waiting.len() as u64,
                    "indexes are contiguous"
                );
                self.waiting.push_back(request.client);
            }
            self.tick_if_due();
            self.pump(exchange)?;
            cycles += 1;
            if taken == 0 && self.waiting.is_empty() {
                exchange.wait_for_requests(TICK);
            }
        }
        Ok(cycles)
    }
}

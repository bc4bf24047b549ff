//! Measures WAL write throughput with fsync on: how many entries per second
//! become durable, first with fixed group-commit batches, then with closed-
//! loop clients (each submits one entry and waits for it to be durable)
//! whose requests a single writer thread batches, the way a node's event
//! loop would. Each load runs with the log alone and with the log and its
//! promise record, alternating, three rounds, and prints the ratio of the
//! medians: the record's cost.
//!
//! This is a measurement, not a test: it asserts nothing about speed.
//!
//! ```text
//! cargo run --release -p bellwether-storage --example wal_throughput -- [DIR] [SECONDS]
//! ```
//!
//! DIR defaults to a fresh temporary directory (put it on the disk you care
//! about); SECONDS (per scenario) defaults to 2.

use bellwether_core::raft::{Entry, Payload};
use bellwether_core::{LogIndex, Term};
use bellwether_storage::{MemoryStorage, RealFileSystem, Storage, WalOptions, WalStorage};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Bytes of each command, a typical small key-value write.
const COMMAND_BYTES: usize = 100;

/// Most entries the writer puts in one group commit; bounds its batch.
const BATCH_ENTRIES_MAX: usize = 4096;

fn entry(index: u64) -> Entry {
    Entry {
        term: Term(1),
        index: LogIndex(index),
        payload: Payload::Command(vec![b'x'; COMMAND_BYTES]),
    }
}

/// Appends `batch` entries then syncs, for `duration`; returns entries/s
/// and syncs/s.
fn fixed_batches(storage: &mut dyn Storage, batch: usize, duration: Duration) -> (f64, f64) {
    let start = Instant::now();
    let mut next = storage.last_index().0 + 1;
    let mut syncs = 0u64;
    let mut entries: Vec<Entry> = Vec::with_capacity(batch);
    while start.elapsed() < duration {
        entries.clear();
        entries.extend((next..next + batch as u64).map(entry));
        storage.append(&entries).expect("append");
        storage.sync().expect("sync");
        next += batch as u64;
        syncs += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    (
        (syncs * batch as u64) as f64 / seconds,
        syncs as f64 / seconds,
    )
}

/// One client request: the payload, and where to say it is durable.
type Request = (Vec<u8>, mpsc::Sender<()>);

/// Starts `clients` threads that each submit one entry at a time and wait
/// for its acknowledgement, until `deadline`.
fn start_clients(
    clients: usize,
    deadline: Instant,
) -> (mpsc::Receiver<Request>, Vec<thread::JoinHandle<()>>) {
    let (submit, requests) = mpsc::sync_channel::<Request>(clients);
    let handles = (0..clients)
        .map(|_| {
            let submit = submit.clone();
            thread::spawn(move || {
                let (ack, acked) = mpsc::channel();
                while Instant::now() < deadline {
                    let request = (vec![b'x'; COMMAND_BYTES], ack.clone());
                    if submit.send(request).is_err() || acked.recv().is_err() {
                        break;
                    }
                }
            })
        })
        .collect();
    (requests, handles)
}

/// Closed-loop clients against one writer that batches whatever is queued
/// into one append and one sync. Returns entries/s and the mean batch.
fn closed_loop(storage: &mut dyn Storage, clients: usize, duration: Duration) -> (f64, f64) {
    let (requests, handles) = start_clients(clients, Instant::now() + duration);
    let start = Instant::now();
    let mut next = storage.last_index().0 + 1;
    let (mut committed, mut batches) = (0u64, 0u64);
    let mut entries = Vec::with_capacity(BATCH_ENTRIES_MAX);
    let mut acks = Vec::with_capacity(BATCH_ENTRIES_MAX);
    while let Ok(first) = requests.recv() {
        let mut batch = vec![first];
        while batch.len() < BATCH_ENTRIES_MAX {
            match requests.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        for (data, ack) in batch {
            entries.push(Entry {
                term: Term(1),
                index: LogIndex(next + entries.len() as u64),
                payload: Payload::Command(data),
            });
            acks.push(ack);
        }
        storage.append(&entries).expect("append");
        storage.sync().expect("sync");
        next += entries.len() as u64;
        committed += entries.len() as u64;
        batches += 1;
        entries.clear();
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    for handle in handles {
        handle.join().expect("client thread");
    }
    (
        committed as f64 / seconds,
        committed as f64 / batches.max(1) as f64,
    )
}

/// Prints the median of each side and their ratio.
fn report_ratio(load: &str, rates: &mut [Vec<f64>; 2]) {
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let (alone, with) = (median(&mut rates[0]), median(&mut rates[1]));
    println!(
        "== {load}: median {alone:.0} (log only) / {with:.0} (with record) entries/s: {:.2}x",
        with / alone
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let temp = tempfile::tempdir().expect("temporary directory");
    let base: PathBuf = args
        .next()
        .map_or_else(|| temp.path().to_path_buf(), PathBuf::from);
    let seconds: f64 = args
        .next()
        .map_or(2.0, |s| s.parse().expect("SECONDS is a number"));
    let duration = Duration::from_secs_f64(seconds);
    println!(
        "WAL in {} ({COMMAND_BYTES}-byte commands, fsync on)",
        base.display()
    );

    // Each load twice, alternating, three rounds: the log alone, and the
    // log with its promise record (one more small fdatasync per sync that
    // changed it, `WalStorage::keep_promises`).
    let mut run = 0;
    let mut open = |promises: bool| {
        run += 1;
        let dir = base.join(format!("run-{run}"));
        let mut wal = WalStorage::open(dir.join("wal"), WalOptions::default()).expect("open");
        wal.recover().expect("recover");
        if promises {
            wal.keep_promises(&RealFileSystem::default(), &dir.join("promises"))
                .expect("promise record");
        }
        wal
    };
    let side = |promises: bool| if promises { "with record" } else { "log only" };
    for batch in [1usize, 16, 256, 1024] {
        let mut rates = [Vec::new(), Vec::new()];
        for _round in 0..3 {
            for promises in [false, true] {
                let mut wal = open(promises);
                let (entries, syncs) = fixed_batches(&mut wal, batch, duration);
                println!(
                    "fixed batch {batch:>5}, {:<11}: {entries:>10.0} entries/s  {syncs:>8.0} fsyncs/s",
                    side(promises)
                );
                rates[usize::from(promises)].push(entries);
            }
        }
        report_ratio(&format!("fixed batch {batch}"), &mut rates);
    }
    for clients in [1usize, 16, 256] {
        let mut rates = [Vec::new(), Vec::new()];
        for _round in 0..3 {
            for promises in [false, true] {
                let mut wal = open(promises);
                let (entries, batch) = closed_loop(&mut wal, clients, duration);
                println!(
                    "{clients:>4} clients, {:<11}: {entries:>10.0} entries/s  mean group commit {batch:.1} entries",
                    side(promises)
                );
                rates[usize::from(promises)].push(entries);
            }
        }
        report_ratio(&format!("{clients} clients"), &mut rates);
    }
    // Short: the memory store keeps every entry, and this never compacts.
    let mut memory = MemoryStorage::new();
    let short = duration.min(Duration::from_millis(500));
    let (entries, _) = fixed_batches(&mut memory, 256, short);
    println!("memory, batch 256:  {entries:>10.0} entries/s");
}
